package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// shimEnv marks a process as a container shim; its value is the path of the
// shim's JSON spec.
const shimEnv = "AGENTPLANE_LOCALNODE_SHIM"

// defaultPath is the PATH a container gets when its env sets none, as an
// image would.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// shimSpec is what the shim runs: one container process in a private mount
// namespace.
type shimSpec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir,omitempty"`
	// UID and GID apply when set (runAsUser, runAsGroup).
	UID *uint32 `json:"uid,omitempty"`
	GID *uint32 `json:"gid,omitempty"`
	// Groups, when non-nil, are the supplementary groups (image mode);
	// nil keeps the shim's own, as host mode always did.
	Groups []uint32 `json:"groups"`
	// Mounts are bind-mounted in order.
	Mounts []mountSpec `json:"mounts,omitempty"`
	// Root, when set, is the container's root (image mode): mounts are
	// made inside it and the command is chrooted into it.
	Root string `json:"root,omitempty"`
	// NetNS, when set, is the pod's network namespace (a path under
	// /run/netns) the command joins.
	NetNS string `json:"netns,omitempty"`
	// Hostname, when set, is the command's host name, in a UTS namespace
	// of its own.
	Hostname string `json:"hostname,omitempty"`
	// ReadOnlyRoot makes Root read-only once its mount points exist
	// (readOnlyRootFilesystem); volumes stay as they are.
	ReadOnlyRoot bool `json:"readOnlyRoot,omitempty"`
	// ExitFile receives the command's exitRecord; empty for probes.
	ExitFile string `json:"exitFile,omitempty"`
	// Timeout, when set, kills the command that long after it started
	// (exec probes).
	Timeout time.Duration `json:"timeout,omitempty"`
	// PgidFile, when set, puts the command in a process group of its own
	// and receives its id: the node signals that group, so the shim
	// survives a SIGKILL of the container to record its exit and reap it.
	PgidFile string `json:"pgidFile,omitempty"`
}

// mountSpec bind-mounts Source at Target.
type mountSpec struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// Optional mounts are skipped when they cannot be made (a termination
	// message path where no file can be created): the container runs
	// without them rather than not at all.
	Optional bool `json:"optional,omitempty"`
}

// exitRecord is how a container instance ended, written by the shim so a
// restarted node can still learn it.
type exitRecord struct {
	ExitCode   int32     `json:"exitCode"`
	Reason     string    `json:"reason"`
	Message    string    `json:"message,omitempty"`
	FinishedAt time.Time `json:"finishedAt"`
}

// init turns any binary importing this package into a shim when the marker
// is set; ordinary runs return at once.
func init() {
	spec := os.Getenv(shimEnv)
	if spec == "" {
		return
	}
	os.Exit(runShim(spec))
}

// runShim sets up the mount namespace and runs the container command. It
// returns the command's exit code.
func runShim(specPath string) int {
	raw, err := os.ReadFile(specPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "localnode shim: read spec: %v\n", err)
		return 128
	}
	var spec shimSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		fmt.Fprintf(os.Stderr, "localnode shim: parse spec %s: %v\n", specPath, err)
		return 128
	}
	// The node signals the command's own group; a stray terminal signal to
	// the shim must not stop it recording the exit. Notify (not Ignore) so
	// the command starts with default signal handling.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// A mount namespace belongs to a thread until it forks: keep the
	// unshare, the mounts and the fork on this one thread.
	runtime.LockOSThread()
	// Orphans of the container's processes are reparented to the shim
	// (not to a PID 1 that may never reap them).
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if err := spec.enterSandbox(); err != nil {
		return spec.finish(exitRecord{ExitCode: 128, Reason: "StartError", Message: err.Error()})
	}
	cmd, err := spec.command()
	if err != nil {
		return spec.finish(exitRecord{ExitCode: 127, Reason: "StartError", Message: err.Error()})
	}
	if err := cmd.Start(); err != nil {
		code := int32(127)
		if errors.Is(err, os.ErrPermission) {
			code = 126
		}
		return spec.finish(exitRecord{ExitCode: code, Reason: "StartError", Message: fmt.Sprintf("start %s: %v", spec.Argv[0], err)})
	}
	if s := spec.PgidFile; s != "" {
		_ = os.WriteFile(s, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	}
	if spec.Timeout > 0 {
		pid := cmd.Process.Pid
		time.AfterFunc(spec.Timeout, func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	}
	ws, werr := reap(cmd.Process.Pid)
	if spec.PgidFile != "" {
		// The container ends with its main process: stop what it left
		// behind in its group, then reap whatever was reparented to us.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		reapLeftovers()
	}
	rec := exitRecord{Reason: "Completed"}
	switch {
	case werr != nil:
		rec.Reason, rec.ExitCode, rec.Message = "Error", 128, werr.Error()
	case ws.Signaled():
		rec.Reason, rec.ExitCode = "Error", 128+int32(ws.Signal())
	case ws.ExitStatus() != 0:
		rec.Reason, rec.ExitCode = "Error", int32(ws.ExitStatus())
	}
	return spec.finish(rec)
}

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from linux/prctl.h.
const prSetChildSubreaper = 36

// reap waits for pid, reaping any other child that ends meanwhile (the shim
// is a subreaper).
func reap(pid int) (syscall.WaitStatus, error) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return ws, fmt.Errorf("wait for the container process: %w", err)
		}
		if got == pid {
			return ws, nil
		}
	}
}

