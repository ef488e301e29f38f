package conversation

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// entry is one archive member as read back.
type entry struct {
	name     string
	typ      byte
	mode     int64
	uid, gid int
	mtime    time.Time
	body     string
}

// readArchive reads a tar.gz back into its members, in archive order.
func readArchive(t *testing.T, b []byte) []entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	var out []entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read archive: %v", err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{name: h.Name, typ: h.Typeflag, mode: h.Mode, uid: h.Uid, gid: h.Gid, mtime: h.ModTime, body: string(body)})
	}
}

func names(es []entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.name)
	}
	return out
}

func write(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func pack(t *testing.T, home, state string) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	err := Pack(context.Background(), &buf, home, state)
	return buf.Bytes(), err
}

// TestPackMembers: the state dir and everything regular beneath it, named
// relative to HOME and sorted byte-wise, with modes and mtimes kept and
// owned by 0:0; links, sockets and whatever lies outside the state dir
// are left out.
func TestPackMembers(t *testing.T) {
	home := t.TempDir()
	state := filepath.Join(home, ".claude", "projects")
	write(t, filepath.Join(state, "-workspace", "sess-2.jsonl"), "two\n", 0o600)
	write(t, filepath.Join(state, "-workspace", "sess-1.jsonl"), "one\n", 0o644)
	write(t, filepath.Join(state, "-work-b", "x.jsonl"), "b\n", 0o640)
	write(t, filepath.Join(state, "-work", "y.jsonl"), "w\n", 0o600)
	write(t, filepath.Join(home, ".claude", "settings.json"), "{}", 0o600)
	write(t, filepath.Join(home, "secret.txt"), "not for the store", 0o600)
	if err := os.Chmod(filepath.Join(state, "-work-b"), 0o750); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(state, "-workspace", "sess-1.jsonl"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(home, "secret.txt"), filepath.Join(state, "-workspace", "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(home, filepath.Join(state, "dirlink")); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(state, "s")
	if l, err := net.Listen("unix", sock); err == nil {
		defer func() { _ = l.Close() }()
	} else {
		t.Fatalf("unix socket in the state dir: %v", err)
	}

	b, err := pack(t, home, ".claude/projects")
	if err != nil {
		t.Fatal(err)
	}
	es := readArchive(t, b)
	want := []string{
		".claude/projects/",
		".claude/projects/-work-b/",
		".claude/projects/-work-b/x.jsonl",
		".claude/projects/-work/",
		".claude/projects/-work/y.jsonl",
		".claude/projects/-workspace/",
		".claude/projects/-workspace/sess-1.jsonl",
		".claude/projects/-workspace/sess-2.jsonl",
	}
	if got := names(es); !slices.Equal(got, want) {
		t.Fatalf("members\n%q\nwant\n%q", got, want)
	}
	by := map[string]entry{}
	for _, e := range es {
		by[e.name] = e
		if e.uid != 0 || e.gid != 0 {
			t.Errorf("%s owned by %d:%d, want 0:0", e.name, e.uid, e.gid)
		}
	}
	checks := []struct {
		name string
		typ  byte
		mode int64
		body string
	}{
		{".claude/projects/-work-b/", tar.TypeDir, 0o750, ""},
		{".claude/projects/-work-b/x.jsonl", tar.TypeReg, 0o640, "b\n"},
		{".claude/projects/-workspace/sess-1.jsonl", tar.TypeReg, 0o644, "one\n"},
		{".claude/projects/-workspace/sess-2.jsonl", tar.TypeReg, 0o600, "two\n"},
	}
	for _, c := range checks {
		e := by[c.name]
		if e.typ != c.typ || e.mode != c.mode || e.body != c.body {
			t.Errorf("%s: type %c mode %o body %q, want %c %o %q", c.name, e.typ, e.mode, e.body, c.typ, c.mode, c.body)
		}
	}
	if got := by[".claude/projects/-workspace/sess-1.jsonl"].mtime; !got.Equal(old) {
		t.Errorf("mtime %v, want %v", got, old)
	}
}

// TestPackRefuses: a missing state dir is ErrNoStateDir; a state dir that
// is, or lies under, a symlink is not followed; a state dir outside HOME is
// refused; a cancelled context stops the pack.
func TestPackRefuses(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, home string)
		state  string
		ctx    func() context.Context
		noDir  bool
		wantOK bool
	}{
		{name: "a missing state dir is ErrNoStateDir", state: ".claude/projects", noDir: true},
		{name: "a missing parent of the state dir is ErrNoStateDir", state: ".codex/sessions", noDir: true},
		{name: "a state dir that is a symlink is not followed", state: ".claude/projects",
			setup: func(t *testing.T, home string) {
				elsewhere := t.TempDir()
				write(t, filepath.Join(elsewhere, "x.jsonl"), "x", 0o600)
				if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(elsewhere, filepath.Join(home, ".claude", "projects")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a parent of the state dir that is a symlink is not followed", state: ".claude/projects",
			setup: func(t *testing.T, home string) {
				elsewhere := t.TempDir()
				write(t, filepath.Join(elsewhere, "projects", "x.jsonl"), "x", 0o600)
				if err := os.Symlink(elsewhere, filepath.Join(home, ".claude")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a state dir leaving HOME is refused", state: "../elsewhere"},
		{name: "an absolute state dir is refused", state: "/etc"},
		{name: "an empty state dir is refused", state: ""},
		{name: "a cancelled context stops the pack", state: ".claude/projects",
			setup: func(t *testing.T, home string) {
				write(t, filepath.Join(home, ".claude", "projects", "x.jsonl"), "x", 0o600)
			},
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			}},
		{name: "an empty state dir directory is packed as itself", state: ".claude/projects", wantOK: true,
			setup: func(t *testing.T, home string) {
				if err := os.MkdirAll(filepath.Join(home, ".claude", "projects"), 0o755); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.setup != nil {
				tt.setup(t, home)
			}
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			var buf bytes.Buffer
			err := Pack(ctx, &buf, home, tt.state)
			switch {
			case tt.wantOK:
				if err != nil {
					t.Fatal(err)
				}
				if got := names(readArchive(t, buf.Bytes())); !slices.Equal(got, []string{tt.state + "/"}) {
					t.Fatalf("members %q", got)
				}
			case err == nil:
				t.Fatalf("packed %d bytes, want an error", buf.Len())
			case errors.Is(err, ErrNoStateDir) != tt.noDir:
				t.Fatalf("err %v: ErrNoStateDir %v, want %v", err, errors.Is(err, ErrNoStateDir), tt.noDir)
			}
		})
	}
}
