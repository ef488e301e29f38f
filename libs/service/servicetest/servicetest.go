// Package servicetest holds test helpers for binaries built on
// libs/service.
package servicetest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/libs/service"
)

// Markers delimit the generated flag table in a docs/ page.
const (
	BeginMarker = "<!-- flags:begin (generated from the flag definitions; make generate rewrites it) -->"
	EndMarker   = "<!-- flags:end -->"
)

// UpdateEnv names the variable that makes CheckDocTable rewrite the page
// instead of failing; `make generate` sets it.
const UpdateEnv = "AGENTPLANE_UPDATE_DOCS"

// CheckDocTable fails t when the flag table between the markers of the
// page at path differs from fs's flags, so the configuration docs cannot
// drift from the binary. With AGENTPLANE_UPDATE_DOCS=1 it rewrites the
// table instead.
func CheckDocTable(t testing.TB, fs *service.FlagSet, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	doc := string(b)
	want := fs.Markdown()
	got, err := section(doc)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if got == want {
		return
	}
	if os.Getenv(UpdateEnv) == "1" {
		i := strings.Index(doc, BeginMarker) + len(BeginMarker) + 1
		j := strings.Index(doc, EndMarker)
		if err := os.WriteFile(path, []byte(doc[:i]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the flag table in %s is out of date; run make generate (or %s=1 go test) and commit.\nwant:\n%s\ngot:\n%s", path, UpdateEnv, want, got)
}

// CheckParsed holds one parse of a binary's options to the rule a test
// case names: with wantErr set the parse must fail with an error naming
// it (the flag or variable at fault); without, it must succeed and check
// must accept what it parsed.
func CheckParsed[C any](t testing.TB, got C, err error, wantErr string, check func(C) bool) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("got %v, want an error naming %s", err, wantErr)
		}
		return
	}
	if err != nil || !check(got) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func section(doc string) (string, error) {
	i := strings.Index(doc, BeginMarker)
	j := strings.Index(doc, EndMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("no flag table: add a line %q, a line %q after it", BeginMarker, EndMarker)
	}
	return doc[i+len(BeginMarker)+1 : j], nil
}
