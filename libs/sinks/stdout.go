package sinks

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Stdout writes one line per event, bare: the vendor CLI's original line
// for CLI events that carry one (the controller reads the pod log back as
// status.output and expects the tool's own lines), and the event object
// (EventObject) for everything else: lifecycle, file and batch events, and
// CLI events without a raw line. Each line is written with one Write call, so lines
// from concurrent writers to the same stream do not interleave.
type Stdout struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewStdout returns a Stdout sink writing to w (os.Stdout in a run pod).
func NewStdout(w io.Writer) *Stdout { return &Stdout{w: w} }

// Line returns the line Stdout prints for ev, without the newline.
func Line(ev *eventsv1.RunEvent) ([]byte, error) {
	return appendLine(nil, ev)
}

func appendLine(dst []byte, ev *eventsv1.RunEvent) ([]byte, error) {
	if raw := ev.GetRaw(); len(raw) > 0 && events.IsCLIEvent(ev) {
		return append(dst, raw...), nil
	}
	return appendEventObject(dst, ev)
}

// Deliver implements Sink.
func (s *Stdout) Deliver(_ context.Context, ev *eventsv1.RunEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	line, err := appendLine(s.buf[:0], ev)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	s.buf = line
	if _, err := s.w.Write(line); err != nil {
		return fmt.Errorf("stdout sink: %w", err)
	}
	return nil
}

// Close implements Sink; the writer is not closed (it is usually os.Stdout).
func (s *Stdout) Close(context.Context) error { return nil }
