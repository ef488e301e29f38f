package decision

import (
	"math"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

func batchDef(onTimeout agentsv1alpha1.OnTimeoutPolicy) *agentsv1alpha1.AgentDefinition {
	d := definition()
	d.Spec.Execution = agentsv1alpha1.ExecutionBatch
	d.Spec.Prompt = "summarise {topic}"
	d.Spec.Batch = &agentsv1alpha1.BatchSpec{MaxTokens: 512, TimeoutMinutes: 10, OnTimeout: onTimeout}
	return d
}

func batchSnap(a *agentsv1alpha1.Agent, onTimeout agentsv1alpha1.OnTimeoutPolicy) Snapshot {
	s := snap(a)
	s.Definition = batchDef(onTimeout)
	s.Config.BatchEnabled = true
	s.Config.BatchPoll = time.Minute
	return s
}

// batchRunning is a Running batch run submitted at t0 - 30s.
func batchRunning(name string) *agentsv1alpha1.Agent {
	a := agent(name, agentsv1alpha1.PhaseRunning)
	a.Status.JobName = ""
	a.Status.BatchID = "msgbatch_1"
	a.Status.BatchProvider = agentsv1alpha1.BatchProviderAnthropic
	a.Finalizers = []string{agentsv1alpha1.BatchCleanupFinalizer}
	return a
}

// batchDeadline is when batchRunning's batch times out: startedAt plus
// batchDef's timeoutMinutes.
var batchDeadline = t0.Add(10*time.Minute - 30*time.Second)

// batchPendingAt is the snapshot of the Running batch run "a" under
// onTimeout, seen at now with its batch still pending.
func batchPendingAt(onTimeout agentsv1alpha1.OnTimeoutPolicy, now time.Time) Snapshot {
	s := batchSnap(batchRunning("a"), onTimeout)
	s.Now = now
	s.Batch = &BatchOutcome{State: BatchPending}
	return s
}

// slotTaken gives s a one-slot Forbid Station whose slot another Running
// run holds.
func slotTaken(s Snapshot) Snapshot {
	s.Station = station(agentsv1alpha1.ForbidConcurrent, 1)
	s.StationRuns = []*agentsv1alpha1.Agent{running("other", t0.Add(-time.Hour))}
	return s
}

func running(name string, started time.Time) *agentsv1alpha1.Agent {
	a := agent(name, agentsv1alpha1.PhaseRunning)
	a.Status.StartedAt = &metav1.Time{Time: started}
	return a
}

func TestBatchRuns(t *testing.T) {
	cases := []planCase{
		{"submit: an admitted batch run submits instead of creating a Job", func() Snapshot {
			a := agent("a", "")
			a.Spec.Parameters = map[string]string{"topic": "tides"}
			return batchSnap(a, "")
		}, func(t *testing.T, p Plan) {
			if p.Submit == nil || p.CreateJob != nil {
				t.Fatalf("want a submit and no Job: %+v", p)
			}
			if p.Submit.Prompt != "summarise tides" || p.Submit.MaxTokens != 512 || p.Submit.Provider != agentsv1alpha1.BatchProviderAnthropic {
				t.Errorf("submit carries the rendered prompt, batch.maxTokens and the provider: %+v", p.Submit)
			}
			if p.Submit.APIKeyKey != "ANTHROPIC_API_KEY" {
				t.Errorf("the API key is read from agent-secrets under the vendor's variable name, got %q", p.Submit.APIKeyKey)
			}
		}},
		{"submit: then patches Running with batchProvider and startedAt and sends agent/started", func() Snapshot { return batchSnap(agent("a", ""), "") },
			func(t *testing.T, p Plan) {
				if p.Status == nil || p.Status.Phase != agentsv1alpha1.PhaseRunning || p.Status.BatchProvider != agentsv1alpha1.BatchProviderAnthropic ||
					p.Status.StartedAt == nil || !p.Status.StartedAt.Time.Equal(t0) || p.Status.JobName != "" {
					t.Errorf("status after submit: %+v", p.Status)
				}
				if p.Notice != NoticeStarted || !p.Outcome.Started {
					t.Errorf("agent/started is due after the submit patch: notice %v", p.Notice)
				}
			}},
		{"submit: output.schema goes with the request and resources.secrets maps the key", func() Snapshot {
			s := batchSnap(agent("a", ""), "")
			s.Definition.Spec.Output = &agentsv1alpha1.OutputSpec{Schema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}}
			s.Definition.Spec.Resources = &agentsv1alpha1.AgentResources{Secrets: []agentsv1alpha1.SecretEnvEntry{{Name: "ANTHROPIC_API_KEY", Ref: "team-key"}}}
			return s
		}, func(t *testing.T, p Plan) {
			if p.Submit.OutputSchema != `{"type":"object"}` || p.Submit.APIKeyKey != "team-key" {
				t.Errorf("submit: %+v", p.Submit)
			}
		}},
		{"validation: a definition that needs the run pod cannot run as a batch", func() Snapshot {
			s := batchSnap(agent("a", ""), "")
			s.Definition.Spec.Resources = &agentsv1alpha1.AgentResources{Repos: []agentsv1alpha1.RepoSource{{URL: "https://example.com/r.git"}}}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "batch execution cannot clone resources.repos")
			if p.Submit != nil {
				t.Error("nothing is submitted")
			}
		}},
		{"validation: a model without a vendor batch API cannot run as a batch", func() Snapshot {
			s := batchSnap(agent("a", ""), "")
			s.Definition.Spec.Model = "opencode/anthropic/claude"
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "needs a model with a vendor batch API")
		}},
		{"enabled: without BATCH_ENABLED=true the Agent fails with the reason", func() Snapshot {
			s := batchSnap(agent("a", ""), "")
			s.Config.BatchEnabled = false
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonBatchDisabled)
		}},
		{"a batch definition fails at Pending when the batch component is off", func() Snapshot {
			s := snap(agent("a", ""))
			s.Definition.Spec.Execution = agentsv1alpha1.ExecutionBatch
			return s
		}, func(t *testing.T, p Plan) { wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonBatchDisabled) }},
		{"concurrency: a full Station queues a batch run as it would a Job", func() Snapshot { return slotTaken(batchSnap(agent("a", ""), "")) },
			func(t *testing.T, p Plan) {
				if p.Submit != nil || !p.Outcome.Queued {
					t.Errorf("want queued without submit: %+v", p)
				}
			}},
		{"concurrency: under Replace the oldest Running run is deleted and the new Agent submits", func() Snapshot {
			s := slotTaken(batchSnap(agent("a", ""), ""))
			s.Station.Spec.ConcurrencyPolicy = agentsv1alpha1.ReplaceConcurrent
			return s
		}, func(t *testing.T, p Plan) {
			if len(p.Preempt) != 1 || p.Preempt[0].Name != "other" || p.Submit == nil {
				t.Errorf("want other preempted and a submit: %+v", p)
			}
		}},
		{"poll: a pending batch leaves the Agent Running and looks again within the poll period", func() Snapshot { return batchPendingAt("", t0) },
			func(t *testing.T, p Plan) {
				if !p.Empty() || p.RequeueAfter != time.Minute {
					t.Errorf("want no writes and a look after the poll period: %+v", p)
				}
			}},
		{"poll: a pass that did not ask writes nothing either", func() Snapshot { return batchSnap(batchRunning("a"), "") },
			func(t *testing.T, p Plan) {
				if !p.Empty() || p.RequeueAfter <= 0 {
					t.Errorf("plan: %+v", p)
				}
			}},
		{"poll: a finished batch moves the Agent to Succeeded with output set to the CLI lines", func() Snapshot {
			s := batchSnap(batchRunning("a"), "")
			s.Batch = &BatchOutcome{State: BatchSucceeded, Lines: []string{`{"type":"system"}`, `{"type":"result"}`}}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseSucceeded, 0, "")
			if p.Status.Output != "{\"type\":\"system\"}\n{\"type\":\"result\"}" || p.Notice != NoticeFinished {
				t.Errorf("output %q notice %v", p.Status.Output, p.Notice)
			}
			if p.Status.BatchID != "msgbatch_1" {
				t.Error("batchId is kept")
			}
		}},
		{"poll: a failed request's message becomes failureReason", func() Snapshot {
			s := batchSnap(batchRunning("a"), "")
			s.Batch = &BatchOutcome{State: BatchFailed, FailureMessage: "invalid_request_error: prompt is too long"}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, "invalid_request_error: prompt is too long")
			if p.Notice != NoticeFinished {
				t.Errorf("agent/failed is due: %v", p.Notice)
			}
		}},
		{"timeout: onTimeout fail makes the Agent Failed with batch timed out", func() Snapshot { return batchPendingAt(agentsv1alpha1.OnTimeoutFail, batchDeadline) },
			func(t *testing.T, p Plan) {
				wantTerminal(t, p, agentsv1alpha1.PhaseFailed, 1, ReasonBatchTimedOut)
				if p.Notice != NoticeTimeout || p.CreateJob != nil {
					t.Errorf("batch_timeout is due and no Job: %+v", p)
				}
			}},
		{"timeout: not before timeoutMinutes have passed since startedAt", func() Snapshot {
			return batchPendingAt(agentsv1alpha1.OnTimeoutFail, batchDeadline.Add(-time.Second))
		}, func(t *testing.T, p Plan) {
			if !p.Empty() || p.RequeueAfter != time.Second {
				t.Errorf("want a look exactly at the deadline: %+v", p)
			}
		}},
		{"timeout: a huge timeoutMinutes is far away, never an overflow into the past", func() Snapshot {
			s := batchPendingAt(agentsv1alpha1.OnTimeoutFail, batchDeadline.Add(time.Hour))
			s.Definition.Spec.Batch.TimeoutMinutes = math.MaxInt32
			s.Config.BatchTimeoutUnit = time.Minute
			return s
		}, func(t *testing.T, p Plan) {
			if p.Status != nil || p.Notice != NoticeNone || p.RequeueAfter <= 0 {
				t.Errorf("a pending batch under a huge timeout stays Running: %+v", p)
			}
		}},
		{"timeout: onTimeout fallback patches batchFallback, keeps batchId and creates the Job", func() Snapshot {
			return batchPendingAt(agentsv1alpha1.OnTimeoutFallback, batchDeadline)
		}, func(t *testing.T, p Plan) {
			if p.Status == nil || !p.Status.BatchFallback || p.Status.BatchID != "msgbatch_1" || p.Status.Phase != agentsv1alpha1.PhaseRunning {
				t.Fatalf("status: %+v", p.Status)
			}
			if p.CreateJob == nil || p.Status.JobName != p.CreateJob.Name || p.Notice != NoticeTimeout {
				t.Errorf("the ordinary Job is created and batch_timeout is due: %+v", p)
			}
		}},
		{"timeout: under fallback a full Station leaves the Agent Running without a Job", func() Snapshot {
			return slotTaken(batchPendingAt(agentsv1alpha1.OnTimeoutFallback, batchDeadline))
		}, func(t *testing.T, p Plan) {
			if p.Status == nil || !p.Status.BatchFallback || p.CreateJob != nil || p.Status.JobName != "" || p.Status.Phase != agentsv1alpha1.PhaseRunning {
				t.Errorf("want fallback recorded and no Job yet: %+v", p)
			}
		}},
		{"timeout: a fallback waiting for a slot creates its Job once one frees", func() Snapshot {
			a := batchRunning("a")
			a.Status.BatchFallback = true
			s := batchSnap(a, agentsv1alpha1.OnTimeoutFallback)
			s.Station = station(agentsv1alpha1.ForbidConcurrent, 1)
			return s
		}, func(t *testing.T, p Plan) {
			if p.CreateJob == nil || p.Status == nil || p.Status.JobName == "" || p.Notice != NoticeNone {
				t.Errorf("want the Job now, without another notice: %+v", p)
			}
		}},
		{"timeout: a fallback still without a slot keeps waiting", func() Snapshot {
			a := batchRunning("a")
			a.Status.BatchFallback = true
			return slotTaken(batchSnap(a, agentsv1alpha1.OnTimeoutFallback))
		}, func(t *testing.T, p Plan) {
			if !p.Empty() {
				t.Errorf("want nothing: %+v", p)
			}
		}},
		{"timeout: a poll that reports the result in the same pass wins and no fallback starts", func() Snapshot {
			s := batchSnap(batchRunning("a"), agentsv1alpha1.OnTimeoutFallback)
			s.Now = batchDeadline.Add(time.Minute)
			s.Batch = &BatchOutcome{State: BatchSucceeded, Lines: []string{"x"}}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseSucceeded, 0, "")
			if p.CreateJob != nil || p.Status.BatchFallback || p.Notice != NoticeFinished {
				t.Errorf("no fallback: %+v", p)
			}
		}},
		{"fallback: from then on the Job transitions apply", func() Snapshot {
			a := batchRunning("a")
			a.Status.BatchFallback = true
			a.Status.JobName = "agent-job-a"
			s := batchSnap(a, agentsv1alpha1.OnTimeoutFallback)
			s.Job = job(complete)
			s.Pod = PodOutcome{Found: true, ExitCode: new(int32), Log: "done"}
			return s
		}, func(t *testing.T, p Plan) {
			wantTerminal(t, p, agentsv1alpha1.PhaseSucceeded, 0, "")
			if p.Status.Output != "done" || p.Notice != NoticeNone {
				t.Errorf("the Job's own supervisor reports its end: %+v", p)
			}
		}},
	}
	runPlanCases(t, cases)
}

