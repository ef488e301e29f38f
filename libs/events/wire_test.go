package events

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

func wireEvent(t testing.TB) *eventsv1.RunEvent {
	t.Helper()
	input, err := structpb.NewStruct(map[string]any{"command": "go test ./...", "timeout": 30.0})
	if err != nil {
		t.Fatal(err)
	}
	return testRun().Stamp(&eventsv1.RunEvent{
		Raw:     []byte(`{"type":"assistant"}`),
		Payload: &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{Id: "toolu_1", Name: "Bash", Input: input}},
	})
}

func header(kv ...string) nats.Header {
	h := nats.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// TestDecodeMessageFollowsContentType checks each rule of the wire format:
// the header picks the decoder, no header means protojson.
func TestDecodeMessageFollowsContentType(t *testing.T) {
	ev := wireEvent(t)
	js, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := AppendMarshal(nil, ev)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		data    []byte
		h       nats.Header
		wantErr error // nil: decodes to ev
		anyErr  bool
	}{
		{"no header is protojson, as older producers sent", js, nil, nil, false},
		{"an empty header is protojson", js, nats.Header{}, nil, false},
		{"application/json is protojson", js, header(ContentTypeHeader, ContentTypeJSON), nil, false},
		{"application/protobuf is binary", bin, header(ContentTypeHeader, ContentTypeProtobuf), nil, false},
		{"media types compare without case or parameters", bin, header(ContentTypeHeader, " Application/Protobuf; v=1"), nil, false},
		{"an unknown content type is refused", bin, header(ContentTypeHeader, "application/x-yaml"), ErrContentType, true},
		{"binary without the header is not read as JSON", bin, nil, nil, true},
		{"JSON labelled protobuf is an error", js, header(ContentTypeHeader, ContentTypeProtobuf), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeMessage(tt.data, tt.h)
			if tt.anyErr {
				if err == nil {
					t.Fatalf("decoded %v, want an error", got)
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, ev) {
				t.Fatalf("decoded\n%v\nwant\n%v", got, ev)
			}
		})
	}
}

// TestAppendMarshalAppends checks the encode buffer is extended, not
// replaced, so the Publisher can reuse one.
func TestAppendMarshalAppends(t *testing.T) {
	ev := wireEvent(t)
	prefix := []byte("keep")
	b, err := AppendMarshal(prefix, ev)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:4]) != "keep" {
		t.Fatalf("prefix overwritten: %q", b[:4])
	}
	back, err := DecodeMessage(b[4:], header(ContentTypeHeader, ContentTypeProtobuf))
	if err != nil || !proto.Equal(back, ev) {
		t.Fatalf("round trip: %v %v", back, err)
	}
}

// FuzzDecodeMessage feeds arbitrary bytes under each content type: no
// panic, and whatever decodes as protobuf encodes again to an event that
// decodes equal.
func FuzzDecodeMessage(f *testing.F) {
	ev := wireEvent(f)
	bin, _ := AppendMarshal(nil, ev)
	js, _ := Encode(ev)
	f.Add(bin, ContentTypeProtobuf)
	f.Add(js, "")
	f.Add(js, ContentTypeJSON)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, ContentTypeProtobuf)
	f.Add([]byte(`{"toolCall":{"input":{"a":[1,{"b":null}]}}}`), "application/json; charset=utf-8")
	f.Fuzz(func(t *testing.T, data []byte, contentType string) {
		h := nats.Header{}
		if contentType != "" {
			h.Set(ContentTypeHeader, contentType)
		}
		got, err := DecodeMessage(data, h)
		if err != nil {
			return
		}
		if mediaType(contentType) != ContentTypeProtobuf {
			return
		}
		again, err := AppendMarshal(nil, got)
		if err != nil {
			t.Fatalf("a decoded event does not encode: %v", err)
		}
		back, err := DecodeMessage(again, h)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		if !proto.Equal(got, back) {
			t.Fatalf("round trip changed the event:\n%v\n%v", got, back)
		}
	})
}
