package lockedio

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// Concurrent writers never split one another's writes, whichever writer
// they share.
func TestConcurrentWritesStayWhole(t *testing.T) {
	var plain bytes.Buffer
	buf := &Buffer{}
	for _, tc := range []struct {
		name string
		w    interface{ Write([]byte) (int, error) }
		read func() string
	}{
		{"Writer", NewWriter(&plain), plain.String},
		{"Buffer", buf, buf.String},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const writers, lines = 8, 200
			var wg sync.WaitGroup
			for i := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					line := strings.Repeat(string(rune('a'+i)), 64) + "\n"
					for range lines {
						_, _ = tc.w.Write([]byte(line))
					}
				}()
			}
			wg.Wait()
			got := strings.Split(strings.TrimSuffix(tc.read(), "\n"), "\n")
			if len(got) != writers*lines {
				t.Fatalf("%d lines, want %d", len(got), writers*lines)
			}
			for _, l := range got {
				if len(l) != 64 || strings.Count(l, l[:1]) != 64 {
					t.Fatalf("interleaved line %q", l)
				}
			}
		})
	}
}

// Bytes is a copy: later writes do not change what it returned.
func TestBufferBytesIsACopy(t *testing.T) {
	var b Buffer
	_, _ = b.Write([]byte("one"))
	got := b.Bytes()
	_, _ = b.Write([]byte("two"))
	if string(got) != "one" || b.String() != "onetwo" {
		t.Fatalf("Bytes %q, String %q", got, b.String())
	}
}
