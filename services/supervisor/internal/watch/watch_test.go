package watch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCollect(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(ws, "report.md"), []byte("# done\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "big.txt"), []byte(strings.Repeat("x", MaxBytes+1)), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "exact.txt"), []byte(strings.Repeat("x", MaxBytes)), 0o644))
	must(t, os.WriteFile(filepath.Join(ws, "bad.txt"), []byte("a\xffb"), 0o644))
	must(t, os.Mkdir(filepath.Join(ws, "dir"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(ws, "escape")))
	must(t, os.Symlink("report.md", filepath.Join(ws, "inside-link")))

	tests := []struct {
		name, path, content, reason string
		outside                     bool
	}{
		{name: "relative path is read from the workspace", path: "report.md", content: "# done\n"},
		{name: "absolute path inside the workspace is read", path: filepath.Join(ws, "report.md"), content: "# done\n"},
		{name: "a missing file says missing", path: "nope.md", reason: ReasonMissing},
		{name: "a directory is not a file", path: "dir", reason: ReasonMissing},
		{name: "over 128 KiB is too large", path: "big.txt", reason: ReasonTooLarge},
		{name: "exactly 128 KiB is delivered", path: "exact.txt", content: strings.Repeat("x", MaxBytes)},
		{name: "invalid UTF-8 is replaced", path: "bad.txt", content: "a\uFFFDb"},
		{name: "a symlink inside the workspace is followed", path: "inside-link", content: "# done\n"},
		{name: "dot-dot escaping the workspace gives no event", path: "../etc/passwd", outside: true},
		{name: "an absolute path elsewhere gives no event", path: "/etc/passwd", outside: true},
		{name: "the workspace itself gives no event", path: ".", outside: true},
		{name: "a symlink pointing out gives no event", path: "escape", outside: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fe, err := Collect(ws, Entry{Event: "report", Path: tt.path})
			if tt.outside {
				if !errors.Is(err, ErrOutside) || fe != nil {
					t.Fatalf("want ErrOutside, got %v, %v", fe, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fe.GetContent() != tt.content || fe.GetReason() != tt.reason || fe.GetEvent() != "report" {
				t.Fatalf("got content %d bytes reason %q, want %d bytes reason %q", len(fe.GetContent()), fe.GetReason(), len(tt.content), tt.reason)
			}
		})
	}
}

func TestParseDropsIncompleteEntries(t *testing.T) {
	got, err := Parse(`[{"event":"a","path":"x"},{"event":"","path":"y"},{"event":"b"}]`)
	if err != nil || len(got) != 1 || got[0].Event != "a" {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := Parse("{"); err == nil {
		t.Fatal("malformed JSON accepted")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
