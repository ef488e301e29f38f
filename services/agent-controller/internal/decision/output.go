package decision

import (
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

// DefaultMaxOutputBytes caps status.output: 256 KiB keeps the Agent object
// far below etcd's request limit while holding the end of any realistic run.
const DefaultMaxOutputBytes = 256 << 10

// TailOutput returns the end of log, at most max bytes. A cut log starts
// with a marker saying how much was dropped, and never starts inside a
// UTF-8 sequence, so status.output is always valid text.
func TailOutput(log string, limit int) string {
	return tailOutput(log, 0, limit)
}

// tailOutput is TailOutput of a log whose first dropped bytes were already
// discarded while it was read.
func tailOutput(log string, dropped int64, limit int) string {
	if limit <= 0 || (dropped == 0 && len(log) <= limit) {
		return log
	}
	start := max(len(log)-limit, 0)
	for {
		for start < len(log) && !utf8.RuneStart(log[start]) {
			start++
		}
		marker := fmt.Sprintf("...[truncated %d bytes]...\n", dropped+int64(start))
		if len(marker) >= limit {
			// Too small a cap for a marker: keep just the aligned tail.
			return log[start:]
		}
		over := len(marker) + len(log) - start - limit
		if over <= 0 {
			return marker + log[start:]
		}
		start += over
	}
}

// LogTail is the end of a run's log as read back: at most the bytes the
// status output cap can keep, and how many came before them.
type LogTail struct {
	// Text is the kept end of the log.
	Text string
	// Dropped counts the bytes read and discarded before Text.
	Dropped int64
}

// tailChunks holds ReadTail's read buffers between reads.
var tailChunks = sync.Pool{New: func() any {
	b := make([]byte, 32<<10)
	return &b
}}

// ReadTail reads r to its end keeping only its last limit bytes, so a
// huge log costs the controller at most limit bytes of memory however
// much the pod printed.
func ReadTail(r io.Reader, limit int) (LogTail, error) {
	if limit <= 0 {
		limit = DefaultMaxOutputBytes
	}
	// A window of at most 2×limit: append until full, then slide the last
	// limit bytes to the front; each byte is copied at most twice. The
	// window grows with the log: most run logs are a few KiB, and the
	// controller reads one for every run that ends.
	window := 2 * limit
	var buf []byte
	var dropped int64
	chunk := tailChunks.Get().(*[]byte)
	defer tailChunks.Put(chunk)
	for {
		n, err := r.Read(*chunk)
		data := (*chunk)[:n]
		for len(data) > 0 {
			if len(buf) == window {
				cut := len(buf) - limit
				dropped += int64(cut)
				buf = append(buf[:0], buf[cut:]...)
			}
			take := min(len(data), window-len(buf))
			buf = append(buf, data[:take]...)
			data = data[take:]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return LogTail{}, err
		}
	}
	if len(buf) > limit {
		cut := len(buf) - limit
		dropped += int64(cut)
		buf = buf[cut:]
	}
	return LogTail{Text: string(buf), Dropped: dropped}, nil
}
