package servicetest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/libs/service"
)

// recorder is a testing.TB that records failures instead of stopping.
type recorder struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recorder) Errorf(format string, args ...any) { r.failed = true; r.msg = format }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = true; r.msg = format }
func (r *recorder) Helper()                           {}

func TestCheckDocTable(t *testing.T) {
	fs := service.NewFlagSet("svc", func(string) string { return "" })
	var s string
	fs.StringVar(&s, "nats-url", "", "NATS server")
	page := func(table string) string {
		return "# svc\n\n" + BeginMarker + "\n" + table + EndMarker + "\n\nmore text\n"
	}
	cases := []struct {
		rule       string
		doc        string
		update     bool
		wantFail   bool
		wantResult string
	}{
		{"a current table passes", page(fs.Markdown()), false, false, page(fs.Markdown())},
		{"a stale table fails", page("| old |\n"), false, true, page("| old |\n")},
		{"a page without markers fails", "# svc\n", false, true, "# svc\n"},
		{"update rewrites only the table", page("| old |\n"), true, false, page(fs.Markdown())},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "svc.md")
			if err := os.WriteFile(path, []byte(c.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.update {
				t.Setenv(UpdateEnv, "1")
			}
			r := &recorder{TB: t}
			CheckDocTable(r, fs, path)
			if r.failed != c.wantFail {
				t.Fatalf("failed = %v (%s), want %v", r.failed, r.msg, c.wantFail)
			}
			b, _ := os.ReadFile(path)
			if string(b) != c.wantResult {
				t.Fatalf("page now:\n%s", b)
			}
			if !strings.Contains(string(b), "# svc") {
				t.Fatal("the page around the table is kept")
			}
		})
	}
}

func TestCheckParsed(t *testing.T) {
	positive := func(n int) bool { return n > 0 }
	cases := []struct {
		rule     string
		got      int
		err      error
		wantErr  string
		wantFail bool
	}{
		{"a parse the check accepts passes", 1, nil, "", false},
		{"a parse the check refuses fails", 0, nil, "", true},
		{"an unexpected error fails", 1, errors.New("--x: bad"), "", true},
		{"an error naming the flag passes", 0, errors.New("--x: bad"), "--x", false},
		{"an error naming another flag fails", 0, errors.New("--y: bad"), "--x", true},
		{"a success where an error is wanted fails", 1, nil, "--x", true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			r := &recorder{TB: t}
			CheckParsed(r, c.got, c.err, c.wantErr, positive)
			if r.failed != c.wantFail {
				t.Fatalf("failed = %v (%s), want %v", r.failed, r.msg, c.wantFail)
			}
		})
	}
}
