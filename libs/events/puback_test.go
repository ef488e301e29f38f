package events

import (
	"encoding/json"
	"testing"
)

// refAck is the shape parsePubAck reads, as encoding/json decodes it: the
// reference the parser is held to.
type refAck struct {
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	Domain    string `json:"domain"`
	Error     *struct {
		Code        int    `json:"code"`
		ErrCode     uint16 `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

func (r refAck) pubAck() pubAck {
	a := pubAck{Stream: r.Stream, Seq: r.Seq, Duplicate: r.Duplicate, Domain: r.Domain}
	if r.Error != nil {
		a.HasError, a.Code, a.ErrCode, a.ErrorDescription = true, r.Error.Code, r.Error.ErrCode, r.Error.Description
	}
	return a
}

// ackCases are acks as JetStream writes them and the edges of what the
// parser accepts; they seed FuzzParsePubAck too.
var ackCases = []struct {
	name string
	in   string
	want *pubAck // nil: refused
}{
	{"a stored message names its stream and sequence", `{"stream":"AGENT_EVENTS","seq":42}`,
		&pubAck{Stream: "AGENT_EVENTS", Seq: 42}},
	{"a duplicate says so", `{"stream":"AGENT_EVENTS","seq":42,"duplicate":true}`,
		&pubAck{Stream: "AGENT_EVENTS", Seq: 42, Duplicate: true}},
	{"a domain and unknown keys are read or skipped", ` { "stream" : "S" , "domain":"hub", "val":"x", "extra":[1,{"a":null},-2.5e3,"\u00e9"], "seq": 18446744073709551615 } `,
		&pubAck{Stream: "S", Domain: "hub", Seq: 18446744073709551615}},
	{"an error ack carries its codes", `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}`,
		&pubAck{HasError: true, Code: 400, ErrCode: 10054, ErrorDescription: "message size exceeds maximum allowed"}},
	{"an error ack with a type is still an error", `{"type":"io.nats.jetstream.api.v1.pub_ack_response","error":{"code":503,"err_code":10077,"description":"x"}}`,
		&pubAck{HasError: true, Code: 503, ErrCode: 10077, ErrorDescription: "x"}},
	{"null leaves a field alone, as encoding/json does", `{"stream":"S","stream":null,"seq":1,"error":null}`,
		&pubAck{Stream: "S", Seq: 1}},
	{"escapes in a value are decoded", `{"stream":"a\"b\\u0041","seq":1}`,
		&pubAck{Stream: `a"b\u0041`, Seq: 1}},
	{"a later key wins", `{"seq":1,"seq":2,"stream":"S"}`, &pubAck{Stream: "S", Seq: 2}},
	{"an empty object reads as nothing (the window then refuses it for lacking a stream)", `{}`, &pubAck{}},
	{"a key differing only in case is refused", `{"Stream":"S","seq":1}`, nil},
	{"a non-ASCII key is refused", `{"ſtream":"S","seq":1}`, nil},
	{"an escaped key is refused", `{"\u0073tream":"S","seq":1}`, nil},
	{"a negative sequence is refused", `{"stream":"S","seq":-1}`, nil},
	{"a fractional sequence is refused", `{"stream":"S","seq":1.5}`, nil},
	{"an overflowing sequence is refused", `{"stream":"S","seq":18446744073709551616}`, nil},
	{"an err_code over 16 bits is refused", `{"error":{"code":1,"err_code":65536}}`, nil},
	{"a string sequence is refused", `{"stream":"S","seq":"1"}`, nil},
	{"trailing bytes are refused", `{"stream":"S","seq":1}x`, nil},
	{"a truncated ack is refused", `{"stream":"S","seq":1`, nil},
	{"a leading zero is refused", `{"stream":"S","seq":01}`, nil},
	{"a control character in a string is refused", "{\"stream\":\"S\x01\"}", nil},
	{"a bad escape in a skipped value is refused", `{"x":"\q","stream":"S"}`, nil},
	{"deep nesting is refused", `{"x":` + nest(40) + `,"stream":"S"}`, nil},
	{"empty input is refused", ``, nil},
	{"null is refused", `null`, nil},
}

func nest(n int) string {
	s := "1"
	for range n {
		s = "[" + s + "]"
	}
	return s
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
			if got != *c.want {
				t.Fatalf("got %+v, want %+v", got, *c.want)
			}
		})
	}
}

// FuzzParsePubAck: the parser never panics, and what it accepts it reads
// exactly as encoding/json does; an ack encoding/json writes from any
// values is always accepted.
func FuzzParsePubAck(f *testing.F) {
	for _, c := range ackCases {
		f.Add([]byte(c.in), "", uint64(0), false, 0, uint16(0), "")
	}
	f.Add([]byte(nil), "AGENT_EVENTS", uint64(7), true, 0, uint16(0), "")
	f.Add([]byte(nil), "", uint64(0), false, 503, uint16(10077), "no \"stream\"\n\xff")
	f.Fuzz(func(t *testing.T, in []byte, stream string, seq uint64, dup bool, code int, errCode uint16, desc string) {
		agree(t, in)

		// The same values as the server would write them.
		var ref refAck
		ref.Stream, ref.Seq, ref.Duplicate = stream, seq, dup
		if code != 0 || errCode != 0 || desc != "" {
			ref.Error = &struct {
				Code        int    `json:"code"`
				ErrCode     uint16 `json:"err_code"`
				Description string `json:"description"`
			}{code, errCode, desc}
		}
		b, err := json.Marshal(ref)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parsePubAck(b); err != nil {
			t.Fatalf("refused %s, which encoding/json wrote", b)
		}
		agree(t, b)
	})
}

// agree checks parsePubAck against encoding/json on in.
func agree(t *testing.T, in []byte) {
	t.Helper()
	got, err := parsePubAck(in)
	if err != nil {
		return // a refusal only costs a resend
	}
	var ref refAck
	if err := json.Unmarshal(in, &ref); err != nil {
		t.Fatalf("accepted %q as %+v, encoding/json refuses it: %v", in, got, err)
	}
	if want := ref.pubAck(); got != want {
		t.Fatalf("%q: got %+v, encoding/json reads %+v", in, got, want)
	}
}

func BenchmarkParsePubAck(b *testing.B) {
	in := []byte(`{"stream":"AGENT_EVENTS","seq":123456,"duplicate":true}`)
	b.Run("parsePubAck", func(b *testing.B) {
		for b.Loop() {
			if _, err := parsePubAck(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			var ref refAck
			if err := json.Unmarshal(in, &ref); err != nil {
				b.Fatal(err)
			}
		}
	})
}
