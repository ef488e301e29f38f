package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks"
)

// TestTheSummaryIsLeftInTheTerminationLog: a run pod ends before anything
// scrapes it, so each supervisor process leaves its delivery figures in
// its container's termination message file, where the agent-controller
// reads them from the finished pod (docs/supervisor.md).
func TestTheSummaryIsLeftInTheTerminationLog(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)

	cases := []struct {
		rule string
		// cmd is the subcommand; the file exists unless absent is set.
		cmd    string
		absent bool
		check  func(t *testing.T, p *pod, sum runspec.Summary, sinkFile string)
	}{
		{rule: "run counts its events by kind as NATS stored them, and the sink deliveries that failed", cmd: "run",
			check: func(t *testing.T, p *pod, sum runspec.Summary, sinkFile string) {
				want := map[string]uint64{}
				for k, n := range kinds(p.natsEvents()) {
					want[k] = uint64(n)
				}
				if !reflect.DeepEqual(sum.Events, want) {
					t.Errorf("events %v, NATS stored %v", sum.Events, want)
				}
				// The http sink got what the file sink got, and failed
				// every time.
				if got, want := sum.SinkFailed, uint64(len(readFileSink(t, sinkFile))); got != want || sum.SinkDropped != 0 || sum.NATSDropped != 0 {
					t.Errorf("sinkFailed %d (want %d), sinkDropped %d, natsDropped %d", got, want, sum.SinkDropped, sum.NATSDropped)
				}
			}},
		{rule: "init counts its own events", cmd: "init",
			check: func(t *testing.T, p *pod, sum runspec.Summary, _ string) {
				if n := sum.Events["lifecycle"]; n < 2 || len(sum.Events) != 1 {
					t.Errorf("events %v, want init's lifecycle events only", sum.Events)
				}
			}},
		{rule: "a file the runtime did not create is not created", cmd: "run", absent: true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			t.Parallel()
			p := newPod(t, jobSpec(vendorModels["claude"], "go")).withNATS()
			sinkFile := filepath.Join(t.TempDir(), "events.jsonl")
			p.env[sinks.EnvSinks] = `[{"type":"file","path":"` + sinkFile + `"},{"type":"http","url":"` + down.URL + `"}]`
			p.env[sinks.EnvRetryAttempts] = "1"
			termLog := filepath.Join(t.TempDir(), "termination-log")
			if !c.absent {
				// The kubelet creates the file before the container starts.
				if err := os.WriteFile(termLog, nil, 0o666); err != nil {
					t.Fatal(err)
				}
			}
			p.env["SUPERVISOR_TERMINATION_LOG"] = termLog
			if r := p.run(c.cmd); r.code != 0 {
				t.Fatalf("supervisor %s exited %d", c.cmd, r.code)
			}
			raw, err := os.ReadFile(termLog)
			if c.absent {
				if !os.IsNotExist(err) {
					t.Fatalf("the termination log was created (%v): %s", err, raw)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) > runspec.MaxSummaryBytes {
				t.Fatalf("the summary is %d bytes, over the kubelet's %d", len(raw), runspec.MaxSummaryBytes)
			}
			sum, err := runspec.ParseSummary(string(raw))
			if err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
			c.check(t, p, sum, sinkFile)
		})
	}
}
