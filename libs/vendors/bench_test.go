package vendors

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// benchLines returns every non-blank line of the vendor's transcripts.
func benchLines(b *testing.B, vendor string) [][]byte {
	b.Helper()
	paths, _ := filepath.Glob("testdata/transcripts/" + vendor + "_*.jsonl")
	var lines [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(l) > 0 {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) == 0 {
		b.Fatalf("no lines for %s", vendor)
	}
	return lines
}

// runLines calls fn once per op on the lines in turn and reports lines/s,
// so parser and bare decode figures compare directly.
func runLines(b *testing.B, lines [][]byte, fn func([]byte)) {
	var total int
	for _, l := range lines {
		total += len(l)
	}
	b.SetBytes(int64(total / len(lines)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fn(lines[i%len(lines)])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

func benchParse(b *testing.B, vendor string) {
	v, _ := ByName(vendor)
	p := v.NewParser()
	runLines(b, benchLines(b, vendor), func(l []byte) { _, _ = p.Parse(l) })
}

func BenchmarkParseClaude(b *testing.B)   { benchParse(b, NameClaude) }
func BenchmarkParseCodex(b *testing.B)    { benchParse(b, NameCodex) }
func BenchmarkParseGemini(b *testing.B)   { benchParse(b, NameGemini) }
func BenchmarkParseOpenCode(b *testing.B) { benchParse(b, NameOpenCode) }

// BenchmarkBareDecode is the baseline: json.Unmarshal of the same lines
// into a map (what a generic consumer does) and into a struct holding only
// the type (the least any classifier must decode).
func BenchmarkBareDecode(b *testing.B) {
	for _, vendor := range []string{NameClaude, NameCodex, NameGemini, NameOpenCode} {
		lines := benchLines(b, vendor)
		b.Run(vendor+"/map", func(b *testing.B) {
			runLines(b, lines, func(l []byte) {
				var m map[string]any
				_ = json.Unmarshal(l, &m)
			})
		})
		b.Run(vendor+"/type-only", func(b *testing.B) {
			runLines(b, lines, func(l []byte) {
				var s struct {
					Type string `json:"type"`
				}
				_ = json.Unmarshal(l, &s)
			})
		})
	}
}
