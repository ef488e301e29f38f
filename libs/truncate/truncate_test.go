package truncate

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	cases := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"short text is kept", "abc", 10, "abc"},
		{"text exactly at the limit is kept", "abcdef", 6, "abcdef"},
		{"long text is cut with the mark inside the limit", "abcdefgh", 6, "abc…"},
		{"the empty string is kept", "", 0, ""},
		{"a zero limit gives nothing", "abc", 0, ""},
		{"a negative limit gives nothing", "abc", -1, ""},
		{"a limit the mark just fills gives the mark", "abcdef", 3, "…"},
		{"a limit smaller than the mark gives a bare prefix", "abcdef", 2, "ab"},
		{"a limit of one gives one byte", "abcdef", 1, "a"},
		{"a two-byte character is not split", "aéé", 4, "a…"},
		{"a three-byte character is not split", "a日本語", 6, "a…"},
		{"a four-byte character is not split", "ab😀😀", 8, "ab…"},
		{"a character that fits is kept", "日本語日本語", 9, "日本…"},
		{"a limit smaller than the mark does not split a character", "日本語", 2, ""},
		{"a bare prefix keeps whole characters", "é日", 2, "é"},
		{"stray continuation bytes do not eat the string", "ab" + strings.Repeat("\x80", 10), 9, "ab\x80…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := String(tc.s, tc.n)
			if got != tc.want {
				t.Errorf("String(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
			}
			if len(got) > max(tc.n, 0) && got != tc.s {
				t.Errorf("String(%q, %d) = %q is %d bytes, over the limit", tc.s, tc.n, got, len(got))
			}
		})
	}
}

// FuzzString checks the promises of String's doc comment on any input.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "abc", "aéé", "a日本語", "ab😀😀", "ab\x80\x80\x80\x80\x80", "\xff\xfe"} {
		for _, n := range []int{-1, 0, 1, 2, 3, 4, 7, 64} {
			f.Add(s, n)
		}
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := String(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("String(%q, %d) = %q, want it unchanged", s, n, got)
			}
			return
		}
		if len(got) > max(n, 0) {
			t.Fatalf("String(%q, %d) = %q is %d bytes, over the limit", s, n, got, len(got))
		}
		prefix := got
		if n >= len(Ellipsis) {
			var ok bool
			if prefix, ok = strings.CutSuffix(got, Ellipsis); !ok {
				t.Fatalf("String(%q, %d) = %q has no mark", s, n, got)
			}
		}
		if !strings.HasPrefix(s, prefix) {
			t.Fatalf("String(%q, %d) = %q does not start s", s, n, got)
		}
		// The cut moves back only to a character boundary.
		if room := max(n, 0) - (len(got) - len(prefix)); len(prefix) < room-(utf8.UTFMax-1) {
			t.Fatalf("String(%q, %d) = %q cut more than one character short", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("String(%q, %d) = %q split a character", s, n, got)
		}
	})
}
