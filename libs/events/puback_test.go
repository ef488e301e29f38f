package events

import (
	"encoding/json"
	"reflect"
	"testing"
)

// ackCases are acks as JetStream writes them and replies that are none;
// they seed FuzzParsePubAck too.
var ackCases = []struct {
	name string
	in   string
	want *pubAck // nil: refused
}{
	{"a stored message names its stream and sequence", `{"stream":"AGENT_EVENTS","seq":42}`,
		&pubAck{Stream: "AGENT_EVENTS", Seq: 42}},
	{"a duplicate says so", `{"stream":"AGENT_EVENTS","seq":42,"duplicate":true}`,
		&pubAck{Stream: "AGENT_EVENTS", Seq: 42, Duplicate: true}},
	{"a domain is read and unknown keys are skipped", ` { "stream" : "S" , "domain":"hub", "val":"x", "extra":[1,{"a":null},-2.5e3,"\u00e9"], "seq": 18446744073709551615 } `,
		&pubAck{Stream: "S", Domain: "hub", Seq: 18446744073709551615}},
	{"an error ack carries its codes", `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}`,
		&pubAck{Error: &pubAckError{Code: 400, ErrCode: 10054, Description: "message size exceeds maximum allowed"}}},
	{"an error ack with a type is still an error", `{"type":"io.nats.jetstream.api.v1.pub_ack_response","error":{"code":503,"err_code":10077,"description":"x"}}`,
		&pubAck{Error: &pubAckError{Code: 503, ErrCode: 10077, Description: "x"}}},
	{"an empty object reads as nothing (the window then refuses it for lacking a stream)", `{}`, &pubAck{}},
	{"a negative sequence is refused", `{"stream":"S","seq":-1}`, nil},
	{"an overflowing sequence is refused", `{"stream":"S","seq":18446744073709551616}`, nil},
	{"a string sequence is refused", `{"stream":"S","seq":"1"}`, nil},
	{"a truncated ack is refused", `{"stream":"S","seq":1`, nil},
	{"empty input is refused", ``, nil},
	{"text is refused", `no responders`, nil},
}

func TestParsePubAck(t *testing.T) {
	for _, c := range ackCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parsePubAck([]byte(c.in))
			if c.want == nil {
				if err == nil {
					t.Fatalf("accepted as %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !reflect.DeepEqual(got, *c.want) {
				t.Fatalf("got %+v, want %+v", got, *c.want)
			}
		})
	}
}

// FuzzParsePubAck: the parser never panics on any reply, and an ack
// encoding/json writes from any values, as the server would, reads back
// as those values.
func FuzzParsePubAck(f *testing.F) {
	for _, c := range ackCases {
		f.Add([]byte(c.in), "", uint64(0), false, 0, uint16(0), "")
	}
	f.Add([]byte(nil), "AGENT_EVENTS", uint64(7), true, 0, uint16(0), "")
	f.Add([]byte(nil), "", uint64(0), false, 503, uint16(10077), "no \"stream\"\n\xff")
	f.Fuzz(func(t *testing.T, in []byte, stream string, seq uint64, dup bool, code int, errCode uint16, desc string) {
		_, _ = parsePubAck(in)

		want := pubAck{Stream: stream, Seq: seq, Duplicate: dup}
		if code != 0 || errCode != 0 || desc != "" {
			want.Error = &pubAckError{Code: code, ErrCode: errCode, Description: desc}
		}
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		// encoding/json writes invalid UTF-8 as U+FFFD; compare with what
		// it reads back itself.
		var ref pubAck
		if err := json.Unmarshal(b, &ref); err != nil {
			t.Fatal(err)
		}
		got, err := parsePubAck(b)
		if err != nil {
			t.Fatalf("refused %s, which encoding/json wrote: %v", b, err)
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("%s: got %+v, encoding/json reads %+v", b, got, ref)
		}
	})
}

func BenchmarkParsePubAck(b *testing.B) {
	in := []byte(`{"stream":"AGENT_EVENTS","seq":123456,"duplicate":true}`)
	b.Run("go-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := parsePubAck(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			var ref pubAck
			if err := json.Unmarshal(in, &ref); err != nil {
				b.Fatal(err)
			}
		}
	})
}
