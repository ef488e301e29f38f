// Package testbin builds the binaries a package's tests run as processes
// (the supervisor, the mock vendor CLIs, ...), once, in TestMain.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// Main is the body of a TestMain that builds binaries: it calls run with a
// fresh scratch directory for them, removes the directory and exits with
// run's code.
func Main(prefix string, run func(dir string) int) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := run(dir)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Build runs `go` with each argument list in turn. The binaries are
// static (CGO_ENABLED=0) unless a list asks for -race, which needs cgo.
// The error carries the failing command's output.
func Build(builds ...[]string) error {
	for _, args := range builds {
		cmd := exec.Command("go", args...)
		if !slices.Contains(args, "-race") {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %v: %w\n%s", args, err, out)
		}
	}
	return nil
}

// MockAgent is the argument list for Build that builds tools/mockagent
// into dir. It builds from toolsDir, the tools module's own directory, so
// that it works with and without the workspace.
func MockAgent(toolsDir, dir string) []string {
	return []string{"build", "-C", toolsDir, "-o", filepath.Join(dir, "mockagent"), "./mockagent"}
}

// InstallMocks links the mock vendor CLIs, under each vendor's name, into
// mockDir, with the mockagent that MockAgent built into dir.
func InstallMocks(dir, mockDir string) error {
	if out, err := exec.Command(filepath.Join(dir, "mockagent"), "install", mockDir).CombinedOutput(); err != nil {
		return fmt.Errorf("mockagent install: %w\n%s", err, out)
	}
	return nil
}
