package reconcile

import (
	"fmt"
	"unicode/utf8"
)

// DefaultMaxOutputBytes caps status.output: 256 KiB keeps the Agent object
// far below etcd's request limit while holding the end of any realistic run.
const DefaultMaxOutputBytes = 256 << 10

// TailOutput returns the end of log, at most max bytes. A cut log starts
// with a marker saying how much was dropped, and never starts inside a
// UTF-8 sequence, so status.output is always valid text.
func TailOutput(log string, max int) string {
	if max <= 0 || len(log) <= max {
		return log
	}
	start := len(log) - max
	for {
		for start < len(log) && !utf8.RuneStart(log[start]) {
			start++
		}
		marker := fmt.Sprintf("...[truncated %d bytes]...\n", start)
		if len(marker) >= max {
			// Too small a cap for a marker: keep just the aligned tail.
			return log[start:]
		}
		over := len(marker) + len(log) - start - max
		if over <= 0 {
			return marker + log[start:]
		}
		start += over
	}
}
