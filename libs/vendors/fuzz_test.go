package vendors

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fuzzParse feeds every line of the input to a fresh parser of the vendor,
// so the fuzzer explores sequences (session carried over, answers built up)
// as well as single lines, and checks what must hold for any input.
func fuzzParse(f *testing.F, vendor string) {
	v, ok := ByName(vendor)
	if !ok {
		f.Fatalf("no vendor %s", vendor)
	}
	// The transcripts are seeds too, so the target starts from real lines.
	paths, _ := filepath.Glob("testdata/transcripts/" + vendor + "_*.jsonl")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		for _, line := range bytes.Split(data, []byte("\n")) {
			f.Add(line)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := v.NewParser()
		for _, line := range bytes.Split(data, []byte("\n")) {
			evs, err := p.Parse(line)
			if err != nil && !errors.Is(err, ErrMalformedLine) {
				t.Fatalf("error %v does not wrap ErrMalformedLine", err)
			}
			if len(bytes.TrimSpace(line)) > 0 && len(evs) == 0 {
				t.Fatalf("non-blank line %q gave no event", line)
			}
			for i := range evs {
				e := &evs[i]
				if e.Vendor != vendor {
					t.Fatalf("event vendor %q, want %q", e.Vendor, vendor)
				}
				if got := e.Proto().GetKind().SubjectToken(); got != e.Kind.String() {
					t.Fatalf("proto kind %s for event kind %s", got, e.Kind)
				}
			}
		}
	})
}

func FuzzClaudeParse(f *testing.F)   { fuzzParse(f, NameClaude) }
func FuzzCodexParse(f *testing.F)    { fuzzParse(f, NameCodex) }
func FuzzGeminiParse(f *testing.F)   { fuzzParse(f, NameGemini) }
func FuzzOpenCodeParse(f *testing.F) { fuzzParse(f, NameOpenCode) }
