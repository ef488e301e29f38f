package sinks

import (
	"context"
	"fmt"
	"os"
	"sync"
)

// FileMode is the mode a file sink creates its file with: owner only,
// because events carry prompts, tool output and file contents.
const FileMode = 0o600

// File appends one sink payload per line to a file. The file is opened
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

// DeliverPayload implements PayloadSink.
func (s *File) DeliverPayload(_ context.Context, payload []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, FileMode)
		if err != nil {
			return fmt.Errorf("file sink: %w", err)
		}
		s.f = f
	}
	line := append(append(s.buf[:0], payload...), '\n')
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
