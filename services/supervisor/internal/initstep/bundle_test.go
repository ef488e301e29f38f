package initstep

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCopyBundleDir(t *testing.T) {
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(src, "mockagent"), []byte("#!/bin/true\n"), 0o755))
	must(os.Symlink(filepath.Join(src, "mockagent"), filepath.Join(src, "claude")))
	must(os.WriteFile(filepath.Join(outside, "tool"), []byte("tool"), 0o755))
	must(os.Symlink(filepath.Join(outside, "tool"), filepath.Join(src, "tool")))
	must(os.Mkdir(filepath.Join(src, "subdir"), 0o755))
	must(copyBundleDir(src, dst))

	cases := []struct {
		rule  string
		check func() bool
	}{
		{"a regular file is copied, executable", func() bool {
			fi, err := os.Stat(filepath.Join(dst, "mockagent"))
			return err == nil && fi.Mode()&0o111 != 0
		}},
		{"a link to another bundle entry stays a relative link", func() bool {
			target, err := os.Readlink(filepath.Join(dst, "claude"))
			return err == nil && target == "mockagent"
		}},
		{"a link leaving the bundle is copied as its file", func() bool {
			fi, err := os.Lstat(filepath.Join(dst, "tool"))
			return err == nil && fi.Mode().IsRegular()
		}},
		{"directories are not copied", func() bool {
			_, err := os.Stat(filepath.Join(dst, "subdir"))
			return os.IsNotExist(err)
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if !c.check() {
				t.Error("rule broken")
			}
		})
	}
	if err := copyBundleDir(filepath.Join(src, "missing"), dst); err != nil {
		t.Errorf("a missing bundle directory is an empty bundle: %v", err)
	}
}