// TestBatchSubmitModel checks which model a batch submit names, and so
// which vendor and API key variable it goes to: the Agent's spec.model, then
// the definition's, then the default.
func TestBatchSubmitModel(t *testing.T) {
	cases := []struct {
		rule, agentModel, defModel string
		model                      string
		provider                   agentsv1alpha1.BatchProvider
		apiKey                     string
	}{
		{"the Agent's spec.model first", "gpt-5.1", "claude-opus-5-5", "gpt-5.1", agentsv1alpha1.BatchProviderOpenAI, "OPENAI_API_KEY"},
		{"the definition's when the Agent sets none", "", "gemini-2.5-pro", "gemini-2.5-pro", agentsv1alpha1.BatchProviderGemini, "GEMINI_API_KEY"},
		{"claude-opus-5-5 when neither sets one", "", "", "claude-opus-5-5", agentsv1alpha1.BatchProviderAnthropic, "ANTHROPIC_API_KEY"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			a := agent("a", "")
			a.Spec.Model = c.agentModel
			s := batchSnap(a, "")
			s.Definition.Spec.Model = c.defModel
			p := Decide(s)
			if p.Submit == nil || p.Submit.Model != c.model || p.Submit.Provider != c.provider || p.Submit.APIKeyKey != c.apiKey {
				t.Errorf("submit %+v, want model %s to %s with key %s", p.Submit, c.model, c.provider, c.apiKey)
			}
		})
	}
}

