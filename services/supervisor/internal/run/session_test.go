package run

import (
	"errors"
	"testing"
	"time"

	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
)

// fakeTurns stands in for the CLI: each turn blocks until released or
// stopped and reports the session id it is given.
type fakeTurns struct {
	release chan turnOutcome
	seen    chan *turn
}

func (f *fakeTurns) exec(t *turn) turnOutcome {
	f.seen <- t
	select {
	case out := <-f.release:
		return out
	case <-t.stop:
		return turnOutcome{isError: true, reason: ReasonSessionEnded}
	}
}

// TestSessionRules checks the session's rules in the order a real session
// meets them: one turn at a time, each resuming the id the one before
// reported, and nothing after the end.
func TestSessionRules(t *testing.T) {
	f := &fakeTurns{release: make(chan turnOutcome), seen: make(chan *turn, 4)}
	s := newSession("resumed-0", time.Now(), f.exec)

	t1, err := s.begin("one", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-f.seen; got.resume != "resumed-0" || !got.first {
		t.Fatalf("first turn resumes %q (first %v), want the resumed session", got.resume, got.first)
	}
	if _, err := s.begin("two", nil); !errors.Is(err, errBusy) {
		t.Fatalf("a prompt during a turn = %v, want errBusy", err)
	}
	if in := s.info(); in.state != supervisorv1.SessionState_SESSION_STATE_BUSY || in.turns != 1 {
		t.Fatalf("info during a turn %+v", in)
	}
	if free, _ := s.idle(time.Now()); free {
		t.Fatal("a running turn counted as idle")
	}
	f.release <- turnOutcome{sessionID: "reported-1"}
	<-t1.done
	if t1.sessionID != "reported-1" {
		t.Fatalf("turn ended with session %q", t1.sessionID)
	}

	t2, err := s.begin("two", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-f.seen; got.resume != "reported-1" || got.first {
		t.Fatalf("second turn resumes %q (first %v), want the id the first reported", got.resume, got.first)
	}
	f.release <- turnOutcome{}
	<-t2.done
	if t2.sessionID != "reported-1" {
		t.Fatalf("a turn reporting no id lost the session: %q", t2.sessionID)
	}

	t3, err := s.begin("three", nil)
	if err != nil {
		t.Fatal(err)
	}
	<-f.seen
	id, turns := s.end()
	if id != "reported-1" || turns != 3 {
		t.Fatalf("end = %q, %d", id, turns)
	}
	select {
	case <-t3.done:
		if t3.out.reason != ReasonSessionEnded {
			t.Fatalf("stopped turn reason %q", t3.out.reason)
		}
	default:
		t.Fatal("end returned before the running turn stopped")
	}
	if _, err := s.begin("four", nil); !errors.Is(err, errClosed) {
		t.Fatalf("a prompt after the end = %v, want errClosed", err)
	}
	if in := s.info(); in.state != supervisorv1.SessionState_SESSION_STATE_CLOSED {
		t.Fatalf("state after the end %v", in.state)
	}
}
