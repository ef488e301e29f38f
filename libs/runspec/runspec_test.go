package runspec

import (
	"reflect"
	"strings"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	in := &Spec{Model: "claude-opus-5-5", Prompt: "fix {issue}", Parameters: map[string]string{"issue": "42"},
		AllowedTools: []string{"Read"}, PermissionMode: "auto", MaxTurns: 3, Execution: "job",
		MCPServers: []MCPServer{{Name: "lore", Transport: "http", URL: "https://x", HeaderEnv: "LORE_AUTH"}}}
	raw, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip changed the spec:\n%+v\n%+v", in, out)
	}
}

func TestRules(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		wantErr string
	}{
		{"an empty variable is an error", "", "is empty"},
		{"malformed JSON is an error", "{", "decode"},
		{"a spec must name a model or a command", `{"prompt":"x"}`, "neither a model nor a command"},
		{"an exec spec needs no model", `{"command":["sh","-c","true"]}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.raw)
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("got %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestAnOversizedSpecIsRefused(t *testing.T) {
	_, err := Encode(&Spec{Model: "m", Prompt: strings.Repeat("x", MaxEncodedBytes)})
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("want a size error, got %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(`{"model":"m","prompt":"p"}`)
	f.Add(`{"command":["a"]}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, raw string) {
		s, err := Decode(raw)
		if err == nil && s == nil {
			t.Fatal("nil spec without an error")
		}
	})
}
