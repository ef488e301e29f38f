// Package lockedio has writers that several goroutines may share: a
// process's stderr written by its logger and a forwarded child's output,
// or a buffer a child process writes while a test reads it.
package lockedio

import (
	"bytes"
	"io"
	"sync"
)

// Writer serialises writes to an io.Writer, so that what goroutines
// write whole (a log line each) never interleaves mid-way.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes b to the underlying writer, alone.
func (l *Writer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// Buffer is a bytes.Buffer safe to read while another goroutine writes
// it. The zero value is empty and ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written so far.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
