package sinks

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentplane/agentplane/libs/events"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// The sink payload (docs/events.md) is what http and file sinks receive:
//
//	{"source":{"agent":..,"station":..,"task":..,"pod":..,"namespace":..,"uid":..},
//	 "event":<the event object>,"id":..,"sequence":..,"time":..}
//
// source and event are the documented contract receivers match on; id,
// sequence, time and source.uid were added later and are optional for a
// receiver to read. The event object is the vendor CLI's line parsed as
// JSON (or the line as a JSON string when it is not JSON) for CLI events,
// and a small object with a lowercase "kind" for the run's own events:
//
//	{"kind":"lifecycle","phase":"agent","status":"succeeded","exitCode":0}
//	{"kind":"file","event":"report","path":"/workspace/r.md","content":".."}
//	{"kind":"batch","provider":"anthropic","batchId":"msgbatch_..","status":"in_progress"}
//
// The protobuf RunEvent (libs/events) stays the NATS stream's format.

// ErrEnveloped is returned for a CLI line that already is a sink payload
// (a JSON object with both "source" and "event"): wrapping it again would
// hand receivers a payload whose event is itself a payload.
var ErrEnveloped = errors.New("line is already a sink payload; not wrapped again")

// Payload returns the sink payload of ev, one line of JSON without a
// newline. A CLI event stands for its raw line when it has one.
func Payload(ev *eventsv1.RunEvent) ([]byte, error) {
	return AppendPayload(nil, ev, ev.GetRaw())
}

// AppendPayload appends to dst the sink payload whose event object is
// line (a CLI line) or, when line is empty, ev's own event object. The
// source and envelope fields come from ev.
func AppendPayload(dst []byte, ev *eventsv1.RunEvent, line []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, `{"source":{`...)
	r := ev.GetRun()
	first := true
	for _, f := range [...]struct{ k, v string }{
		{"agent", r.GetAgent()}, {"station", r.GetStation()}, {"task", r.GetTaskId()},
		{"pod", r.GetPod()}, {"namespace", r.GetNamespace()}, {"uid", r.GetUid()},
	} {
		if f.v == "" {
			continue // empty ids are left out, as receivers expect
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendKey(dst, f.k)
		dst = appendString(dst, f.v)
	}
	dst = append(dst, `},"event":`...)
	var err error
	if len(line) > 0 && events.IsCLIEvent(ev) {
		dst, err = appendLineObject(dst, line)
	} else {
		dst, err = appendEventObject(dst, ev)
	}
	if err != nil {
		return dst[:start], err
	}
	if id := ev.GetId(); id != "" {
		dst = append(dst, `,"id":`...)
		dst = appendString(dst, id)
	}
	if seq := ev.GetSequence(); seq != 0 {
		dst = append(dst, `,"sequence":`...)
		dst = strconv.AppendUint(dst, seq, 10)
	}
	if t := ev.GetTime(); t != nil {
		dst = append(dst, `,"time":"`...)
		dst = t.AsTime().UTC().AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	return append(dst, '}'), nil
}

// EventObject returns the event object of ev alone: what stdout prints
// for the run's own events and what a payload's "event" holds.
func EventObject(ev *eventsv1.RunEvent) ([]byte, error) {
	return appendEventObject(nil, ev)
}

// appendLineObject appends a CLI line: as it is when it is JSON (it is one
// line already), else as a JSON string.
func appendLineObject(dst, line []byte) ([]byte, error) {
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		return appendString(dst, string(line)), nil
	}
	if line[0] == '{' && bytes.Contains(line, []byte(`"source"`)) && bytes.Contains(line, []byte(`"event"`)) {
		var top map[string]json.RawMessage
		if json.Unmarshal(line, &top) == nil {
			_, s := top["source"]
			_, e := top["event"]
			if s && e {
				return dst, ErrEnveloped
			}
		}
	}
	return append(dst, line...), nil
}

// appendEventObject renders the run's own events field by field, so the
// object is stable whatever protojson's spacing, and CLI events without a
// line from their typed payload.
func appendEventObject(dst []byte, ev *eventsv1.RunEvent) ([]byte, error) {
	kind := ev.GetKind().SubjectToken()
	dst = append(dst, `{"kind":`...)
	dst = appendString(dst, kind)
	switch p := ev.GetPayload().(type) {
	case *eventsv1.RunEvent_Lifecycle:
		lc := p.Lifecycle
		dst = field(dst, "phase", lc.GetPhase(), true)
		dst = field(dst, "status", lc.GetStatus(), true)
		dst = field(dst, "tool", lc.GetTool(), false)
		dst = field(dst, "reason", lc.GetReason(), false)
		if lc.ExitCode != nil {
			dst = append(dst, `,"exitCode":`...)
			dst = strconv.AppendInt(dst, int64(lc.GetExitCode()), 10)
		}
		dst = field(dst, "message", lc.GetMessage(), false)
	case *eventsv1.RunEvent_File:
		f := p.File
		dst = field(dst, "event", f.GetEvent(), true)
		dst = field(dst, "path", f.GetPath(), true)
		if f.GetReason() != "" {
			dst = field(dst, "reason", f.GetReason(), true)
		} else {
			dst = field(dst, "content", f.GetContent(), true)
		}
	case *eventsv1.RunEvent_Batch:
		b := p.Batch
		dst = field(dst, "provider", b.GetProvider(), true)
		dst = field(dst, "batchId", b.GetBatchId(), true)
		dst = field(dst, "status", b.GetStatus(), true)
	case nil:
	default:
		// A CLI event that came without its line: its typed payload.
		msg, ok := payloadMessage(ev)
		if !ok {
			break
		}
		raw, err := protojson.Marshal(msg)
		if err != nil {
			return dst, err
		}
		// protojson varies its spacing on purpose; payloads are compact.
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return dst, err
		}
		b := buf.Bytes()
		if len(b) > 2 { // {"a":..} → ,"a":..
			dst = append(dst, ',')
			dst = append(dst, b[1:len(b)-1]...)
		}
	}
	if sid := ev.GetSessionId(); sid != "" && events.IsCLIEvent(ev) {
		dst = field(dst, "sessionId", sid, true)
	}
	return append(dst, '}'), nil
}

// payloadMessage returns the message inside ev's payload oneof.
func payloadMessage(ev *eventsv1.RunEvent) (proto.Message, bool) {
	switch p := ev.GetPayload().(type) {
	case *eventsv1.RunEvent_Message:
		return p.Message, true
	case *eventsv1.RunEvent_ToolCall:
		return p.ToolCall, true
	case *eventsv1.RunEvent_ToolResult:
		return p.ToolResult, true
	case *eventsv1.RunEvent_Usage:
		return p.Usage, true
	case *eventsv1.RunEvent_Result:
		return p.Result, true
	}
	return nil, false
}

// field appends ,"k":"v", leaving an empty optional value out.
func field(dst []byte, k, v string, required bool) []byte {
	if v == "" && !required {
		return dst
	}
	dst = append(dst, ',')
	dst = appendKey(dst, k)
	return appendString(dst, v)
}

func appendKey(dst []byte, k string) []byte {
	dst = append(dst, '"')
	dst = append(dst, k...)
	return append(dst, '"', ':')
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// control characters are escaped, and nothing else is, so text stays
// readable in a file sink.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
