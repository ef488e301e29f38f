package node

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// A container in image mode gets a root of its own in its instance
// directory: an overlayfs mount whose lower layer is the cached, never
// written image rootfs and whose upper layer is the instance's, so a
// restart starts from the image again. The node mounts it in its own
// (the host's) mount namespace, where exec probes find it too; the shim
// then adds /proc, /dev, /etc/hosts, /etc/resolv.conf and the volumes in
// its private mount namespace and chroots the command into it. Where
// overlayfs is refused (a state directory on overlayfs, say), the rootfs
// is copied instead.

const (
	rootDir  = "root"
	upperDir = "upper"
	workDir  = "work"
)

// overlaySupported tries an overlay mount under dir once, at node start.
func overlaySupported(dir string) bool {
	tmp, err := os.MkdirTemp(dir, "overlay-check-")
	if err != nil {
		return false
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	for _, d := range []string{"lower", upperDir, workDir, rootDir} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return false
		}
	}
	if err := mountOverlay(filepath.Join(tmp, "lower"), tmp); err != nil {
		return false
	}
	_ = unix.Unmount(filepath.Join(tmp, rootDir), unix.MNT_DETACH)
	return true
}

func mountOverlay(lower, instDir string) error {
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, filepath.Join(instDir, upperDir), filepath.Join(instDir, workDir))
	if err := unix.Mount("overlay", filepath.Join(instDir, rootDir), "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay for the container root: %w", err)
	}
	return nil
}

// prepareRoot makes the container root of an instance in instDir from the
// image rootfs lower, returning its path.
func prepareRoot(lower, instDir string, overlay bool) (string, error) {
	root := filepath.Join(instDir, rootDir)
	if !overlay {
		if err := copyTree(lower, root); err != nil {
			return "", fmt.Errorf("copy the image rootfs for the container: %w", err)
		}
		return root, nil
	}
	for _, d := range []string{upperDir, workDir, rootDir} {
		if err := os.MkdirAll(filepath.Join(instDir, d), 0o755); err != nil {
			return "", err
		}
	}
	return root, mountOverlay(lower, instDir)
}

// releaseRoot unmounts and removes an ended instance's root, keeping its
// exit record.
func releaseRoot(instDir string) {
	unmountUnder(instDir)
	for _, d := range []string{rootDir, upperDir, workDir} {
		_ = os.RemoveAll(filepath.Join(instDir, d))
	}
}

// unmountUnder detaches every mount of this mount namespace below dir,
// deepest first, so removing dir never reaches through a mount.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	prefix := filepath.Clean(dir) + "/"
	var targets []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if strings.HasPrefix(mp, prefix) {
			targets = append(targets, mp)
		}
	}
	slices.SortFunc(targets, func(a, b string) int { return len(b) - len(a) })
	for _, t := range targets {
		_ = unix.Unmount(t, unix.MNT_DETACH)
	}
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%3o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// resolveInRoot resolves p as a process chrooted into root would, with
// every symlink — absolute or climbing with ".." — kept inside root, and
// returns the host path. Components that do not exist yet are joined as
// they are, to be created.
func resolveInRoot(root, p string) (string, error) {
	resolved := ""
	rest := strings.Split(p, "/")
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = strings.TrimPrefix(path.Dir("/"+resolved), "/")
			continue
		}
		next := path.Join(resolved, c)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", err
			}
			resolved = next
			continue
		}
		if links++; links > 40 {
			return "", fmt.Errorf("too many symlinks resolving %s in the container root", p)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			resolved = ""
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return filepath.Join(root, resolved), nil
}

// devices are bind-mounted from the host into a container's /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// setupRoot builds the container's view inside root, in the shim's private
// mount namespace: /proc, a minimal /dev, then the files (hosts,
// resolv.conf) and volumes, each target resolved inside root.
func setupRoot(root string, mounts []mountSpec) error {
	// A mount of its own (a copied root is a plain directory), so it can
	// be made read-only later without touching the host's view.
	if err := unix.Mount(root, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind the container root: %w", err)
	}
	procDir, err := mountPointIn(root, "/proc", true)
	if err != nil {
		return err
	}
	if err := unix.Mount("proc", procDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	dev, err := mountPointIn(root, "/dev", true)
	if err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=1m"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range devices {
		if _, err := os.Stat("/dev/" + d); err != nil {
			continue
		}
		if err := ensureMountPoint(filepath.Join(dev, d), false); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+d, filepath.Join(dev, d), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", d, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return fmt.Errorf("create /dev/%s: %w", name, err)
		}
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return fmt.Errorf("create /dev/shm: %w", err)
	}
	if err := unix.Mount("shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=64m"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	for _, m := range mounts {
		if err := mountInRoot(root, m); err != nil && !m.Optional {
			return err
		}
	}
	return nil
}

// mountInRoot bind-mounts m at its target inside root.
func mountInRoot(root string, m mountSpec) error {
	fi, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("volume source %s: %w", m.Source, err)
	}
	target, err := mountPointIn(root, m.Target, fi.IsDir())
	if err != nil {
		return err
	}
	return bindMount(m.Source, target, m.ReadOnly)
}

// mountPointIn resolves target inside root and makes sure it exists as a
// directory or a file.
func mountPointIn(root, target string, dir bool) (string, error) {
	p, err := resolveInRoot(root, target)
	if err != nil {
		return "", err
	}
	return p, ensureMountPoint(p, dir)
}

func bindMount(src, target string, readOnly bool) error {
	if err := unix.Mount(src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind-mount %s at %s: %w", src, target, err)
	}
	if readOnly {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("remount %s read-only: %w", target, err)
		}
	}
	return nil
}

// lookPathIn finds an executable as the container's execve would with the
// container's PATH, inside root; it returns the path as the container sees
// it.
func lookPathIn(root, file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	search := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			search = v
		}
	}
	for _, dir := range strings.Split(search, ":") {
		if !strings.HasPrefix(dir, "/") {
			continue
		}
		p := path.Join(dir, file)
		hp, err := resolveInRoot(root, p)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(hp); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found in the image's PATH %s", file, search)
}
