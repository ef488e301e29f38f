package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Log files hold one record per line in the CRI logging format:
//
//	<RFC3339Nano time> <stdout|stderr> <F|P> <content>
//
// F ends a line; P is a piece of a longer line, or a last line without a
// newline. Each container instance has its own file named after its
// restart count, so `previous` is the file before the newest.

const (
	maxLineChunk = 16 * 1024
	// drainGrace is how long a closing pump waits for more output once it
	// has read everything in the pipe.
	drainGrace = 100 * time.Millisecond
	doneSuffix = ".done"
)

// logPump copies a process's stdout and stderr into its log file.
type logPump struct {
	readers []*os.File
	wg      sync.WaitGroup
	once    sync.Once
	// drained closes once everything read has been written (end of
	// output, or the pump was closed).
	drained chan struct{}
}

// pumpLogs appends timestamped records read from readers (stdout, stderr)
// to path until both reach end of file, then marks the file complete.
func pumpLogs(readers []*os.File, path string) *logPump {
	p := &logPump{readers: readers, drained: make(chan struct{})}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		closeAll(readers)
		close(p.drained)
		return p
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		closeAll(readers)
		close(p.drained)
		return p
	}
	var mu sync.Mutex
	var eofs sync.WaitGroup
	for i, r := range readers {
		stream := "stdout"
		if i == 1 {
			stream = "stderr"
		}
		eofs.Add(1)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if copyRecords(r, out, &mu, stream) {
				eofs.Done()
			}
		}()
	}
	go func() {
		p.wg.Wait()
		_ = out.Close()
		close(p.drained)
	}()
	go func() {
		// Only a real end of output (not a detach) completes the file.
		eofs.Wait()
		_ = os.WriteFile(path+doneSuffix, nil, 0o644)
	}()
	return p
}

// wait waits until the output is in the log file, at most limit: a process
// the container left behind may hold its output open.
func (p *logPump) wait(limit time.Duration) {
	if p == nil {
		return
	}
	select {
	case <-p.drained:
	case <-time.After(limit):
	}
}

// close stops reading without completing the log, for a node handing its
// processes over to a successor. What the container has already written
// is drained into the log first (reads go on until drainGrace passes with
// nothing left to read): a container that ends before the successor
// adopts it takes the pipe's unread buffer with it, as its shim holds the
// last open end.
func (p *logPump) close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		deadline := time.Now().Add(drainGrace)
		for _, r := range p.readers {
			if err := r.SetReadDeadline(deadline); err != nil {
				// Not pollable: nothing would end the read but closing.
				_ = r.Close()
			}
		}
		p.wg.Wait()
		closeAll(p.readers)
	})
	p.wg.Wait()
}

// copyRecords reports whether r reached end of file (rather than being
// closed under it).
func copyRecords(r *os.File, out *os.File, mu *sync.Mutex, stream string) bool {
	defer func() { _ = r.Close() }()
	br := bufio.NewReaderSize(r, maxLineChunk)
	var buf []byte
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			tag, content := "P", line
			if line[len(line)-1] == '\n' {
				tag, content = "F", line[:len(line)-1]
			}
			buf = buf[:0]
			buf = time.Now().UTC().AppendFormat(buf, time.RFC3339Nano)
			buf = append(buf, ' ')
			buf = append(buf, stream...)
			buf = append(buf, ' ')
			buf = append(buf, tag...)
			buf = append(buf, ' ')
			buf = append(buf, content...)
			buf = append(buf, '\n')
			mu.Lock()
			_, _ = out.Write(buf)
			mu.Unlock()
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return true
		default:
			return false
		}
	}
}

// logRecord is one parsed line of a log file.
type logRecord struct {
	ts      time.Time
	rawTS   []byte
	full    bool
	content []byte
}

func parseRecord(line []byte) (logRecord, bool) {
	var rec logRecord
	parts := bytes.SplitN(line, []byte{' '}, 4)
	if len(parts) != 4 {
		return rec, false
	}
	ts, err := time.Parse(time.RFC3339Nano, string(parts[0]))
	if err != nil {
		return rec, false
	}
	rec.ts, rec.rawTS, rec.full, rec.content = ts, parts[0], string(parts[2]) == "F", parts[3]
	return rec, true
}

// logOptions are the kubelet containerLogs query parameters.
type logOptions struct {
	tail       int64 // < 0: all
	limitBytes int64 // <= 0: no limit
	since      time.Time
	timestamps bool
	follow     bool
}

// tailOffset returns where the last n lines of f begin, reading backwards.
func tailOffset(f *os.File, n int64) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if n < 0 {
		return 0, nil
	}
	if n == 0 {
		return size, nil
	}
	const chunk = 64 * 1024
	buf := make([]byte, chunk)
	pos := size
	var seen int64
	// The file ends with a newline; the newline ending the last line
	// doesn't start a line.
	for pos > 0 {
		read := int64(chunk)
		if pos < read {
			read = pos
		}
		pos -= read
		if _, err := f.ReadAt(buf[:read], pos); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for i := read - 1; i >= 0; i-- {
			if buf[i] != '\n' || pos+i == size-1 {
				continue
			}
			seen++
			if seen == n {
				return pos + i + 1, nil
			}
		}
	}
	return 0, nil
}

// writeLog streams the log at path to w as the options ask. With follow it
// keeps going until the instance's output is complete or ctx ends.
func writeLog(ctx context.Context, w io.Writer, path string, opts logOptions) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	off, err := tailOffset(f, opts.tail)
	if err != nil {
		return fmt.Errorf("find tail of %s: %w", path, err)
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("seek %s: %w", path, err)
	}
	flusher, _ := w.(interface{ Flush() })
	br := bufio.NewReaderSize(f, 64*1024)
	var written int64
	var pending []byte
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] != '\n' {
			// A record still being written: keep it for the next read.
			pending = append(pending, line...)
			line = nil
		} else if len(pending) > 0 {
			line = append(pending, line...)
			pending = nil
		}
		if len(line) > 0 {
			rec, ok := parseRecord(line[:len(line)-1])
			if ok && !rec.ts.Before(opts.since) {
				out := rec.content
				if rec.full {
					out = append(out, '\n')
				}
				if opts.timestamps {
					out = append(append(append([]byte{}, rec.rawTS...), ' '), out...)
				}
				if opts.limitBytes > 0 && written+int64(len(out)) > opts.limitBytes {
					out = out[:opts.limitBytes-written]
				}
				n, werr := w.Write(out)
				written += int64(n)
				if werr != nil {
					return nil
				}
				if opts.limitBytes > 0 && written >= opts.limitBytes {
					return nil
				}
			}
			continue
		}
		if err == nil || !errors.Is(err, io.EOF) {
			if err != nil {
				return fmt.Errorf("read log %s: %w", path, err)
			}
			continue
		}
		if !opts.follow {
			return nil
		}
		if flusher != nil {
			flusher.Flush()
		}
		if _, err := os.Stat(path + doneSuffix); err == nil && len(pending) == 0 {
			// Complete: drain what was appended before the marker.
			if more, _ := br.Peek(1); len(more) == 0 {
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// instanceLogPath names the log file of one container instance.
func instanceLogPath(podLogDir, container string, restart int) string {
	return filepath.Join(podLogDir, container, strconv.Itoa(restart)+".log")
}
