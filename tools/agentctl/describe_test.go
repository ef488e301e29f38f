package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// closedNATS is a NATS address where nothing listens.
const closedNATS = "nats://127.0.0.1:1"

// platform is one object of each kind, with a status, in a namespace.
type platform struct {
	ns                                  string
	agent                               *agentsv1alpha1.Agent
	runtime                             *omniav1alpha1.AgentRuntime
	pack                                *omniav1alpha1.PromptPack
	registry                            *omniav1alpha1.ToolRegistry
	agentEvent, oldAgentEvent, rtEvent  string
	agentCondition, runtimeConditionMsg string
}

// createWithStatus creates o, then writes the status set before.
func createWithStatus(t *testing.T, o client.Object, setStatus func()) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, o); err != nil {
		t.Fatalf("create %T: %v", o, err)
	}
	setStatus()
	if err := env.Client.Status().Update(ctx, o); err != nil {
		t.Fatalf("status %T: %v", o, err)
	}
}

// kubeEvent records a core/v1 Event about the object with this uid.
func kubeEvent(t *testing.T, ns, name, kind string, uid types.UID, reason, msg string) {
	t.Helper()
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: name + ".", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name, UID: uid},
		Reason:         reason, Message: msg, Type: corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "agent-controller"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	if err := env.Client.Create(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
}

func mkPlatform(t *testing.T) *platform {
	t.Helper()
	p := &platform{ns: env.Namespace(t)}
	now := metav1.Now()

	p.agent = &agentsv1alpha1.Agent{
		ObjectMeta: metav1.ObjectMeta{Name: "fix-42", Namespace: p.ns},
		Spec:       agentsv1alpha1.AgentSpec{StationRef: "bug-fixer", Model: "claude-opus-4", Parameters: map[string]string{"issue": "42"}},
	}
	p.agentCondition = "InitFailed"
	createWithStatus(t, p.agent, func() {
		p.agent.Status = agentsv1alpha1.AgentStatus{
			Phase: agentsv1alpha1.PhaseFailed, JobName: "fix-42-job", SessionID: "sess-7", ExitCode: ptr.To[int32](3),
			FailureReason: "the clone step failed: repository acme/shop not found after three attempts",
			Conditions: []metav1.Condition{{Type: "Initialized", Status: metav1.ConditionFalse, Reason: p.agentCondition,
				Message: "clone: not found", LastTransitionTime: now}},
		}
	})
	p.agentEvent = "Job fix-42-job created"
	kubeEvent(t, p.ns, p.agent.Name, "Agent", p.agent.UID, "Started", p.agentEvent)
	// An Event of an earlier Agent of the same name: not this one's.
	p.oldAgentEvent = "from a deleted namesake"
	kubeEvent(t, p.ns, p.agent.Name, "Agent", "00000000-0000-0000-0000-000000000000", "Stale", p.oldAgentEvent)

	p.runtime = &omniav1alpha1.AgentRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "support", Namespace: p.ns},
		Spec: omniav1alpha1.AgentRuntimeSpec{
			PromptPackRef: omniav1alpha1.PromptPackRef{Name: "support-prompts", Version: ptr.To("1.2.0")},
			Facades:       []omniav1alpha1.FacadeConfig{{Type: omniav1alpha1.FacadeTypeWebSocket}},
			Providers:     []omniav1alpha1.NamedProviderRef{{Name: "default", ProviderRef: omniav1alpha1.ProviderRef{Name: "claude-sonnet"}}},
		},
	}
	p.runtimeConditionMsg = "1 of 2 replicas ready"
	createWithStatus(t, p.runtime, func() {
		p.runtime.Status = omniav1alpha1.AgentRuntimeStatus{
			Phase:         omniav1alpha1.AgentRuntimePhaseRunning,
			Replicas:      &omniav1alpha1.ReplicaStatus{Ready: 1, Desired: 2, Available: 1},
			ActiveVersion: ptr.To("1.2.0"),
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "ReplicasReady",
				Message: p.runtimeConditionMsg, LastTransitionTime: now}},
		}
	})
	p.rtEvent = "Deployment support scaled"
	kubeEvent(t, p.ns, p.runtime.Name, "AgentRuntime", p.runtime.UID, "Scaled", p.rtEvent)

	p.pack = &omniav1alpha1.PromptPack{
		ObjectMeta: metav1.ObjectMeta{Name: "support-prompts-1.2.0", Namespace: p.ns},
		Spec: omniav1alpha1.PromptPackSpec{PackName: "support-prompts", Version: "1.2.0", Source: omniav1alpha1.PromptPackSource{
			Type: omniav1alpha1.SourceTypeConfigMap, ConfigMapRef: &omniav1alpha1.LocalObjectReference{Name: "support-prompts-1.2.0"}}},
	}
	createWithStatus(t, p.pack, func() {
		p.pack.Status = omniav1alpha1.PromptPackStatus{
			Phase: omniav1alpha1.PromptPackPhaseActive, ActiveVersion: ptr.To("1.2.0"), Channel: omniav1alpha1.ChannelStable,
			ContentDigest: "sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
		}
	})

	p.registry = &omniav1alpha1.ToolRegistry{
		ObjectMeta: metav1.ObjectMeta{Name: "support-tools", Namespace: p.ns},
		Spec: omniav1alpha1.ToolRegistrySpec{Handlers: []omniav1alpha1.HandlerDefinition{{
			Name: "docs", Type: omniav1alpha1.HandlerTypeMCP,
			MCPConfig: &omniav1alpha1.MCPConfig{Transport: "sse", Endpoint: "http://docs.support.svc:8080/sse"},
		}}},
	}
	createWithStatus(t, p.registry, func() {
		p.registry.Status = omniav1alpha1.ToolRegistryStatus{
			Phase: omniav1alpha1.ToolRegistryPhaseDegraded, DiscoveredToolsCount: 2,
			DiscoveredTools: []omniav1alpha1.DiscoveredTool{
				{Name: "search_docs", HandlerName: "docs", Status: omniav1alpha1.ToolStatusAvailable},
				{Name: "open_ticket", HandlerName: "docs", Status: omniav1alpha1.ToolStatusUnavailable, Error: ptr.To("connection refused")},
			},
		}
	})
	return p
}

