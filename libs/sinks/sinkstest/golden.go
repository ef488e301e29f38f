package sinkstest

import (
	"bytes"
	"os"
	"regexp"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv/golden"
)

// payloadTime is the one field of a payload that changes from one run to
// the next.
var payloadTime = regexp.MustCompile(`"time":"[^"]+"`)

// CheckGolden checks each line of got (what a file sink received) against
// the payload schema, then compares got, with every time set to one fixed
// instant, with the golden file at path: the payload format is a contract
// with receivers, so any change shows up as a diff to review.
// AGENTPLANE_UPDATE_GOLDEN=1 rewrites the file instead.
func CheckGolden(t testing.TB, path string, got []byte) {
	t.Helper()
	for _, line := range bytes.Split(bytes.TrimSuffix(got, []byte("\n")), []byte("\n")) {
		Check(t, line)
	}
	got = payloadTime.ReplaceAll(got, []byte(`"time":"2026-12-01T10:00:00Z"`))
	golden.Check(t, path, got, os.Getenv("AGENTPLANE_UPDATE_GOLDEN") == "1", "AGENTPLANE_UPDATE_GOLDEN=1")
}
