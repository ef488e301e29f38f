package runevents

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/sinks"
	"github.com/agentplane/agentplane/libs/sinks/sinkstest"
	"github.com/agentplane/agentplane/libs/vendors"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// goldenTime is what every payload's time becomes before comparing.
var goldenTime = regexp.MustCompile(`"time":"[^"]+"`)

// TestBatchSinkPayloadsMatchTheGoldenFiles sends one batch run of each
// vendor (started, then finished with the lines its batch API's answer
// becomes) through a file sink, and compares what the sink receives with
// testdata/sink-payloads/batch-<vendor>.jsonl: the payload format is a
// contract with receivers. AGENTPLANE_UPDATE_GOLDEN=1 rewrites the files.
func TestBatchSinkPayloadsMatchTheGoldenFiles(t *testing.T) {
	for vendor, model := range map[string]string{
		vendors.NameClaude: "claude-opus-5-5", vendors.NameCodex: "gpt-5-codex", vendors.NameGemini: "gemini-2.5-pro",
	} {
		t.Run(vendor, func(t *testing.T) {
			lines, err := vendors.BatchLines(vendor, vendors.BatchResponse{
				Model: model, MessageID: "msg_golden_1", SessionID: "batch_golden_1", Text: "The flaky test waits on a timer; fixed.",
				StopReason: "end_turn", InputTokens: 1200, OutputTokens: 80, Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
			})
			if err != nil {
				t.Fatal(err)
			}
			a := batchAgent(agentsv1alpha1.PhaseSucceeded)
			a.Name, a.Namespace, a.UID = "summarize-week", "team-a", "6f9d2c1e-0a4b-4c7d-8e2f-1b3a5c7d9e0f"
			a.Status.ExitCode = ptr.To[int32](0)
			evs := Batch(decision.NoticeStarted, a, model, nil)
			evs = append(evs, Batch(decision.NoticeFinished, a, model, lines)...)

			path := filepath.Join(t.TempDir(), "events.jsonl")
			set, err := sinks.Build([]sinks.Config{{Type: sinks.TypeFile, Path: path}}, sinks.BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := set.DeliverAll(evs); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := set.Close(ctx); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range bytes.Split(bytes.TrimSuffix(got, []byte("\n")), []byte("\n")) {
				sinkstest.Check(t, line)
			}
			got = goldenTime.ReplaceAll(got, []byte(`"time":"2026-12-01T10:00:00Z"`))
			checkGolden(t, filepath.Join("testdata", "sink-payloads", "batch-"+vendor+".jsonl"), got)
		})
	}
}

// checkGolden compares got with the file at path, or rewrites it when
// AGENTPLANE_UPDATE_GOLDEN=1.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if os.Getenv("AGENTPLANE_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (AGENTPLANE_UPDATE_GOLDEN=1 creates it): %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file (AGENTPLANE_UPDATE_GOLDEN=1 rewrites it if intended)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