// reapLeftovers reaps children that have already ended, briefly waiting
// for those just killed.
func reapLeftovers() {
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.ECHILD) {
			return
		}
		if got <= 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// finish writes the exit record (atomically, so a reader never sees half)
// and returns the exit code.
func (s *shimSpec) finish(rec exitRecord) int {
	rec.FinishedAt = time.Now().UTC()
	if rec.Message != "" {
		fmt.Fprintf(os.Stderr, "localnode: %s\n", rec.Message)
	}
	if s.ExitFile != "" {
		raw, _ := json.Marshal(rec)
		tmp := s.ExitFile + ".tmp"
		if err := os.WriteFile(tmp, raw, 0o644); err == nil {
			_ = os.Rename(tmp, s.ExitFile)
		}
	}
	return int(rec.ExitCode)
}

// enterSandbox puts this thread, and so the command it forks, into the
// pod's network namespace, a UTS namespace with the pod's host name and a
// private mount namespace with the container's mounts: inside Root in
// image mode, else over the host filesystem.
func (s *shimSpec) enterSandbox() error {
	if s.NetNS != "" {
		if err := joinNetNS(s.NetNS); err != nil {
			return err
		}
	}
	if s.Hostname != "" {
		if err := syscall.Unshare(syscall.CLONE_NEWUTS); err != nil {
			return fmt.Errorf("unshare UTS namespace: %w", err)
		}
		if err := syscall.Sethostname([]byte(s.Hostname)); err != nil {
			return fmt.Errorf("set host name: %w", err)
		}
	}
	if len(s.Mounts) == 0 && s.Root == "" {
		return nil
	}
	if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace (localnode needs root): %w", err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if s.Root != "" {
		if err := setupRoot(s.Root, s.Mounts); err != nil {
			return err
		}
		if s.Dir != "" {
			// A working directory the image lacks is created, as a
			// container runtime does.
			if _, err := mountPointIn(s.Root, s.Dir, true); err != nil {
				return err
			}
		}
		if s.ReadOnlyRoot {
			// Only the root's own mount: /proc, /dev and volumes keep
			// their modes.
			if err := syscall.Mount("", s.Root, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("make the container root read-only: %w", err)
			}
		}
		return nil
	}
	return mountOnHost(s.Mounts)
}

// mountOnHost bind-mounts each volume at its container path on the host
// filesystem (host mode), creating the mount point when it is missing.
func mountOnHost(mounts []mountSpec) error {
	for _, m := range mounts {
		if err := mountOneOnHost(m); err != nil && !m.Optional {
			return err
		}
	}
	return nil
}

func mountOneOnHost(m mountSpec) error {
	fi, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("volume source %s: %w", m.Source, err)
	}
	if err := ensureMountPoint(m.Target, fi.IsDir()); err != nil {
		return err
	}
	if err := syscall.Mount(m.Source, m.Target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mount %s at %s: %w", m.Source, m.Target, err)
	}
	if m.ReadOnly {
		if err := syscall.Mount("", m.Target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("remount %s read-only: %w", m.Target, err)
		}
	}
	return nil
}

func ensureMountPoint(target string, dir bool) error {
	if _, err := os.Stat(target); err == nil {
		return nil
	}
	if dir {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("create mount point %s: %w", target, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("create mount point parent %s: %w", filepath.Dir(target), err)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create mount point %s: %w", target, err)
	}
	return f.Close()
}

// command builds the container command, resolving argv[0] against the
// container's PATH, not the shim's.
func (s *shimSpec) command() (*exec.Cmd, error) {
	if len(s.Argv) == 0 {
		return nil, errors.New("no command")
	}
	var path string
	var err error
	if s.Root != "" {
		path, err = lookPathIn(s.Root, s.Argv[0], s.Env)
	} else {
		path, err = lookPath(s.Argv[0], s.Env)
	}
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: s.Argv, Env: s.Env, Dir: s.Dir, Stdin: nil, Stdout: os.Stdout, Stderr: os.Stderr}
	if s.Root != "" {
		// The child chroots before it changes directory and execs, so Dir
		// and Path are the container's.
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: s.Root}
		if s.Dir == "" {
			cmd.Dir = "/"
		}
	}
	if s.UID != nil || s.GID != nil || s.Groups != nil {
		cred := &syscall.Credential{NoSetGroups: s.Groups == nil, Groups: s.Groups}
		if s.UID != nil {
			cred.Uid = *s.UID
		}
		// Without runAsGroup the primary group is root's, as with an image
		// that names no group.
		if s.GID != nil {
			cred.Gid = *s.GID
		}
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = cred
	}
	if s.PgidFile != "" || s.Timeout > 0 {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Setpgid = true
	}
	return cmd, nil
}

func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in PATH %s", file, path)
}
