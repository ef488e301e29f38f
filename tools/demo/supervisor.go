package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// bundleDir is the directory beside the supervisor binary that its init
// step copies into the run's /agent/bin (the mock CLIs here).
const bundleDir = "bundle"

// stagedFile records, in the demo's state, the directory stageSupervisor
// made, so that down (or the next up) removes it.
func stagedFile(state string) string { return filepath.Join(state, "supervisor-dir") }

// stageSupervisor copies the supervisor and its bundle into a fresh
// directory anyone may enter and read, and returns the supervisor's path
// there. localnode runs a run pod's init step on the host as the agent's
// user, uid 1000 (the run pod meets Pod Security "restricted",
// docs/agent-controller.md), and bin may sit below a home directory only
// its owner can enter, such as root's.
func stageSupervisor(bin, state string) (string, error) {
	dir, err := os.MkdirTemp("", "agentplane-demo-supervisor-")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(stagedFile(state), []byte(dir), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	if err := copyFile(filepath.Join(bin, "supervisor"), filepath.Join(dir, "supervisor")); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(filepath.Join(bin, bundleDir))
	if errors.Is(err, fs.ErrNotExist) {
		return filepath.Join(dir, "supervisor"), nil
	}
	if err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(dir, bundleDir), 0o755); err != nil {
		return "", err
	}
	for _, e := range entries {
		from, to := filepath.Join(bin, bundleDir, e.Name()), filepath.Join(dir, bundleDir, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			// The mock CLIs are links to one binary; they stay links.
			target, err := os.Readlink(from)
			if err != nil {
				return "", err
			}
			if err := os.Symlink(target, to); err != nil {
				return "", err
			}
			continue
		}
		if err := copyFile(from, to); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "supervisor"), nil
}

// removeStaged removes what stageSupervisor made, if it is recorded.
func removeStaged(state string) error {
	raw, err := os.ReadFile(stagedFile(state))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	dir := strings.TrimSpace(string(raw))
	// Only a directory stageSupervisor could have made is removed.
	if !strings.HasPrefix(filepath.Base(dir), "agentplane-demo-supervisor-") || filepath.Dir(dir) != filepath.Clean(os.TempDir()) {
		return fmt.Errorf("%s names %q, which the demo did not make", stagedFile(state), dir)
	}
	return os.RemoveAll(dir)
}

// copyFile copies an executable, readable and runnable by anyone.
func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.Copy(out, in)
	return err
}
