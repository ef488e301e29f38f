package turntest

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
)

// fakeStream yields msgs, then err (io.EOF when nil).
type fakeStream struct {
	msgs []*supervisorv1.PromptResponse
	err  error
}

func (s *fakeStream) Recv() (*supervisorv1.PromptResponse, error) {
	if len(s.msgs) == 0 {
		if s.err != nil {
			return nil, s.err
		}
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

// fatalRecorder is a testing.TB whose Fatalf records the failure and
// stops the goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	failed string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func event() *supervisorv1.PromptResponse {
	return &supervisorv1.PromptResponse{Item: &supervisorv1.PromptResponse_Event{Event: &eventsv1.RunEvent{Id: "e"}}}
}

func end() *supervisorv1.PromptResponse {
	return &supervisorv1.PromptResponse{Item: &supervisorv1.PromptResponse_TurnEnd{TurnEnd: &supervisorv1.TurnEnd{SessionId: "s"}}}
}

func TestReadChecksTheTurnsShape(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		stream *fakeStream
		events int
		ended  bool
		err    error
		fails  string
	}{
		{name: "events then the end", stream: &fakeStream{msgs: []*supervisorv1.PromptResponse{event(), event(), end()}}, events: 2, ended: true},
		{name: "the stream's error", stream: &fakeStream{msgs: []*supervisorv1.PromptResponse{event()}, err: boom}, events: 1, err: boom},
		{name: "no end", stream: &fakeStream{msgs: []*supervisorv1.PromptResponse{event()}}, fails: "stream ended without a turn end after 1 events"},
		{name: "a message after the end", stream: &fakeStream{msgs: []*supervisorv1.PromptResponse{end(), event()}}, fails: "message after the turn end"},
		{name: "an empty message", stream: &fakeStream{msgs: []*supervisorv1.PromptResponse{{}}}, fails: "empty stream message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &fatalRecorder{TB: t}
			var events []*eventsv1.RunEvent
			var te *supervisorv1.TurnEnd
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				events, te, err = Read(rec, tc.stream)
			}()
			<-done
			if tc.fails != "" {
				if len(rec.failed) < len(tc.fails) || rec.failed[:len(tc.fails)] != tc.fails {
					t.Fatalf("failure %q, want %q", rec.failed, tc.fails)
				}
				return
			}
			if rec.failed != "" || len(events) != tc.events || (te != nil) != tc.ended || !errors.Is(err, tc.err) {
				t.Fatalf("Read = %d events, end %v, err %v (failure %q)", len(events), te, err, rec.failed)
			}
		})
	}
}
