package runevents

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/sinks"
	"github.com/agentplane/agentplane/libs/sinks/sinkstest"
	"github.com/agentplane/agentplane/libs/vendors"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

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
			sinkstest.CheckGolden(t, filepath.Join("testdata", "sink-payloads", "batch-"+vendor+".jsonl"), got)
		})
	}
}
