package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTheSupervisorIsStagedWhereTheRunsUserReachesIt: the init step of a
// demo run executes the supervisor as uid 1000, so the staged copy and
// every directory above it must be enterable by others, whatever the
// built binaries' own directory allows.
func TestTheSupervisorIsStagedWhereTheRunsUserReachesIt(t *testing.T) {
	home := t.TempDir() // 0700, as a home directory may be
	bin, state := filepath.Join(home, "bin"), filepath.Join(home, "state")
	for _, d := range []string{filepath.Join(bin, bundleDir), state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(bin, "supervisor"), filepath.Join(bin, bundleDir, "mockagent")} {
		if err := os.WriteFile(f, []byte("#!/bin/true\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("mockagent", filepath.Join(bin, bundleDir, "claude")); err != nil {
		t.Fatal(err)
	}
	sup, err := stageSupervisor(bin, state)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(sup)
	cases := []struct {
		rule string
		path string
		mode os.FileMode
	}{
		{"the staged directory is enterable by anyone", dir, 0o755},
		{"the supervisor is runnable by anyone", sup, 0o755},
		{"the bundle is readable by anyone", filepath.Join(dir, bundleDir), 0o755},
		{"a bundled binary is runnable by anyone", filepath.Join(dir, bundleDir, "mockagent"), 0o755},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			fi, err := os.Stat(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm()&c.mode != c.mode {
				t.Errorf("%s has mode %v, want at least %v", c.path, fi.Mode().Perm(), c.mode)
			}
		})
	}
	t.Run("a bundled link stays a link", func(t *testing.T) {
		if target, err := os.Readlink(filepath.Join(dir, bundleDir, "claude")); err != nil || target != "mockagent" {
			t.Errorf("claude -> %q, %v", target, err)
		}
	})
	t.Run("down removes the staged copy", func(t *testing.T) {
		if err := removeStaged(state); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", dir, err)
		}
	})
	t.Run("down removes nothing the demo did not make", func(t *testing.T) {
		if err := os.WriteFile(stagedFile(state), []byte(home), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := removeStaged(state); err == nil {
			t.Error("a recorded directory the demo did not make was accepted")
		}
		if _, err := os.Stat(bin); err != nil {
			t.Errorf("the built binaries are gone: %v", err)
		}
	})
}
