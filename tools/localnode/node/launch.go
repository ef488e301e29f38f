package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// instance is one run of one container: a shim process group whose pid,
// exit record and output FIFOs live in dir, so another localnode can adopt
// it.
type instance struct {
	container string
	restart   int
	dir       string
	logPath   string
	pid       int
	startedAt time.Time
	// imageID is the config digest of the image it runs from (image
	// mode), for the container status.
	imageID string
	// done closes once the process has ended and exit is set.
	done chan struct{}
	exit exitRecord
	pump *logPump
}

const (
	pidFile    = "pid"
	pgidFile   = "pgid"
	exitFile   = "exit.json"
	specFile   = "spec.json"
	stdoutPipe = "stdout.fifo"
	stderrPipe = "stderr.fifo"
)

// rootSource is where an image-mode container's root comes from: the
// image's unpacked rootfs (lower), under an overlay or copied. A zero
// rootSource is host mode.
type rootSource struct {
	lower   string
	overlay bool
}

// launch starts a container instance through the shim. Its stdout and
// stderr are FIFOs the shim holds open read-write, so the process never
// gets SIGPIPE while no localnode reads them; the node pumps them into the
// log file.
func launch(dir, logPath, container string, restart int, spec shimSpec, root rootSource) (*instance, error) {
	// An attempt that never started may have left a mounted root.
	unmountUnder(dir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clear instance dir %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create instance dir %s: %w", dir, err)
	}
	if err := createTerminationFile(dir); err != nil {
		return nil, err
	}
	if root.lower != "" {
		r, err := prepareRoot(root.lower, dir, root.overlay)
		if err != nil {
			releaseRoot(dir)
			return nil, err
		}
		spec.Root = r
	}
	spec.ExitFile = filepath.Join(dir, exitFile)
	spec.PgidFile = filepath.Join(dir, pgidFile)
	if err := writeSpec(filepath.Join(dir, specFile), spec); err != nil {
		return nil, err
	}
	var writers []*os.File
	defer func() {
		for _, f := range writers {
			_ = f.Close()
		}
	}()
	for _, name := range []string{stdoutPipe, stderrPipe} {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			return nil, fmt.Errorf("create output fifo %s: %w", p, err)
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("open output fifo %s: %w", p, err)
		}
		writers = append(writers, f)
	}
	// Open the readers while our write ends exist, so they never see an
	// early end of file.
	readers, err := openPipes(dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"localnode-shim", container}
	cmd.Env = []string{shimEnv + "=" + filepath.Join(dir, specFile)}
	cmd.Stdout, cmd.Stderr = writers[0], writers[1]
	// Its own session and process group: signals to the group reach the
	// command and anything it forked, and never the node.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		closeAll(readers)
		return nil, fmt.Errorf("start shim for container %s: %w", container, err)
	}
	in := &instance{container: container, restart: restart, dir: dir, logPath: logPath, pid: cmd.Process.Pid, startedAt: time.Now(), done: make(chan struct{})}
	start, _ := procStartTime(in.pid)
	pidLine := fmt.Sprintf("%d %d %d\n", in.pid, start, in.startedAt.UnixNano())
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(pidLine), 0o644); err != nil {
		_ = syscall.Kill(-in.pid, syscall.SIGKILL)
	}
	in.pump = pumpLogs(readers, logPath)
	go func() {
		werr := cmd.Wait()
		in.exit = readExit(dir, werr)
		// Report the end only once its output is in the log, so a reader
		// who sees the container terminated reads all of it.
		in.pump.wait(5 * time.Second)
		close(in.done)
	}()
	return in, nil
}

// adopt picks up an instance an earlier localnode left in dir. It reports
// false when there is nothing to adopt (the instance never started).
func adopt(dir, logPath, container string, restart int) (*instance, bool) {
	raw, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return nil, false
	}
	var pid int
	var start, startedNs int64
	if _, err := fmt.Sscanf(string(raw), "%d %d %d", &pid, &start, &startedNs); err != nil {
		return nil, false
	}
	in := &instance{container: container, restart: restart, dir: dir, logPath: logPath, pid: pid, startedAt: time.Unix(0, startedNs), done: make(chan struct{})}
	if !alive(pid, start) {
		in.exit = readExit(dir, errLost)
		close(in.done)
		return in, true
	}
	if readers, err := openPipes(dir); err == nil {
		in.pump = pumpLogs(readers, logPath)
	}
	go func() {
		// Not our child: poll until the process is gone.
		for alive(pid, start) {
			time.Sleep(250 * time.Millisecond)
		}
		in.exit = readExit(dir, errLost)
		in.pump.wait(5 * time.Second)
		close(in.done)
	}()
	return in, true
}

var errLost = errors.New("the container process ended while localnode was not watching it")

// readExit prefers the shim's exit record; without one (the shim was
// killed) it derives the exit from how the shim ended.
func readExit(dir string, werr error) exitRecord {
	if raw, err := os.ReadFile(filepath.Join(dir, exitFile)); err == nil {
		var rec exitRecord
		if json.Unmarshal(raw, &rec) == nil {
			return rec
		}
	}
	rec := exitRecord{Reason: "Error", ExitCode: 137, FinishedAt: time.Now().UTC()}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			rec.ExitCode = 128 + int32(ws.Signal())
		} else {
			rec.ExitCode = int32(ee.ExitCode())
		}
	} else if werr != nil {
		rec.Message = werr.Error()
	}
	return rec
}

// signal sends sig to the container's process group, or to the shim's
// while the command has not started yet.
func (in *instance) signal(sig syscall.Signal) {
	select {
	case <-in.done:
		return
	default:
	}
	signalPod(in.dir, in.pid, sig)
}

// signalPod signals the command's process group recorded in dir, falling
// back to the shim's group. A SIGKILL first gives a shim that is just
// starting its command a moment to record the group, so the command is not
// orphaned by killing only the shim.
func signalPod(dir string, shimPID int, sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		for i := 0; i < 20; i++ {
			if _, err := os.Stat(filepath.Join(dir, pgidFile)); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if raw, err := os.ReadFile(filepath.Join(dir, pgidFile)); err == nil {
		if pgid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && pgid > 1 {
			_ = syscall.Kill(-pgid, sig)
			return
		}
	}
	_ = syscall.Kill(-shimPID, sig)
}

// stop sends SIGTERM, then SIGKILL once grace has passed, and waits for the
// end.
func (in *instance) stop(grace time.Duration) {
	in.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-in.done:
		return
	case <-t.C:
	}
	in.signal(syscall.SIGKILL)
	<-in.done
}

func openPipes(dir string) ([]*os.File, error) {
	var out []*os.File
	for _, name := range []string{stdoutPipe, stderrPipe} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("open output fifo %s for reading: %w", name, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// procStartTime reads a process's start time (clock ticks since boot), which
// tells a reused pid from the process we started.
func procStartTime(pid int) (int64, bool) {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	v, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// alive says whether pid is still the process that started at start.
func alive(pid int, start int64) bool {
	got, ok := procStartTime(pid)
	return ok && got == start
}

func writeSpec(path string, spec shimSpec) error {
	raw, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode shim spec: %w", err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return fmt.Errorf("write shim spec: %w", err)
	}
	return nil
}

func decodeSpec(raw []byte) (shimSpec, error) {
	var spec shimSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return spec, fmt.Errorf("decode shim spec: %w", err)
	}
	return spec, nil
}
