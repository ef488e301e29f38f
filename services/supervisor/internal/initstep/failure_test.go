package initstep

import (
	"errors"
	"strings"
	"testing"
)

func TestFailureMessage(t *testing.T) {
	tests := []struct {
		name, err, want string
	}{
		{name: "a plain error is kept", err: "clone app: git clone exited 128: fatal: repository not found",
			want: "clone app: git clone exited 128: fatal: repository not found"},
		{name: "lines are joined into one", err: "git checkout exited 1: error: pathspec 'x'\n  did not match",
			want: "git checkout exited 1: error: pathspec 'x' did not match"},
		{name: "every url's userinfo is redacted", err: "from https://u:s3cret@a.example/r.git and http://tok@b.example?x=1 and https://c.example/p@q",
			want: "from https://<redacted>@a.example/r.git and http://<redacted>@b.example?x=1 and https://c.example/p@q"},
		{name: "a password holding an at sign is redacted whole", err: "https://u:p@ss@host/r.git",
			want: "https://<redacted>@host/r.git"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := failureMessage(errors.New(tt.err)); got != tt.want {
				t.Fatalf("failureMessage(%q) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
	if got := failureMessage(errors.New(strings.Repeat("x", 5000))); len(got) > maxFailureMessage {
		t.Fatalf("a long message is %d bytes, over %d", len(got), maxFailureMessage)
	}
}
