package events

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// errInvalidAck is a reply parsePubAck does not take for a publish ack.
// The window then treats its event as failed and publishOne sends it
// again, which the dedupe id makes harmless.
var errInvalidAck = errors.New("events: invalid publish ack")

// maxAckDepth bounds how deeply nested an ignored value of an ack may be;
// JetStream's acks are flat, deeper input is refused rather than recursed
// into.
const maxAckDepth = 32

// pubAck is one JetStream publish ack: the stream stored the message
// (Stream is set, HasError is not) or refused it (HasError).
type pubAck struct {
	Stream    string
	Seq       uint64
	Duplicate bool
	Domain    string

	HasError         bool
	Code             int
	ErrCode          uint16
	ErrorDescription string
}

// parsePubAck reads the JSON body of a JetStream publish ack, e.g.
// {"stream":"S","seq":7} or {"error":{"code":503,"err_code":10077,
// "description":"..."}}, without encoding/json's reflection: the window
// reads one per event. Keys are matched exactly, as the server writes
// them; unknown keys are skipped after checking their values are valid
// JSON. Whatever it accepts it reads as encoding/json would into a struct
// with those fields (FuzzParsePubAck holds it to that); a key that
// encoding/json would match by case folding, or any other input it is
// unsure of, is refused with errInvalidAck. A refusal only costs a
// resend.
func parsePubAck(data []byte) (pubAck, error) {
	var a pubAck
	s := ackScanner{b: data}
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "stream":
			return s.stringField(&a.Stream)
		case "seq":
			return s.uintField(&a.Seq, 64)
		case "duplicate":
			return s.boolField(&a.Duplicate)
		case "domain":
			return s.stringField(&a.Domain)
		case "error":
			if s.null() {
				a.HasError, a.Code, a.ErrCode, a.ErrorDescription = false, 0, 0, ""
				return nil
			}
			// As encoding/json into a pointer it already set: fields this
			// object leaves out keep what an earlier "error" gave them
			// (zero after a null).
			a.HasError = true
			return s.object(func(key []byte) error {
				switch string(key) {
				case "code":
					return s.intField(&a.Code)
				case "err_code":
					var v uint64
					if s.null() {
						return nil
					}
					if err := s.uintField(&v, 16); err != nil {
						return err
					}
					a.ErrCode = uint16(v)
					return nil
				case "description":
					return s.stringField(&a.ErrorDescription)
				}
				if foldsTo(key, "code", "err_code", "description") {
					return errInvalidAck
				}
				return s.skip(1)
			})
		}
		if foldsTo(key, "stream", "seq", "duplicate", "domain", "error") {
			return errInvalidAck
		}
		return s.skip(0)
	})
	if err != nil {
		return pubAck{}, err
	}
	s.space()
	if s.i != len(s.b) {
		return pubAck{}, errInvalidAck
	}
	return a, nil
}

