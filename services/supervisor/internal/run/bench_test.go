package run

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks"
	"github.com/agentplane/agentplane/libs/vendors"
	"github.com/agentplane/agentplane/services/supervisor/internal/emit"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
)

// benchLines is a Claude Code stream-json turn: text, a tool call, its
// result and usage-bearing assistant lines, as the mock CLI prints them.
var benchLines = [][]byte{
	[]byte(`{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"Let me look at the failing test first."}],"usage":{"input_tokens":4,"output_tokens":12}},"parent_tool_use_id":null,"session_id":"5f1c","uuid":"a1"}`),
	[]byte(`{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"go test ./..."}}],"usage":{"input_tokens":4,"output_tokens":12}},"parent_tool_use_id":null,"session_id":"5f1c","uuid":"a2"}`),
	[]byte(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"ok  \tpkg\t0.01s","is_error":false}]},"parent_tool_use_id":null,"session_id":"5f1c","uuid":"a3"}`),
	[]byte(`{"type":"assistant","message":{"id":"msg_3","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"The tests pass now; committing the fix."}],"usage":{"input_tokens":4,"output_tokens":12}},"parent_tool_use_id":null,"session_id":"5f1c","uuid":"a4"}`),
}

func benchInput(n int) []byte {
	var buf bytes.Buffer
	for i := 0; i < n; i++ {
		buf.Write(benchLines[i%len(benchLines)])
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// BenchmarkPipeline measures what the supervisor does per CLI line: echo
// (to io.Discard here), parse with the vendor parser, stamp, apply
// output.select, and publish to JetStream until every event is
// acknowledged. The buffer holds every event, so this is sustained
// throughput, not the rate at which a flood is dropped. The variants:
// "nats=off", no publisher; "nats=embedded", a server in this process
// (its CPU counted too); "nats=process", nats-server in its own process,
// as deployed, so this process's CPU is the supervisor's alone — its
// lines/cpu-s is the rate one core of supervisor sustains. Compare
// lines/s with BenchmarkBareDecode.
func BenchmarkPipeline(b *testing.B) {
	for _, v := range []struct {
		nats     string
		inflight int
	}{
		{"off", 0},
		{"embedded", 1},
		{"embedded", emit.PublishMaxInFlight},
		{"process", 1},
		{"process", emit.PublishMaxInFlight},
	} {
		name := "nats=" + v.nats
		if v.inflight > 0 {
			name += ",inflight=" + itoa(v.inflight)
		}
		b.Run(name, func(b *testing.B) {
			env := map[string]string{
				runspec.EnvAgentNamespace: "bench", runspec.EnvAgentName: "bench", runspec.EnvAgentUID: "u-bench",
				sinks.EnvSelect: `[{"event":"tool_call","tool":"Bash"},{"event":"result"}]`,
			}
			switch v.nats {
			case "embedded":
				env[runspec.EnvNATSURLOverride] = eventstest.Start(b).URL()
			case "process":
				env[runspec.EnvNATSURLOverride] = startNATSProcess(b)
			}
			log := slog.New(slog.DiscardHandler)
			em := emit.New(emit.Options{Env: runenv.Read(func(k string) string { return env[k] }),
				Vendor: vendors.NameClaude, Stdout: io.Discard, MaxInFlight: v.inflight,
				PublishBuffer: 2*b.N + 16, Logger: log})
			vendor, _ := vendors.ByName(vendors.NameClaude)
			p := newPipeline(em, vendor, log)
			input := benchInput(b.N)
			b.SetBytes(int64(len(input) / max(b.N, 1)))
			b.ResetTimer()
			start, cpu := time.Now(), cpuTime(b)
			p.consume(bytes.NewReader(input))
			if err := em.Close(time.Minute, ""); err != nil {
				b.Fatal(err)
			}
			elapsed, used := time.Since(start), cpuTime(b)-cpu
			b.StopTimer()
			st := em.PublisherStats()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "lines/s")
			b.ReportMetric(float64(b.N)/used.Seconds(), "lines/cpu-s")
			b.ReportMetric(float64(st.Dropped), "dropped")
			if p.lines != uint64(b.N) {
				b.Fatalf("parsed %d of %d lines", p.lines, b.N)
			}
		})
	}
}

// BenchmarkBareDecode is a plain JSON decode of the same lines, the floor
// the pipeline is compared with.
func BenchmarkBareDecode(b *testing.B) {
	input := benchInput(b.N)
	b.SetBytes(int64(len(input) / max(b.N, 1)))
	b.ResetTimer()
	start := time.Now()
	for len(input) > 0 {
		i := bytes.IndexByte(input, '\n')
		var v map[string]any
		if err := json.Unmarshal(input[:i], &v); err != nil {
			b.Fatal(err)
		}
		input = input[i+1:]
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lines/s")
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
