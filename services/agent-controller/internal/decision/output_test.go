package decision

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

func TestReadTail(t *testing.T) {
	cases := []struct {
		rule        string
		log         string
		limit       int
		wantText    string
		wantDropped int64
	}{
		{"a log within the limit is kept whole", "hello\n", 10, "hello\n", 0},
		{"a log of exactly the limit is kept whole", "0123456789", 10, "0123456789", 0},
		{"a longer log keeps only its last limit bytes", strings.Repeat("a", 95) + "LAST5", 5, "LAST5", 95},
		{"a log many times the limit still keeps only its end", strings.Repeat("x", 1<<20) + "end", 3, "end", 1 << 20},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			// One byte per Read exercises every slide of the window.
			got, err := ReadTail(iotest.OneByteReader(strings.NewReader(c.log)), c.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != c.wantText || got.Dropped != c.wantDropped {
				t.Fatalf("got %q dropped %d, want %q dropped %d", got.Text, got.Dropped, c.wantText, c.wantDropped)
			}
		})
	}
	t.Run("a read error is returned, not taken for the end", func(t *testing.T) {
		boom := errors.New("connection reset")
		if _, err := ReadTail(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 10); !errors.Is(err, boom) {
			t.Fatalf("err %v", err)
		}
	})
}

func TestTailOutputCountsBytesDroppedWhileReading(t *testing.T) {
	log := strings.Repeat("日本語", 200) // 1800 bytes
	tail, err := ReadTail(strings.NewReader(log), 100)
	if err != nil {
		t.Fatal(err)
	}
	got := tailOutput(tail.Text, tail.Dropped, 100)
	if len(got) > 100 || !utf8.ValidString(got) {
		t.Fatalf("%d bytes, valid %v: %q", len(got), utf8.ValidString(got), got)
	}
	marker, rest, ok := strings.Cut(got, "\n")
	if !ok || !strings.HasSuffix(log, rest) {
		t.Fatalf("not a marked tail: %q", got)
	}
	if want := "...[truncated " + strconv.Itoa(len(log)-len(rest)) + " bytes]..."; marker != want {
		t.Fatalf("marker %q, want %q (bytes dropped while reading count too)", marker, want)
	}
}

func TestTailOutput(t *testing.T) {
	cases := []struct {
		rule string
		log  string
		max  int
	}{
		{"a short log is kept whole", "hello", 10},
		{"a long log keeps its end", strings.Repeat("x", 1000) + "END", 100},
		{"a cut never splits a UTF-8 character", strings.Repeat("日本", 300), 97},
		{"a tiny cap still returns valid text", strings.Repeat("日", 50), 5},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got := TailOutput(c.log, c.max)
			if len(got) > c.max || !utf8.ValidString(got) {
				t.Fatalf("%d bytes (max %d), valid %v", len(got), c.max, utf8.ValidString(got))
			}
			if len(c.log) <= c.max && got != c.log {
				t.Fatalf("short log changed")
			}
			if len(c.log) > c.max && !strings.HasSuffix(c.log, got[strings.Index(got, "\n")+1:]) {
				t.Fatalf("not a tail: %q", got)
			}
		})
	}
}

func FuzzTailOutput(f *testing.F) {
	f.Add("héllo wörld", 5)
	f.Fuzz(func(t *testing.T, log string, max int) {
		if max < 0 || max > 1<<20 {
			return
		}
		got := TailOutput(log, max)
		if max > 0 && len(got) > max {
			t.Fatalf("%d > %d", len(got), max)
		}
		if utf8.ValidString(log) && !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 from valid input")
		}
	})
}
