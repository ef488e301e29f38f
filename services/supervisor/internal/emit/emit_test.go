package emit

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/runspec"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
)

func TestSequenceFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), SequenceFile)
	if got := ReadSequence(p); got != 0 {
		t.Fatalf("missing file gives %d, want 0", got)
	}
	if err := WriteSequence(p, 42); err != nil {
		t.Fatal(err)
	}
	if got := ReadSequence(p); got != 42 {
		t.Fatalf("got %d, want 42", got)
	}
	if err := os.WriteFile(p, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ReadSequence(p); got != 0 {
		t.Fatalf("garbage gives %d, want 0", got)
	}
}

func TestStartedFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), StartedFile)
	if _, ok := ReadStarted(p); ok {
		t.Fatal("missing file read as a time")
	}
	now := time.Now().Truncate(time.Millisecond)
	if err := WriteStarted(p, now); err != nil {
		t.Fatal(err)
	}
	if got, ok := ReadStarted(p); !ok || !got.Equal(now) {
		t.Fatalf("got %v, %v; want %v", got, ok, now)
	}
}

// TestTheSummaryCountsWhatWasEmitted: Close leaves the process's delivery
// figures in the termination log, for the agent-controller's metrics, but
// only in a file the container runtime created.
func TestTheSummaryCountsWhatWasEmitted(t *testing.T) {
	emitSome := func(e *Emitter) {
		e.Lifecycle("agent", "started", "", nil, "")
		line := []*eventsv1.RunEvent{
			{Payload: &eventsv1.RunEvent_Message{Message: &eventsv1.Message{Text: "hi"}}},
			{Payload: &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{Name: "Bash"}}},
		}
		for _, ev := range line {
			e.Run().Stamp(ev)
		}
		e.DeliverLine([]byte(`{"type":"assistant"}`), line)
		e.Lifecycle("agent", "succeeded", "", nil, "")
	}
	cases := []struct {
		rule    string
		create  bool
		wantSum bool
	}{
		{"the summary goes to the file the runtime created", true, true},
		{"no file, no summary: a supervisor run by hand leaves nothing", false, false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "termination-log")
			if c.create {
				if err := os.WriteFile(path, []byte("stale"), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			e := New(Options{Env: runenv.Env{Getenv: func(string) string { return "" }}, Stdout: io.Discard, TerminationLog: path})
			emitSome(e)
			if err := e.Close(time.Second, ""); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if !c.wantSum {
				if !os.IsNotExist(err) {
					t.Fatalf("a termination log was created (%v): %s", err, raw)
				}
				return
			}
			sum, err := runspec.ParseSummary(string(raw))
			if err != nil {
				t.Fatalf("%v: %q", err, raw)
			}
			want := map[string]uint64{"lifecycle": 2, "message": 1, "tool_call": 1}
			if !reflect.DeepEqual(sum.Events, want) || sum.NATSDropped != 0 || sum.SinkFailed != 0 || sum.SinkDropped != 0 {
				t.Fatalf("summary %+v, want events %v and no losses", sum, want)
			}
		})
	}
}
