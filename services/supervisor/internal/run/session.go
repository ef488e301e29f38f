package run

import (
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
)

// session is a realtime run's conversation: at most one turn at a time,
// each resuming the session id the previous one reported.
type session struct {
	// exec runs one turn to its end; it is the runner's runTurn bound to
	// the plan, replaceable in unit tests.
	exec func(t *turn) turnOutcome

	mu         sync.Mutex
	state      supervisorv1.SessionState
	id         string
	turns      int32
	startedAt  time.Time
	lastPrompt time.Time
	// activity is when the last turn started or ended, or the start: the
	// idle limit counts from it while no turn runs.
	activity time.Time
	cur      *turn
}

// turn is one prompt's run of the CLI.
type turn struct {
	text   string
	resume string
	first  bool
	// q receives the turn's events for its caller; nil for the initial
	// prompt, which nobody streams.
	q *eventQueue

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
	// out and sessionID are set before done is closed. sessionID is the
	// session's id after the turn.
	out       turnOutcome
	sessionID string
}

func newSession(resumeID string, now time.Time, exec func(*turn) turnOutcome) *session {
	return &session{exec: exec, state: supervisorv1.SessionState_SESSION_STATE_IDLE, id: resumeID,
		startedAt: now, activity: now}
}

// Errors a prompt can meet besides authentication and validation.
var (
	errBusy   = status.Error(codes.FailedPrecondition, "a turn is already running in this session; send the next prompt after its turn ends")
	errClosed = status.Error(codes.FailedPrecondition, "the session has ended")
)

// begin starts a turn with text unless one is running or the session
// ended. The turn runs on its own goroutine, so a caller that goes away
// does not cut it short.
func (s *session) begin(text string, q *eventQueue) (*turn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.state == supervisorv1.SessionState_SESSION_STATE_CLOSED:
		return nil, errClosed
	case s.cur != nil:
		return nil, errBusy
	}
	t := &turn{text: text, resume: s.id, first: s.turns == 0, q: q,
		stop: make(chan struct{}), done: make(chan struct{})}
	now := time.Now()
	s.cur, s.turns, s.lastPrompt, s.activity = t, s.turns+1, now, now
	s.state = supervisorv1.SessionState_SESSION_STATE_BUSY
	go func() {
		out := s.exec(t)
		s.finish(t, out)
	}()
	return t, nil
}

// finish records a turn's outcome; the session id it reported becomes the
// one the next turn resumes.
func (s *session) finish(t *turn, out turnOutcome) {
	s.mu.Lock()
	if out.sessionID != "" {
		s.id = out.sessionID
	}
	s.cur, s.activity = nil, time.Now()
	if s.state != supervisorv1.SessionState_SESSION_STATE_CLOSED {
		s.state = supervisorv1.SessionState_SESSION_STATE_IDLE
	}
	t.out, t.sessionID = out, s.id
	s.mu.Unlock()
	close(t.done)
}

// requestStop asks the turn's CLI to stop; it is safe to call repeatedly.
func (t *turn) requestStop() { t.stopOnce.Do(func() { close(t.stop) }) }

// end refuses further prompts, stops the running turn and waits for it, and
// returns the session's last id and turn count. Ending twice is harmless.
func (s *session) end() (string, int32) {
	s.mu.Lock()
	s.state = supervisorv1.SessionState_SESSION_STATE_CLOSED
	t := s.cur
	s.mu.Unlock()
	if t != nil {
		t.requestStop()
		<-t.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.turns
}

// idle reports whether no turn runs and for how long the session has been
// without one at now.
func (s *session) idle(now time.Time) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur == nil, now.Sub(s.activity)
}

// sessionInfo is a consistent copy of the session's state.
type sessionInfo struct {
	id         string
	state      supervisorv1.SessionState
	turns      int32
	startedAt  time.Time
	lastPrompt time.Time
}

func (s *session) info() sessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sessionInfo{id: s.id, state: s.state, turns: s.turns, startedAt: s.startedAt, lastPrompt: s.lastPrompt}
}
