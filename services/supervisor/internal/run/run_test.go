package run

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/services/supervisor/internal/emit"
)

func TestStopAt(t *testing.T) {
	tests := []struct {
		name            string
		deadline, grace time.Duration
		want            time.Duration
	}{
		{name: "SIGTERM goes one grace before the deadline", deadline: 30 * time.Minute, grace: 10 * time.Second, want: 30*time.Minute - 10*time.Second},
		{name: "a grace longer than half the deadline is halved", deadline: 10 * time.Second, grace: 8 * time.Second, want: 5 * time.Second},
		{name: "no grace stops at the deadline", deadline: time.Second, grace: 0, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stopAt(tt.deadline, tt.grace); got != tt.want {
				t.Fatalf("stopAt = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeadlineOrigin(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, emit.StartedFile)
	start := time.Now()
	if got := deadlineOrigin(start, file); !got.Equal(start) {
		t.Fatal("without an init record the supervisor's start is the origin")
	}
	initStart := start.Add(-90 * time.Second).Truncate(time.Millisecond)
	if err := emit.WriteStarted(file, initStart); err != nil {
		t.Fatal(err)
	}
	if got := deadlineOrigin(start, file); !got.Equal(initStart) {
		t.Fatalf("the init container's start must be the origin: got %v, want %v", got, initStart)
	}
	if err := emit.WriteStarted(file, start.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := deadlineOrigin(start, file); !got.Equal(start) {
		t.Fatal("a record from the future is ignored")
	}
}