// foldsTo reports a key encoding/json might match to one of names without
// being equal to it: equal ignoring ASCII case, or holding a byte outside
// ASCII (encoding/json also folds a few non-ASCII letters, such as the
// Kelvin sign to k).
func foldsTo(key []byte, names ...string) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	for _, n := range names {
		if len(n) != len(key) {
			continue
		}
		same := true
		for i := range len(n) {
			if lower(key[i]) != n[i] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// ackScanner walks an ack's bytes; every method leaves i after what it
// read.
type ackScanner struct {
	b []byte
	i int
}

func (s *ackScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next byte after white space, 0 at the end.
func (s *ackScanner) peek() byte {
	s.space()
	if s.i == len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// literal consumes lit when it comes next.
func (s *ackScanner) literal(lit string) bool {
	s.space()
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// null consumes a JSON null when it comes next; encoding/json leaves a
// field unchanged for it.
func (s *ackScanner) null() bool { return s.literal("null") }

// object reads an object, calling field with each key once the scanner is
// at its value; field must consume the value.
func (s *ackScanner) object(field func(key []byte) error) error {
	if s.peek() != '{' {
		return errInvalidAck
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return errInvalidAck
		}
		key, escaped, err := s.str()
		if err != nil {
			return err
		}
		if escaped {
			// An escaped key might spell a known one; not worth
			// decoding for a reply JetStream never sends.
			return errInvalidAck
		}
		if s.peek() != ':' {
			return errInvalidAck
		}
		s.i++
		if err := field(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return errInvalidAck
		}
	}
}

// str reads a string and returns its bytes between the quotes, and
// whether they hold an escape or a byte outside ASCII (then they are not
// the decoded value).
func (s *ackScanner) str() (raw []byte, escaped bool, err error) {
	s.i++ // the opening quote
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped, nil
		case c < 0x20:
			return nil, false, errInvalidAck
		case c == '\\':
			escaped = true
			s.i++
			if s.i == len(s.b) {
				return nil, false, errInvalidAck
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if len(s.b)-s.i < 5 {
					return nil, false, errInvalidAck
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return nil, false, errInvalidAck
					}
				}
				s.i += 5
			default:
				return nil, false, errInvalidAck
			}
		case c >= utf8.RuneSelf:
			escaped = true // encoding/json replaces invalid UTF-8
			s.i++
		default:
			s.i++
		}
	}
	return nil, false, errInvalidAck
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// stringField reads a string (or null, which leaves *dst alone).
func (s *ackScanner) stringField(dst *string) error {
	if s.null() {
		return nil
	}
	if s.peek() != '"' {
		return errInvalidAck
	}
	start := s.i
	raw, escaped, err := s.str()
	if err != nil {
		return err
	}
	if !escaped {
		*dst = string(raw)
		return nil
	}
	// Rare: let encoding/json decode escapes and replace bad UTF-8.
	var v string
	if json.Unmarshal(s.b[start:s.i], &v) != nil {
		return errInvalidAck
	}
	*dst = v
	return nil
}

// boolField reads true, false or null.
func (s *ackScanner) boolField(dst *bool) error {
	switch {
	case s.null():
	case s.literal("true"):
		*dst = true
	case s.literal("false"):
		*dst = false
	default:
		return errInvalidAck
	}
	return nil
}

// number returns the next JSON number's bytes, checked against JSON's
// grammar.
func (s *ackScanner) number() ([]byte, error) {
	s.space()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return nil, errInvalidAck
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return nil, errInvalidAck
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return nil, errInvalidAck
		}
	}
	return s.b[start:s.i], nil
}

func (s *ackScanner) digits() int {
	n := 0
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

// uintField reads an unsigned integer of bits bits, or null. A fraction,
// an exponent, a sign or an overflow is refused (encoding/json refuses
// them too).
func (s *ackScanner) uintField(dst *uint64, bits int) error {
	if s.null() {
		return nil
	}
	num, err := s.number()
	if err != nil {
		return err
	}
	v, err := strconv.ParseUint(string(num), 10, bits)
	if err != nil {
		return errInvalidAck
	}
	*dst = v
	return nil
}

// intField reads a signed integer that fits an int, or null.
func (s *ackScanner) intField(dst *int) error {
	if s.null() {
		return nil
	}
	num, err := s.number()
	if err != nil {
		return err
	}
	v, err := strconv.ParseInt(string(num), 10, strconv.IntSize)
	if err != nil {
		return errInvalidAck
	}
	*dst = int(v)
	return nil
}

// skip consumes any JSON value, checking it is well formed; depth is how
// deep in ignored containers the scanner already is.
func (s *ackScanner) skip(depth int) error {
	if depth > maxAckDepth {
		return errInvalidAck
	}
	switch s.peek() {
	case '"':
		_, _, err := s.str()
		return err
	case '{':
		return s.object(func([]byte) error { return s.skip(depth + 1) })
	case '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return nil
			default:
				return errInvalidAck
			}
		}
	case 't':
		return s.expect("true")
	case 'f':
		return s.expect("false")
	case 'n':
		return s.expect("null")
	default:
		_, err := s.number()
		return err
	}
}

func (s *ackScanner) expect(lit string) error {
	if !s.literal(lit) {
		return errInvalidAck
	}
	return nil
}
