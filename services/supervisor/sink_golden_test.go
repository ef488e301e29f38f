package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks"
	"github.com/agentplane/agentplane/libs/sinks/sinkstest"
)

// TestSinkPayloadsMatchTheGoldenFiles replays one recorded run of each
// vendor CLI through the supervisor and compares what a file sink
// receives with testdata/sink-payloads/<vendor>.jsonl: the sink payload
// format is a contract with receivers, so any change to it shows up here
// as a diff to review. AGENTPLANE_UPDATE_GOLDEN=1 rewrites the files.
func TestSinkPayloadsMatchTheGoldenFiles(t *testing.T) {
	for vendor, model := range vendorModels {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			transcript, err := filepath.Abs(filepath.Join("..", "..", "libs", "vendors", "testdata", "transcripts", vendor+"_tools.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			// A CLI of the vendor's name that prints the recorded run.
			bin := t.TempDir()
			script := "#!/bin/sh\nexec cat '" + transcript + "'\n"
			if err := os.WriteFile(filepath.Join(bin, vendor), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			p := newPod(t, jobSpec(model, "fix the flaky test"))
			p.env["PATH"] = bin + ":" + p.env["PATH"]
			p.env[runspec.EnvAgentName] = "fix-issue-42"
			p.env[runspec.EnvAgentNamespace] = "team-a"
			p.env[runspec.EnvAgentUID] = "0b6c1a52-7d0e-4e8a-9a51-3f2d6c9e8b10"
			p.env[runspec.EnvPodName] = "agent-job-fix-issue-42-x7k2p"
			p.env[runspec.EnvTaskID] = "ISSUE-42"
			sinkFile := filepath.Join(t.TempDir(), "events.jsonl")
			p.env[sinks.EnvSinks] = `[{"type":"file","path":"` + sinkFile + `"}]`
			if r := p.run("run"); r.code != 0 {
				t.Fatalf("exit %d", r.code)
			}
			got, err := os.ReadFile(sinkFile)
			if err != nil {
				t.Fatal(err)
			}
			sinkstest.CheckGolden(t, filepath.Join("testdata", "sink-payloads", vendor+".jsonl"), got)
		})
	}
}