// rowOf returns the words of the table row whose NAME (or NAMESPACE
// NAME) starts it.
func rowOf(t *testing.T, out, name string) []string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == name {
			return f
		}
	}
	t.Fatalf("no row %s in:\n%s", name, out)
	return nil
}

func TestGetShowsEveryKind(t *testing.T) {
	p := mkPlatform(t)
	kc := kubeconfig(t)
	cases := []struct {
		rule string
		args []string
		row  string
		// want are the row's words, AGE (a duration) left out: the words
		// before it and after it.
		before, after []string
	}{
		{"get with no kind lists Agents", []string{"get"}, "fix-42", []string{"fix-42", "Failed", "bug-fixer", "fix-42-job"}, nil},
		{"get -o wide adds an Agent's model, session, exit code and cut reason", []string{"get", "-o", "wide"}, "fix-42",
			[]string{"fix-42", "Failed", "bug-fixer", "fix-42-job"}, []string{"claude-opus-4", "sess-7", "3", "the", "clone", "step", "failed:", "repository", "acme/…"}},
		{"get ar lists AgentRuntimes", []string{"get", "ar"}, "support", []string{"support", "Running", "1", "1.2.0"}, nil},
		{"get agentruntimes -o wide adds pack, provider and replicas", []string{"get", "agentruntimes", "-o", "wide"}, "support",
			[]string{"support", "Running", "1", "1.2.0"}, []string{"support-prompts@1.2.0", "default=claude-sonnet", "1/2"}},
		{"get pp lists PromptPacks", []string{"get", "pp"}, "support-prompts-1.2.0", []string{"support-prompts-1.2.0", "support-prompts", "1.2.0", "Active"}, nil},
		{"get promptpack -o wide adds channel, active version and short digest", []string{"get", "promptpack", "-o", "wide"}, "support-prompts-1.2.0",
			[]string{"support-prompts-1.2.0", "support-prompts", "1.2.0", "Active"}, []string{"stable", "1.2.0", "sha256:abcdef012345"}},
		{"get tr lists ToolRegistries", []string{"get", "tr"}, "support-tools", []string{"support-tools", "2", "Degraded"}, nil},
		{"get toolregistries -o wide adds handlers and available tools", []string{"get", "toolregistries", "-o", "wide"}, "support-tools",
			[]string{"support-tools", "2", "Degraded"}, []string{"1", "1/2"}},
		{"get KIND NAME shows one object", []string{"get", "tr", "support-tools"}, "support-tools", []string{"support-tools", "2", "Degraded"}, nil},
		{"get -A starts each row with its namespace", []string{"get", "pp", "-A"}, p.ns, []string{p.ns, "support-prompts-1.2.0"}, nil},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			out, code := agentctl(t, append([]string{"--kubeconfig", kc, "-n", p.ns}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			row := rowOf(t, out, c.row)
			if len(row) < len(c.before) || strings.Join(row[:len(c.before)], " ") != strings.Join(c.before, " ") {
				t.Errorf("row %q, want it to start %q", row, c.before)
			}
			if c.after != nil && (len(row) < len(c.after) || strings.Join(row[len(row)-len(c.after):], " ") != strings.Join(c.after, " ")) {
				t.Errorf("row %q, want it to end %q", row, c.after)
			}
		})
	}
	out, code := agentctl(t, "--kubeconfig", kc, "-n", p.ns, "get", "ar", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "kind: AgentRuntime") || !strings.Contains(out, "activeVersion: 1.2.0") {
		t.Errorf("yaml:\n%s", out)
	}
	out, code = agentctl(t, "--kubeconfig", kc, "-n", p.ns, "get", "widgets", "x")
	if code != exitUsage || !strings.Contains(out, `unknown kind "widgets"`) {
		t.Errorf("an unknown kind: exit %d\n%s", code, out)
	}
}

