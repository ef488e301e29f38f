// Package prompt renders a recipe's prompt template with the Agent's
// parameters, by the placeholder rules below, up to a size cap.
package prompt

import (
	"fmt"
	"strings"
)

// MaxRenderedBytes caps a rendered prompt: 1 MiB. Admission bounds the
// template (64 KiB) and each parameter value (16 KiB), but a template
// repeating a placeholder thousands of times still multiplies them, and
// the agent-controller renders batch prompts in its own memory. No real
// prompt comes near the cap: a Job run hands the prompt to its CLI as one
// argument, which Linux already limits to 128 KiB. docs/agent-controller.md
// ("Prompt size") describes what happens to a run over it.
const MaxRenderedBytes = 1 << 20

// TooLargeError is returned when a prompt would render to more than the
// cap. Rendering stops at the piece that passes it, so AtLeast is a lower
// bound of the full size, not the full size.
type TooLargeError struct {
	// Limit is the cap, in bytes.
	Limit int
	// TemplateBytes is the size of the template.
	TemplateBytes int
	// AtLeast is the size the output had reached when it passed Limit.
	AtLeast int
}

// Error names the cap and the sizes, in a sentence fit for an Agent's
// status.failureReason.
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the prompt renders to more than the %d-byte cap: its %d-byte template with the Agent's parameters reaches at least %d bytes",
		e.Limit, e.TemplateBytes, e.AtLeast)
}

// Render is RenderLimit with MaxRenderedBytes.
func Render(tmpl string, params map[string]string) (string, error) {
	return RenderLimit(tmpl, params, MaxRenderedBytes)
}

// RenderLimit replaces every {name} placeholder of tmpl whose name is a key
// of params with its value. When the result would be longer than limit
// bytes it returns a *TooLargeError instead, having allocated nothing for
// the result: the size is counted first, and the output is built only when
// it fits.
//
// A placeholder is "{", one or more of [A-Za-z0-9_.-], then "}". The rules,
// fixed so that existing recipes always render the same:
//   - an unknown placeholder stays as written, braces included, so a typo
//     is visible in the prompt (and in the Job) rather than silently empty;
//   - "{}", an unclosed "{" and braces around other characters are text;
//   - every occurrence of a known placeholder is replaced;
//   - one pass: a value that itself looks like a placeholder is not
//     expanded again, so parameters cannot inject other parameters;
//   - there is no escaping, no conditional and no loop.
func RenderLimit(tmpl string, params map[string]string, limit int) (string, error) {
	n, err := SizeLimit(tmpl, params, limit)
	if err != nil {
		return "", err
	}
	if len(params) == 0 || !strings.Contains(tmpl, "{") {
		return tmpl, nil
	}
	var b strings.Builder
	b.Grow(n)
	s := scanner{tmpl: tmpl, params: params}
	for piece, ok := s.next(); ok; piece, ok = s.next() {
		b.WriteString(piece)
	}
	return b.String(), nil
}

// Size is SizeLimit with MaxRenderedBytes.
func Size(tmpl string, params map[string]string) (int, error) {
	return SizeLimit(tmpl, params, MaxRenderedBytes)
}

// SizeLimit returns the size RenderLimit's result would have, without
// building it, or a *TooLargeError as soon as the count passes limit.
func SizeLimit(tmpl string, params map[string]string, limit int) (int, error) {
	if len(params) == 0 || !strings.Contains(tmpl, "{") {
		if len(tmpl) > limit {
			return 0, &TooLargeError{Limit: limit, TemplateBytes: len(tmpl), AtLeast: len(tmpl)}
		}
		return len(tmpl), nil
	}
	n := 0
	s := scanner{tmpl: tmpl, params: params}
	for piece, ok := s.next(); ok; piece, ok = s.next() {
		// n never exceeds limit, so limit-n cannot overflow.
		if len(piece) > limit-n {
			return 0, &TooLargeError{Limit: limit, TemplateBytes: len(tmpl), AtLeast: n + len(piece)}
		}
		n += len(piece)
	}
	return n, nil
}

// scanner walks a template and yields the output piece by piece: runs of
// literal text and parameter values, all substrings of the template or of
// the values, so walking it allocates nothing.
type scanner struct {
	tmpl   string
	params map[string]string
	i      int
}

// next returns the next piece of the output, and false at the end.
func (s *scanner) next() (string, bool) {
	tmpl, i := s.tmpl, s.i
	if i >= len(tmpl) {
		return "", false
	}
	open := strings.IndexByte(tmpl[i:], '{')
	switch {
	case open < 0:
		s.i = len(tmpl)
		return tmpl[i:], true
	case open > 0:
		s.i = i + open
		return tmpl[i : i+open], true
	}
	end := i + 1
	for end < len(tmpl) && nameByte(tmpl[end]) {
		end++
	}
	if end < len(tmpl) && tmpl[end] == '}' && end > i+1 {
		if v, ok := s.params[tmpl[i+1:end]]; ok {
			s.i = end + 1
			return v, true
		}
	}
	// Not a known placeholder: keep the "{" and rescan after it, so
	// "{{name}" still finds "{name}".
	s.i = i + 1
	return tmpl[i : i+1], true
}

// nameByte reports the bytes a placeholder name may contain.
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '-'
}
