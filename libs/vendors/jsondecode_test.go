package vendors

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// parsed is what one line gave a parser: its events, their proto form and
// whether it failed.
type parsed struct {
	events []Event
	protos []*eventsv1.RunEvent
	failed bool
}

// parseOn parses line with p while unmarshal is decode (Proto decodes a
// tool call's input too, so it runs under the same decoder).
func parseOn(decode func([]byte, any) error, p Parser, line []byte) parsed {
	saved := unmarshal
	unmarshal = decode
	defer func() { unmarshal = saved }()
	evs, err := p.Parse(line)
	out := parsed{events: append([]Event(nil), evs...), failed: err != nil}
	for i := range evs {
		out.protos = append(out.protos, evs[i].Proto())
	}
	return out
}

// FuzzDecoderAgreesWithEncodingJSON runs every vendor's parser twice over
// the same lines, once on the fast decoder and once on encoding/json, and
// requires the same events, the same proto events and the same failures:
// the decoder is an optimisation, never a change of meaning.
func FuzzDecoderAgreesWithEncodingJSON(f *testing.F) {
	paths, _ := filepath.Glob("testdata/transcripts/*.jsonl")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","input":{"n":1e400}}]}}`))
	f.Add([]byte(`{"TYPE":"user","message":{"content":"\ud800 caf\u00e9","Role":"x"},"type":"assistant"}`))
	f.Add([]byte("{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"\xff\xfe\"}]}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range []string{NameClaude, NameCodex, NameGemini, NameOpenCode} {
			v, _ := ByName(name)
			fast, std := v.NewParser(), v.NewParser()
			for _, line := range bytes.Split(data, []byte("\n")) {
				got := parseOn(unmarshal, fast, line)
				want := parseOn(json.Unmarshal, std, line)
				if got.failed != want.failed {
					t.Fatalf("%s: line %q: failed %v, encoding/json failed %v", name, line, got.failed, want.failed)
				}
				if !reflect.DeepEqual(got.events, want.events) {
					t.Fatalf("%s: line %q:\nevents %+v\nencoding/json %+v", name, line, got.events, want.events)
				}
				for i := range got.protos {
					if !proto.Equal(got.protos[i], want.protos[i]) {
						t.Fatalf("%s: line %q: proto %v, encoding/json %v", name, line, got.protos[i], want.protos[i])
					}
				}
				if fast.SessionID() != std.SessionID() {
					t.Fatalf("%s: session %q, encoding/json %q", name, fast.SessionID(), std.SessionID())
				}
			}
		}
	})
}
