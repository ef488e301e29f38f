// Package truncate shortens text for places with a size limit: condition
// and event messages, error messages that echo input, test output.
package truncate

import "unicode/utf8"

// Ellipsis marks where String cut a string. It is one character, so the
// mark costs three bytes of the limit rather than three characters.
const Ellipsis = "…"

// String returns s when it is at most n bytes long, and otherwise its
// longest prefix that, followed by Ellipsis, fits in n bytes. The result
// never exceeds n bytes, because the limits it serves (an API field, a
// log line) count bytes, and never splits a multi-byte UTF-8 character, so
// valid UTF-8 stays valid. When n is smaller than Ellipsis the prefix is
// returned without it, and n <= 0 gives "".
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	cut, mark := n-len(Ellipsis), Ellipsis
	if cut < 0 {
		cut, mark = n, ""
	}
	// A character starts at most UTFMax-1 bytes before a continuation
	// byte; further back there is only invalid input, which no cut can
	// split, so the search stops there rather than eating the string.
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut] + mark
}
