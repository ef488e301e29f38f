package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks"
)

// vendorModels route to each mock CLI.
var vendorModels = map[string]string{
	"claude":   "claude-sonnet-4-6",
	"codex":    "gpt-5-codex",
	"gemini":   "gemini-2.5-pro",
	"opencode": "opencode/anthropic/claude-sonnet-4",
}

func jobSpec(model, prompt string) *runspec.Spec {
	return &runspec.Spec{Model: model, Prompt: prompt, PermissionMode: "auto", Execution: "job",
		Parameters: map[string]string{"task": "fix the build"}}
}

// TestRunStreamsEveryVendor runs each vendor's mock CLI end to end: exit
// 0, the log tail is the CLI's lines verbatim, NATS holds every event
// once and in order, and the file sink got the same events.
func TestRunStreamsEveryVendor(t *testing.T) {
	for vendor, model := range vendorModels {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			p := newPod(t, jobSpec(model, "please {task}")).withNATS()
			sinkFile := filepath.Join(t.TempDir(), "events.jsonl")
			p.env[sinks.EnvSinks] = `[{"type":"file","path":"` + sinkFile + `"},{"type":"stdout"}]`
			r := p.run("run")
			if r.code != 0 {
				t.Fatalf("exit %d, want 0", r.code)
			}
			evs := p.natsEvents()
			checkStream(t, evs, 1)
			if first, last := lifecycle(evs[0]), lifecycle(evs[len(evs)-1]); first != "agent/started" || last != "agent/succeeded" {
				t.Fatalf("stream runs %s .. %s", first, last)
			}
			if lc := evs[len(evs)-1].GetLifecycle(); lc.ExitCode == nil || lc.GetExitCode() != 0 {
				t.Fatalf("succeeded without exit code 0: %v", lc)
			}
			k := kinds(evs)
			if k["tool_call"] < 2 || k["result"] != 1 {
				t.Fatalf("kinds %v: want two tool calls and one result", k)
			}
			for _, ev := range evs {
				if ev.GetVendor() != vendor && events.IsCLIEvent(ev) {
					t.Fatalf("event from vendor %q, want %q", ev.GetVendor(), vendor)
				}
			}

			// stdout: the CLI's lines verbatim and in order (the raw line
			// of each NATS event), plus our own two lifecycle lines.
			cliLines, own := stdoutEvents(t, r.stdout)
			var raws [][]byte
			for _, ev := range evs {
				if len(ev.GetRaw()) > 0 {
					raws = append(raws, ev.GetRaw())
				}
			}
			if len(cliLines) != len(raws) {
				t.Fatalf("stdout has %d CLI lines, NATS %d raw lines", len(cliLines), len(raws))
			}
			for i := range raws {
				if !bytes.Equal(cliLines[i], raws[i]) {
					t.Fatalf("line %d differs:\nstdout %s\nnats   %s", i, cliLines[i], raws[i])
				}
			}
			// Exactly two: the stdout entry in AGENT_SINKS must not print
			// every line a second time.
			if len(own) != 2 || lifecycle(own[0]) != "agent/started" || lifecycle(own[1]) != "agent/succeeded" {
				t.Fatalf("own stdout lines: %v", own)
			}

			// file sink: every line and own event (no select), once each,
			// in order, under the id of the line's first event.
			var want []string
			for _, ev := range evs {
				if len(ev.GetRaw()) > 0 || !events.IsCLIEvent(ev) {
					want = append(want, ev.GetId())
				}
			}
			payloads := readFileSink(t, sinkFile)
			if len(payloads) != len(want) {
				t.Fatalf("file sink has %d payloads, want %d (each line and own event once)", len(payloads), len(want))
			}
			pod := p
			for i, p := range payloads {
				if p.ID != want[i] || p.Source.Agent != pod.env[runspec.EnvAgentName] || p.Source.Pod != pod.env[runspec.EnvPodName] {
					t.Fatalf("payload %d is %s from %+v, want %s from the run's pod", i, p.ID, p.Source, want[i])
				}
			}
		})
	}
}