func TestDescribe(t *testing.T) {
	p := mkPlatform(t)
	kc := kubeconfig(t)
	cases := []struct {
		rule string
		args []string
		want []string
		not  []string
	}{
		{"describe NAME is an Agent: its fields, conditions and Events by uid; a closed NATS is one line",
			[]string{"describe", "fix-42"},
			[]string{"Name:", "fix-42", "Kind:", "Agent (agents.re-cinq.com/v1alpha1)", "Phase:", "Failed", "Station:", "bug-fixer",
				"Parameters:", "issue=42", "Exit Code:", "Session ID:", "sess-7",
				"Failure Reason:", "repository acme/shop not found after three attempts",
				"Conditions:", "Initialized", "False", p.agentCondition, "clone: not found",
				"Events:", "Started", "agent-controller", p.agentEvent,
				"Run events: NATS is not reachable, skipped"},
			[]string{p.oldAgentEvent}},
		{"describe ar NAME shows replicas, conditions and the runtime's Events",
			[]string{"describe", "ar", "support"},
			[]string{"Kind:", "AgentRuntime (omnia.altairalabs.ai/v1alpha1)", "Prompt Pack:", "support-prompts@1.2.0", "Phase:", "Running",
				"Active Version:", "Replicas:", "1 ready, 2 desired, 1 available", "Ready", "ReplicasReady", p.runtimeConditionMsg, "Scaled", p.rtEvent},
			[]string{"Run events", p.agentEvent}},
		{"describe pp NAME shows the source, channel and full digest; no conditions is <none>",
			[]string{"describe", "promptpack", "support-prompts-1.2.0"},
			[]string{"Source:", "configmap support-prompts-1.2.0", "Channel:", "stable",
				"sha256:abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789", "Conditions:  <none>", "Events:  <none>"}, nil},
		{"describe tr NAME lists the discovered tools and their errors",
			[]string{"describe", "tr", "support-tools"},
			[]string{"Handlers:", "docs (mcp)", "Tool Count:", "Tools:", "search_docs", "Available", "open_ticket", "Unavailable", "connection refused"}, nil},
		{"--events 0 reads no run events", []string{"describe", "fix-42", "--events", "0"}, []string{"Phase:"}, []string{"Run events"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			out, code := agentctl(t, append([]string{"--kubeconfig", kc, "-n", p.ns, "--nats-url", closedNATS}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.not {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			if n := strings.Count(out, "Run events"); n > 1 {
				t.Errorf("%d lines about run events, want at most one:\n%s", n, out)
			}
		})
	}
	out, code := agentctl(t, "--kubeconfig", kc, "-n", p.ns, "describe", "ar", "nope")
	if code != exitError || !strings.Contains(out, "not found") {
		t.Errorf("a missing object: exit %d\n%s", code, out)
	}
}

// TestDescribeShowsTheLastRunEvents publishes four events of the Agent's
// run and one of an earlier run of the same name; --events 2 shows the
// last two of this run.
func TestDescribeShowsTheLastRunEvents(t *testing.T) {
	srv := eventstest.Start(t)
	p := mkPlatform(t)
	pub, err := events.NewPublisher(events.PublisherOptions{URL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	old := events.NewRun(&eventsv1.RunIdentity{Namespace: p.ns, Agent: p.agent.Name, Uid: "earlier-run"})
	pub.Publish(old.Stamp(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{Name: "FromEarlierRun"}}}))
	run := events.NewRun(&eventsv1.RunIdentity{Namespace: p.ns, Agent: p.agent.Name, Uid: string(p.agent.UID)})
	pub.Publish(run.Lifecycle(&eventsv1.Lifecycle{Phase: "agent", Status: "started"}))
	pub.Publish(run.Stamp(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{Name: "Read"}}}))
	pub.Publish(run.Stamp(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_ToolCall{ToolCall: &eventsv1.ToolCall{Name: "Edit"}}}))
	pub.Publish(run.Lifecycle(&eventsv1.Lifecycle{Phase: "agent", Status: "failed", ExitCode: ptr.To[int32](3)}))
	if err := pub.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, code := agentctl(t, "--kubeconfig", kubeconfig(t), "-n", p.ns, "--nats-url", srv.URL(), "describe", "agent", p.agent.Name, "--events", "2")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	iHead, iEdit, iEnd := strings.Index(out, "Run events (last 2 of 4, from NATS):"), strings.Index(out, "tool_call   Edit"), strings.Index(out, "agent/failed exit=3")
	if iHead < 0 || iEdit < iHead || iEnd < iEdit {
		t.Errorf("the last two events, in order, missing:\n%s", out)
	}
	for _, gone := range []string{"agent/started", "tool_call   Read", "FromEarlierRun"} {
		if strings.Contains(out, gone) {
			t.Errorf("shows %q, which is not among the last two of this run:\n%s", gone, out)
		}
	}
}

