package node

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

type tarEntry struct {
	name, link string
	typ        byte
	data       string
}

func tarOf(t *testing.T, entries ...tarEntry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.data))}
		if e.typ == tar.TypeDir {
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// TestExtractTarStaysInsideTheRoot: layer entries that would write outside
// the root — by name or through a symlink an earlier entry planted — make
// the unpack fail, and nothing lands outside; ordinary content, relative
// symlinks and hard links unpack.
func TestExtractTarStaysInsideTheRoot(t *testing.T) {
	cases := []struct {
		name    string
		entries []tarEntry
		ok      bool
		// check is a path (relative to the root) that must exist after a
		// successful unpack.
		check string
	}{
		{name: "ordinary files, dirs, symlinks and hard links", ok: true, check: "usr/bin/tool", entries: []tarEntry{
			{name: "usr/bin/", typ: tar.TypeDir},
			{name: "usr/bin/app", typ: tar.TypeReg, data: "app"},
			{name: "bin", typ: tar.TypeSymlink, link: "usr/bin"},
			{name: "usr/bin/tool", typ: tar.TypeLink, link: "usr/bin/app"},
			{name: "/etc/abs-name", typ: tar.TypeReg, data: "a leading slash is dropped"},
			{name: "etc/sh", typ: tar.TypeSymlink, link: "/bin/app"},
		}},
		{name: "a name with .. is refused", entries: []tarEntry{{name: "../escape", typ: tar.TypeReg, data: "x"}}},
		{name: "a nested .. is refused", entries: []tarEntry{{name: "a/../../escape", typ: tar.TypeReg, data: "x"}}},
		{name: "writing through an absolute symlink is refused", entries: []tarEntry{
			{name: "evil", typ: tar.TypeSymlink, link: "/"},
			{name: "evil/escape", typ: tar.TypeReg, data: "x"},
		}},
		{name: "writing through a climbing symlink is refused", entries: []tarEntry{
			{name: "up", typ: tar.TypeSymlink, link: "../.."},
			{name: "up/escape", typ: tar.TypeReg, data: "x"},
		}},
		{name: "a hard link to outside is refused", entries: []tarEntry{{name: "h", typ: tar.TypeLink, link: "../outside"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			if err := os.WriteFile(filepath.Join(base, "outside"), []byte("o"), 0o644); err != nil {
				t.Fatal(err)
			}
			root := filepath.Join(base, "root")
			if err := os.Mkdir(root, 0o755); err != nil {
				t.Fatal(err)
			}
			err := extractTar(tarOf(t, tc.entries...), root)
			if (err == nil) != tc.ok {
				t.Fatalf("extract error %v, want ok=%v", err, tc.ok)
			}
			if _, err := os.Lstat(filepath.Join(base, "escape")); err == nil {
				t.Fatal("an entry was written outside the root")
			}
			if tc.check != "" {
				if _, err := os.Stat(filepath.Join(root, tc.check)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestResolveInRoot: symlinks resolve as inside a chroot, never to the
// host.
func TestResolveInRoot(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "data"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{"bin": "usr/bin", "abs": "/usr/bin", "up": "../../../..", "etcl": "/etc", "loop": "loop"}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]string{
		"/bin/app":       "usr/bin/app",
		"/abs/app":       "usr/bin/app",
		"/up/etc/passwd": "etc/passwd",
		"/etcl/hosts":    "etc/hosts",
		"/data/new/dir":  "data/new/dir",
		"/../../x":       "x",
	}
	for in, want := range cases {
		got, err := resolveInRoot(root, in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got != filepath.Join(root, want) {
			t.Errorf("%s resolved to %s, want %s", in, got, filepath.Join(root, want))
		}
	}
	if _, err := resolveInRoot(root, "/loop/x"); err == nil {
		t.Error("a symlink loop resolved")
	}
}
