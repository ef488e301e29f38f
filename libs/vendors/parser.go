package vendors

import (
	"bytes"
	"fmt"
)

// Parser reads one run's event lines, in order. It keeps the little state a
// stream needs (the session id, the text of the final answer), so use one
// parser per run. A Parser is not safe for concurrent use.
type Parser interface {
	// Parse turns one line (without its newline) into zero or more events.
	// Blank lines give none. A line that is not a JSON object, or whose
	// fields have the wrong types, gives a KindRaw event (or the events that
	// could still be read) and an error wrapping ErrMalformedLine, so the
	// caller can forward the line and count the error. Parse never panics.
	//
	// The returned slice is only valid until the next call, which reuses
	// it to spare an allocation per line; the events in it may be kept.
	Parse(line []byte) ([]Event, error)
	// SessionID is the newest session id the stream reported, or "".
	SessionID() string
}

// stream is the state every vendor's parser shares.
type stream struct {
	vendor  string
	session string
	out     []Event
}

// SessionID implements Parser.
func (s *stream) SessionID() string { return s.session }

// begin starts a new line; it reports false for a blank line.
func (s *stream) begin(line []byte) bool {
	s.out = s.out[:0]
	return len(bytes.TrimSpace(line)) > 0
}

// setSession records a session id the line revealed; an empty one keeps
// the previous, because most lines do not repeat it.
func (s *stream) setSession(id string) {
	if id != "" && id != s.session {
		s.session = id
	}
}

// emit appends an event, stamped with the vendor and session.
func (s *stream) emit(e Event) {
	e.Vendor, e.SessionID = s.vendor, s.session
	s.out = append(s.out, e)
}

// raw appends a KindRaw event for a line that is kept but not classified.
func (s *stream) raw() { s.emit(Event{Kind: KindRaw}) }

// decode unmarshals line into v. It reports ok=false when nothing could be
// read (the caller then returns a raw event). A field of the wrong type still
// lets the rest be used; err then says what was wrong.
func (s *stream) decode(line []byte, v any) (ok bool, err error) {
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] != '{' {
		// Fast path for plain text lines; json would reject them anyway.
		return false, fmt.Errorf("%s: %w: not a JSON object", s.vendor, ErrMalformedLine)
	}
	err = unmarshal(trimmed, v)
	if err == nil {
		return true, nil
	}
	if isTypeError(err) {
		return true, fmt.Errorf("%s: %w: %w", s.vendor, ErrMalformedLine, err)
	}
	return false, fmt.Errorf("%s: %w: %w", s.vendor, ErrMalformedLine, err)
}

// parseWith runs the shared steps around a vendor's classify: blank lines,
// decoding, and falling back to a raw event.
func parseWith[T any](s *stream, line []byte, v *T, classify func(*T)) ([]Event, error) {
	if !s.begin(line) {
		return nil, nil
	}
	var zero T
	*v = zero
	ok, err := s.decode(line, v)
	if !ok {
		s.raw()
		return s.out, err
	}
	classify(v)
	if len(s.out) == 0 {
		s.raw()
	}
	return s.out, err
}

// textContent is content that vendors send either as a string or as a list
// of {"type":"text","text":...} blocks; it keeps the text only.
type textContent string

// UnmarshalJSON accepts a string, a list of text blocks, or anything else,
// which yields no text. It never fails: an error here would stop the
// decoding of the rest of the line (the session id often comes after).
func (t *textContent) UnmarshalJSON(b []byte) error {
	*t = ""
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		_ = unmarshal(b, &s) // the outer decoder already checked the syntax
		*t = textContent(s)
	case len(b) > 0 && b[0] == '[':
		var blocks []struct {
			Text string `json:"text"`
		}
		_ = tolerate(unmarshal(b, &blocks))
		var buf []byte
		for i, bl := range blocks {
			if i > 0 && len(buf) > 0 && bl.Text != "" {
				buf = append(buf, '\n')
			}
			buf = append(buf, bl.Text...)
		}
		*t = textContent(buf)
	}
	return nil
}

// tolerate drops a type mismatch inside a nested value, keeping what was
// decoded around it, and passes any other error on.
func tolerate(err error) error {
	if isTypeError(err) {
		return nil
	}
	return err
}

// nonNegative clamps a derived counter: a vendor that reports fewer total
// tokens than cached ones must not produce a negative count.
func nonNegative(n int64) int64 {
	if n < 0 {
		return 0
	}
	return n
}

// LastSessionID reads a CLI's output (for example the log tail of a run
// pod) with v's parser and returns the newest session id it reports, or "".
// Lines that do not parse are skipped.
func LastSessionID(v Vendor, output []byte) string {
	p := v.NewParser()
	for len(output) > 0 {
		line := output
		if i := bytes.IndexByte(output, '\n'); i >= 0 {
			line, output = output[:i], output[i+1:]
		} else {
			output = nil
		}
		_, _ = p.Parse(line) // bad lines are expected in a log tail
	}
	return p.SessionID()
}