// TestRunSelectGatesSinksNotNATS checks output.select: the file sink gets
// only the selected CLI events (plus lifecycle), NATS and stdout get all.
func TestRunSelectGatesSinksNotNATS(t *testing.T) {
	t.Parallel()
	p := newPod(t, jobSpec(vendorModels["claude"], "go")).withNATS()
	sinkFile := filepath.Join(t.TempDir(), "events.jsonl")
	p.env[sinks.EnvSinks] = `[{"type":"file","path":"` + sinkFile + `"}]`
	p.env[sinks.EnvSelect] = `[{"event":"tool_call","tool":"Bash"},{"event":"result"}]`
	r := p.run("run")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	evs := p.natsEvents()
	got := map[string]int{}
	for _, p := range readFileSink(t, sinkFile) {
		if p.kind() != "line" {
			got[p.kind()]++
			continue
		}
		// A line passes when one of its events does: here its tool call
		// (Bash) or its result.
		for _, k := range lineKinds(evs, p.ID) {
			if k == "tool_call" || k == "result" {
				got[k]++
			}
		}
	}
	if len(got) != 3 || got["lifecycle"] != 2 || got["tool_call"] != 1 || got["result"] != 1 {
		t.Fatalf("file sink got %v, want lifecycle 2, the Bash tool call's line and the result's line", got)
	}
	if k := kinds(evs); k["message"] == 0 || k["tool_call"] != 2 {
		t.Fatalf("NATS must be unfiltered, got %v", k)
	}
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		mode   string
		env    map[string]string
		code   int
		reason string
	}{
		{name: "a failing CLI's exit code is the supervisor's", mode: "fail", env: map[string]string{"MOCKAGENT_EXIT": "3"}, code: 3, reason: "exit-code"},
		{name: "a crash mid-stream is a failure with its code", mode: "crash", code: 2, reason: "exit-code"},
		{name: "malformed lines are counted, not fatal", mode: "malformed", code: 0},
		{name: "a CLI lingering after its result is stopped and succeeds", mode: "linger", env: map[string]string{runspec.EnvExitGraceMS: "300"}, code: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPod(t, jobSpec(vendorModels["claude"], "mock:"+tt.mode)).withNATS()
			for k, v := range tt.env {
				p.env[k] = v
			}
			r := p.run("run")
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d", r.code, tt.code)
			}
			evs := p.natsEvents()
			checkStream(t, evs, 1)
			lc := evs[len(evs)-1].GetLifecycle()
			if lc.GetExitCode() != int32(tt.code) || lc.GetReason() != tt.reason {
				t.Fatalf("terminal event %v, want exit %d reason %q", lc, tt.code, tt.reason)
			}
			if tt.mode == "malformed" {
				if n := logRecord(t, r.stderr, "agent ended")["malformed"]; n != float64(2) {
					t.Fatalf("malformed count %v, want 2", n)
				}
				if kinds(evs)["raw"] < 2 {
					t.Fatal("malformed lines must still be delivered as raw events")
				}
			}
		})
	}
}

// TestRunTenMiBFlows pushes 10 MiB through the pipeline: nothing stalls,
// nothing is lost on stdout or in NATS.
func TestRunTenMiBFlows(t *testing.T) {
	t.Parallel()
	p := newPod(t, jobSpec(vendorModels["claude"], "mock:big")).withNATS()
	r := p.run("run")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	if len(r.stdout) < 10<<20 {
		t.Fatalf("stdout has %d bytes, want >= 10 MiB", len(r.stdout))
	}
	evs := p.natsEvents()
	checkStream(t, evs, 1)
	cliLines, _ := stdoutEvents(t, r.stdout)
	var raw int
	for _, ev := range evs {
		if len(ev.GetRaw()) > 0 {
			raw++
		}
	}
	if raw != len(cliLines) {
		t.Fatalf("NATS has %d raw lines, stdout %d", raw, len(cliLines))
	}
}