func TestValidateBatch(t *testing.T) {
	spec := func(f func(*agentsv1alpha1.AgentDefinitionSpec)) *agentsv1alpha1.AgentDefinitionSpec {
		s := &agentsv1alpha1.AgentDefinitionSpec{Prompt: "p", Execution: agentsv1alpha1.ExecutionBatch}
		f(s)
		return s
	}
	cases := []struct {
		rule, model, want string
		spec              *agentsv1alpha1.AgentDefinitionSpec
	}{
		{"a plain prompt can run as a batch", "claude-opus-5-5", "", spec(func(*agentsv1alpha1.AgentDefinitionSpec) {})},
		{"each batch vendor is accepted (openai)", "o4-mini", "", spec(func(*agentsv1alpha1.AgentDefinitionSpec) {})},
		{"each batch vendor is accepted (gemini)", "gemini-2.5-flash", "", spec(func(*agentsv1alpha1.AgentDefinitionSpec) {})},
		{"exec has no batch API", "exec", "runs exec", spec(func(*agentsv1alpha1.AgentDefinitionSpec) {})},
		{"mcp servers need a CLI", "claude-opus-5-5", "resources.mcp_servers", spec(func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Resources = &agentsv1alpha1.AgentResources{MCPServers: []agentsv1alpha1.MCPServer{{Name: "m"}}}
		})},
		{"skills need a CLI", "claude-opus-5-5", "resources.skills", spec(func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Resources = &agentsv1alpha1.AgentResources{Skills: []string{"x"}}
		})},
		{"conversation state needs a CLI", "claude-opus-5-5", "resources.conversation", spec(func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: "https://s"}}
		})},
		{"watched files need a workspace", "claude-opus-5-5", "output.watch", spec(func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Output = &agentsv1alpha1.OutputSpec{Watch: []agentsv1alpha1.OutputWatch{{Event: "e", Path: "p"}}}
		})},
		{"file sinks need a pod", "claude-opus-5-5", "output.sinks[1] (type file)", spec(func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Output = &agentsv1alpha1.OutputSpec{Sinks: []agentsv1alpha1.OutputSink{{Type: "http", URL: "https://h"}, {Type: "file", Path: "/x"}}}
		})},
		{"sink header secrets are not read by the controller", "claude-opus-5-5", "output.sinks[0].headers_secret", spec(func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Output = &agentsv1alpha1.OutputSpec{Sinks: []agentsv1alpha1.OutputSink{{Type: "http", URL: "https://h", HeadersSecret: "k"}}}
		})},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got := ValidateBatch(tc.spec, tc.model)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("ValidateBatch = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBatchDue(t *testing.T) {
	deadline := t0.Add(time.Hour)
	cases := []struct {
		rule    string
		last    time.Time
		now     time.Time
		noticed bool
		want    bool
	}{
		{"the first pass asks", time.Time{}, t0, false, true},
		{"at most once per poll period", t0, t0.Add(59 * time.Second), false, false},
		{"again once the period passed", t0, t0.Add(time.Minute), false, true},
		{"a completion notice asks at once", t0, t0.Add(time.Second), true, true},
		{"the pass at the deadline asks, so a result there wins", t0, deadline, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if got := BatchDue(tc.last, tc.now, deadline, time.Minute, tc.noticed); got != tc.want {
				t.Errorf("BatchDue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBatchCleanup(t *testing.T) {
	now := metav1.Now()
	cases := []struct {
		rule string
		a    func() *agentsv1alpha1.Agent
		want bool
	}{
		{"an in-flight batch keeps its finalizer", func() *agentsv1alpha1.Agent { return batchRunning("a") }, false},
		{"after the result is recorded the batch is cleaned up", func() *agentsv1alpha1.Agent {
			a := batchRunning("a")
			a.Status.Phase = agentsv1alpha1.PhaseSucceeded
			return a
		}, true},
		{"after a timeout fallback the batch is cleaned up", func() *agentsv1alpha1.Agent {
			a := batchRunning("a")
			a.Status.BatchFallback = true
			return a
		}, true},
		{"a deleted Agent with the finalizer is cleaned up", func() *agentsv1alpha1.Agent {
			a := batchRunning("a")
			a.DeletionTimestamp = &now
			return a
		}, true},
		{"without the finalizer there is nothing to do", func() *agentsv1alpha1.Agent {
			a := batchRunning("a")
			a.Finalizers = []string{"example.com/other"}
			a.Status.Phase = agentsv1alpha1.PhaseFailed
			return a
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if got := NeedsBatchCleanup(tc.a()); got != tc.want {
				t.Errorf("NeedsBatchCleanup = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("failed cleanups are counted and after 5 the finalizer is removed anyway", func(t *testing.T) {
		var attempts int32
		for i := 1; i <= 5; i++ {
			next, giveUp := CleanupFailed(attempts)
			if next != int32(i) || giveUp != (i == 5) {
				t.Fatalf("attempt %d: next %d giveUp %v", i, next, giveUp)
			}
			attempts = next
		}
	})
}
