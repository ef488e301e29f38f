package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tests/internal/runs"
	"github.com/agentplane/agentplane/tools/demo/scenario"
)

// TestTheDemoScenario runs the demo's recipes and runs (examples/demo and
// tools/demo/scenario) on the same stack the demo uses, and checks that
// each run keeps its promise, that the queued run is admitted once the slot
// frees, that the events arrive through JetStream, and the metrics.
func TestTheDemoScenario(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	if err := scenario.Apply(ctx, env.Client, ns, filepath.Join(env.RepoRoot, "examples", "demo"), io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := scenario.Launch(ctx, env.Client, ns, io.Discard); err != nil {
		t.Fatal(err)
	}
	got := map[string]*agentsv1alpha1.Agent{}
	for _, r := range scenario.Runs {
		got[r.Name] = waitTerminal(t, ns, r.Name, 3*time.Minute)
	}
	for _, r := range scenario.Runs {
		t.Run(r.Name+" "+r.What, func(t *testing.T) {
			if why := r.Check(got[r.Name]); why != "" {
				t.Error(why)
			}
		})
	}

	t.Run("the queued run starts only after the first one finished", func(t *testing.T) {
		first, second := got["triage-101"], got["triage-102"]
		if second.Status.StartedAt.Before(first.Status.CompletedAt) {
			t.Errorf("triage-102 started at %s, before triage-101 finished at %s (Forbid)", second.Status.StartedAt, first.Status.CompletedAt)
		}
	})

	t.Run("the events arrive through JetStream", func(t *testing.T) {
		evs := runs.Stored(t, natsURL, ns, "fix-issue-42", natsOpts...)
		calls := 0
		for _, ev := range evs {
			if ev.GetKind() == eventsv1.EventKind_EVENT_KIND_TOOL_CALL {
				calls++
			}
		}
		lc := lifecycles(evs)
		if calls == 0 || len(lc) == 0 || lc[len(lc)-1] != "agent/succeeded" {
			t.Errorf("fix-issue-42: %d tool calls, lifecycle %v", calls, lc)
		}
		if lc := lifecycles(runs.Stored(t, natsURL, ns, "summarize-week", natsOpts...)); len(lc) == 0 || lc[len(lc)-1] != "agent/failed" {
			t.Errorf("summarize-week lifecycle %v", lc)
		}
	})

	t.Run("the metrics count the runs", func(t *testing.T) {
		m := scrape(t)
		for _, c := range []struct {
			series string
			min    float64
		}{
			{`controller_runs_completed_total{exit_code="0",phase="Succeeded"}`, 3},
			{`controller_runs_completed_total{exit_code="3",phase="Failed"}`, 1},
			{`controller_runs_completed_total{exit_code="124",phase="Failed"}`, 1},
			{`controller_run_failures_total{kind="missing_ref"}`, 1},
			{`controller_run_failures_total{kind="job_failed"}`, 2},
			{`controller_run_queue_seconds_count`, 5},
			{`controller_run_duration_seconds_count{phase="Succeeded"}`, 3},
		} {
			if m[c.series] < c.min {
				t.Errorf("%s = %v, want at least %v", c.series, m[c.series], c.min)
			}
		}
		build := false
		for series, v := range m {
			build = build || strings.HasPrefix(series, "agentplane_build_info{") && strings.Contains(series, `service="agent-controller"`) && v == 1
		}
		if !build {
			t.Error("the agent-controller does not export agentplane_build_info")
		}
	})
}

// TestAgentctlRunWaitReturnsTheRunsExitCode runs agentctl as a user would.
func TestAgentctlRunWaitReturnsTheRunsExitCode(t *testing.T) {
	ns := env.Namespace(t)
	recipe(t, ns, "reviewer", "gpt-5-codex", "mock:fail review", 5, map[string]string{"MOCKAGENT_EXIT": "5"})
	cmd := exec.Command(filepath.Join(binDir, "agentctl"), append(append([]string{"--kubeconfig", kubeconfig, "-n", ns}, natsAuth.AgentctlArgs()...),
		"run", "--station", "reviewer", "--follow", "--wait", "--timeout", "2m")...)
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 5 {
		t.Fatalf("agentctl exited %d, want the run's 5:\n%s", code, out)
	}
	if !strings.Contains(string(out), "agent/started") || !strings.Contains(string(out), "Failed (exit 5)") {
		t.Errorf("agentctl output lacks the followed events or the outcome:\n%s", out)
	}
}

// scrape reads the agent-controller's /metrics into series → value.
func scrape(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}
