package sinks

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// FileMode is the mode a file sink creates its file with: owner only,
// because events carry prompts, tool output and file contents.
const FileMode = 0o600

// File appends one JSON envelope per line to a file. The file is opened
// (created if missing, never truncated) on the first event and kept open;
// a failed open is retried on the next event, so a path that appears
// later still gets the rest of the run. Each line is one write on an
// O_APPEND file, so other writers appending to the same file do not split
// it.
type File struct {
	path string

	mu  sync.Mutex
	f   *os.File
	buf []byte
}

// NewFile returns a File sink for path.
func NewFile(path string) *File { return &File{path: path} }

// Deliver implements Sink.
func (s *File) Deliver(_ context.Context, ev *eventsv1.RunEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, FileMode)
		if err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		s.f = f
	}
	line, err := events.AppendEncode(s.buf[:0], ev)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	s.buf = line
	if _, err := s.f.Write(line); err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}

// Close implements Sink.
func (s *File) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("file sink: %w", err)
	}
	return nil
}