// TestDescribeNeutralisesTerminalEscapes plays a controller or run pod
// that writes escape sequences into a condition message and an Event:
// describe prints them escaped, never raw.
func TestDescribeNeutralisesTerminalEscapes(t *testing.T) {
	ns := env.Namespace(t)
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: ns}, Spec: agentsv1alpha1.AgentSpec{StationRef: "st"}}
	createWithStatus(t, a, func() {
		a.Status.Phase = agentsv1alpha1.PhaseFailed
		a.Status.FailureReason = "boom\x1b]0;owned\x07"
		a.Status.Conditions = []metav1.Condition{{Type: "Initialized", Status: metav1.ConditionFalse, Reason: "Evil",
			Message: "x\x1b[2J\x1b[Hy", LastTransitionTime: metav1.Now()}}
	})
	kubeEvent(t, ns, a.Name, "Agent", a.UID, "Evil", "hide\x1b[8mthis\u202etxt.exe")
	out, code := agentctl(t, "--kubeconfig", kubeconfig(t), "-n", ns, "--nats-url", closedNATS, "describe", "evil")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Fatalf("a control character reached the terminal:\n%q", out)
	}
	for _, w := range []string{`boom\x1b]0;owned\x07`, `x\x1b[2J\x1b[Hy`, `hide\x1b[8mthis\u202etxt.exe`} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks the escaped %q:\n%s", w, out)
		}
	}
}

func TestCompletion(t *testing.T) {
	p := mkPlatform(t)
	kc := kubeconfig(t)
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if out, code := agentctl(t, "completion", shell); code != 0 || !strings.Contains(out, "agentctl") {
			t.Errorf("completion %s: exit %d\n%.200s", shell, code, out)
		}
	}
	cases := []struct {
		rule string
		args []string
		want []string
		not  []string
	}{
		{"the first argument of get completes kinds and Agent names", []string{"get", ""}, []string{"agents", "ar", "promptpacks", "tr", "fix-42"}, []string{"support"}},
		{"after a kind, get completes that kind's names", []string{"get", "ar", ""}, []string{"support"}, []string{"fix-42"}},
		{"a prefix narrows the names", []string{"describe", "pp", "support-p"}, []string{"support-prompts-1.2.0"}, []string{"support-tools"}},
		{"logs completes Agent names", []string{"logs", ""}, []string{"fix-42"}, []string{"agents", "support"}},
		{"cancel completes only its one argument", []string{"cancel", "fix-42", ""}, nil, []string{"fix-42"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			out, code := agentctl(t, append([]string{"__complete", "--kubeconfig", kc, "-n", p.ns}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			got := map[string]bool{}
			for _, l := range strings.Split(out, "\n") {
				got[l] = true
			}
			for _, w := range c.want {
				if !got[w] {
					t.Errorf("no completion %q:\n%s", w, out)
				}
			}
			for _, w := range c.not {
				if got[w] {
					t.Errorf("completes %q:\n%s", w, out)
				}
			}
		})
	}
	// An API server that cannot be reached completes nothing rather than
	// failing the shell.
	out, code := agentctl(t, "__complete", "--kubeconfig", unreachable(t), "logs", "")
	if code != 0 || strings.Contains(out, "fix-42") {
		t.Errorf("unreachable cluster: exit %d\n%s", code, out)
	}
}
