package vendors

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// checkGolden compares got with testdata/<name>, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got, *update, "go test -update")
}
