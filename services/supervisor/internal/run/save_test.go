package run

import (
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/runspec"
)

func TestSaveBy(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		name     string
		origin   time.Time
		deadline time.Duration
		stopping bool
		want     time.Time
	}{
		{name: "without a deadline the save gets its timeout", want: now.Add(saveTimeout)},
		{name: "a pod being stopped leaves the save less time", stopping: true, want: now.Add(saveAfterSignal)},
		{name: "a far deadline leaves the timeout alone", origin: now, deadline: time.Hour, want: now.Add(saveTimeout)},
		{name: "a near deadline ends the save in time for the terminal event before the Job's deadline",
			origin: now.Add(-time.Hour), deadline: time.Hour, want: now.Add(runspec.DeadlineMargin - flushTimeout)},
		{name: "a run long past its deadline leaves no time to save",
			origin: now.Add(-2 * time.Hour), deadline: time.Hour, want: now.Add(-time.Hour + runspec.DeadlineMargin - flushTimeout)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := saveBy(now, tt.origin, tt.deadline, tt.stopping); !got.Equal(tt.want) {
				t.Fatalf("saveBy = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSaveContextEndsOnSignal: a SIGTERM that arrives while the
// conversation is being saved cuts the save short, so the terminal event
// still gets out before the pod is killed.
func TestSaveContextEndsOnSignal(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	r := &runner{opts: Options{Signals: sigs, Start: time.Now(), AgentDir: t.TempDir()},
		log: slog.New(slog.DiscardHandler)}
	ctx, cancel := r.saveContext(false)
	defer cancel()
	if ctx.Err() != nil {
		t.Fatal("the save has no time before any signal")
	}
	sigs <- syscall.SIGTERM
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("a signal did not end the save")
	}
}
