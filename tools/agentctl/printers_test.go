package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// cellOf renders the column header of kind k for o, as the table does.
func cellOf(t *testing.T, k *kind, header string, o client.Object) string {
	t.Helper()
	for _, c := range k.columns {
		if c.header == header {
			return cell(c.cell(o, time.Now()))
		}
	}
	t.Fatalf("%s has no column %s", k.plural, header)
	return ""
}

func TestColumnRules(t *testing.T) {
	agent := func(f func(a *agentsv1alpha1.Agent)) client.Object {
		a := &agentsv1alpha1.Agent{}
		f(a)
		return a
	}
	runtime := func(f func(r *omniav1alpha1.AgentRuntime)) client.Object {
		r := &omniav1alpha1.AgentRuntime{}
		f(r)
		return r
	}
	pack := func(f func(p *omniav1alpha1.PromptPack)) client.Object {
		p := &omniav1alpha1.PromptPack{}
		f(p)
		return p
	}
	registry := func(f func(r *omniav1alpha1.ToolRegistry)) client.Object {
		r := &omniav1alpha1.ToolRegistry{}
		f(r)
		return r
	}
	cases := []struct {
		rule   string
		kind   *kind
		header string
		obj    client.Object
		want   string
	}{
		{"Agent PHASE is status.phase", agentKind, "PHASE", agent(func(a *agentsv1alpha1.Agent) { a.Status.Phase = agentsv1alpha1.PhaseFailed }), "Failed"},
		{"Agent PHASE is <none> before the controller set one", agentKind, "PHASE", agent(func(*agentsv1alpha1.Agent) {}), none},
		{"Agent STATION is spec.stationRef", agentKind, "STATION", agent(func(a *agentsv1alpha1.Agent) { a.Spec.StationRef = "bug-fixer" }), "bug-fixer"},
		{"Agent JOB is status.jobName", agentKind, "JOB", agent(func(a *agentsv1alpha1.Agent) { a.Status.JobName = "agent-x" }), "agent-x"},
		{"Agent JOB is <none> before the Job exists", agentKind, "JOB", agent(func(*agentsv1alpha1.Agent) {}), none},
		{"Agent MODEL (wide) is the run's own spec.model", agentKind, "MODEL", agent(func(a *agentsv1alpha1.Agent) { a.Spec.Model = "claude-opus-4" }), "claude-opus-4"},
		{"Agent SESSION (wide) is status.sessionId", agentKind, "SESSION", agent(func(a *agentsv1alpha1.Agent) { a.Status.SessionID = "s-1" }), "s-1"},
		{"Agent EXIT (wide) is status.exitCode, 0 included", agentKind, "EXIT", agent(func(a *agentsv1alpha1.Agent) { a.Status.ExitCode = ptr.To[int32](0) }), "0"},
		{"Agent EXIT (wide) is <none> when the run reported no exit code", agentKind, "EXIT", agent(func(*agentsv1alpha1.Agent) {}), none},
		{"Agent REASON (wide) is cut at 40 characters, marked with …", agentKind, "REASON",
			agent(func(a *agentsv1alpha1.Agent) { a.Status.FailureReason = strings.Repeat("é", 39) + "XYZ" }), strings.Repeat("é", 39) + "…"},
		{"Agent REASON (wide) stays on its row: a line break becomes a space", agentKind, "REASON",
			agent(func(a *agentsv1alpha1.Agent) { a.Status.FailureReason = "init failed:\nclone" }), "init failed: clone"},
		{"AgentRuntime PHASE is status.phase", agentRuntimeKind, "PHASE", runtime(func(r *omniav1alpha1.AgentRuntime) { r.Status.Phase = omniav1alpha1.AgentRuntimePhaseRunning }), "Running"},
		{"AgentRuntime READY is status.replicas.ready", agentRuntimeKind, "READY",
			runtime(func(r *omniav1alpha1.AgentRuntime) {
				r.Status.Replicas = &omniav1alpha1.ReplicaStatus{Ready: 1, Desired: 3}
			}), "1"},
		{"AgentRuntime READY is <none> before the controller counted replicas", agentRuntimeKind, "READY", runtime(func(*omniav1alpha1.AgentRuntime) {}), none},
		{"AgentRuntime VERSION is the served status.activeVersion", agentRuntimeKind, "VERSION",
			runtime(func(r *omniav1alpha1.AgentRuntime) { r.Status.ActiveVersion = ptr.To("1.2.0") }), "1.2.0"},
		{"AgentRuntime PACK (wide) is name@version for a pinned version", agentRuntimeKind, "PACK",
			runtime(func(r *omniav1alpha1.AgentRuntime) {
				r.Spec.PromptPackRef = omniav1alpha1.PromptPackRef{Name: "support", Version: ptr.To("1.2.0")}
			}), "support@1.2.0"},
		{"AgentRuntime PACK (wide) is name:channel for a followed channel", agentRuntimeKind, "PACK",
			runtime(func(r *omniav1alpha1.AgentRuntime) {
				r.Spec.PromptPackRef = omniav1alpha1.PromptPackRef{Name: "support", Track: ptr.To(omniav1alpha1.ChannelPrerelease)}
			}), "support:prerelease"},
		{"AgentRuntime PACK (wide) follows stable when neither version nor track is set", agentRuntimeKind, "PACK",
			runtime(func(r *omniav1alpha1.AgentRuntime) {
				r.Spec.PromptPackRef = omniav1alpha1.PromptPackRef{Name: "support"}
			}), "support:stable"},
		{"AgentRuntime PROVIDER (wide) names each Provider, logical=provider when the names differ, sorted", agentRuntimeKind, "PROVIDER",
			runtime(func(r *omniav1alpha1.AgentRuntime) {
				r.Spec.Providers = []omniav1alpha1.NamedProviderRef{
					{Name: "judge", ProviderRef: omniav1alpha1.ProviderRef{Name: "gpt"}},
					{Name: "claude", ProviderRef: omniav1alpha1.ProviderRef{Name: "claude"}},
				}
			}), "claude,judge=gpt"},
		{"AgentRuntime REPLICAS (wide) is ready/desired", agentRuntimeKind, "REPLICAS",
			runtime(func(r *omniav1alpha1.AgentRuntime) {
				r.Status.Replicas = &omniav1alpha1.ReplicaStatus{Ready: 1, Desired: 3, Available: 1}
			}), "1/3"},
		{"PromptPack PACK is spec.packName", promptPackKind, "PACK", pack(func(p *omniav1alpha1.PromptPack) { p.Spec.PackName = "support" }), "support"},
		{"PromptPack VERSION is spec.version", promptPackKind, "VERSION", pack(func(p *omniav1alpha1.PromptPack) { p.Spec.Version = "1.2.0" }), "1.2.0"},
		{"PromptPack PHASE is status.phase", promptPackKind, "PHASE", pack(func(p *omniav1alpha1.PromptPack) { p.Status.Phase = omniav1alpha1.PromptPackPhaseSuperseded }), "Superseded"},
		{"PromptPack ACTIVE (wide) is <none> once superseded", promptPackKind, "ACTIVE", pack(func(*omniav1alpha1.PromptPack) {}), none},
		{"PromptPack CHANNEL (wide) is status.channel", promptPackKind, "CHANNEL",
			pack(func(p *omniav1alpha1.PromptPack) { p.Status.Channel = omniav1alpha1.ChannelStable }), "stable"},
		{"PromptPack DIGEST (wide) keeps the algorithm and 12 hex digits", promptPackKind, "DIGEST",
			pack(func(p *omniav1alpha1.PromptPack) { p.Status.ContentDigest = "sha256:0123456789abcdef0123" }), "sha256:0123456789ab"},
		{"PromptPack DIGEST (wide) is <none> for a live source", promptPackKind, "DIGEST", pack(func(*omniav1alpha1.PromptPack) {}), none},
		{"ToolRegistry TOOLS is status.discoveredToolsCount", toolRegistryKind, "TOOLS",
			registry(func(r *omniav1alpha1.ToolRegistry) { r.Status.DiscoveredToolsCount = 4 }), "4"},
		{"ToolRegistry TOOLS counts status.discoveredTools when the count is unset", toolRegistryKind, "TOOLS",
			registry(func(r *omniav1alpha1.ToolRegistry) {
				r.Status.DiscoveredTools = make([]omniav1alpha1.DiscoveredTool, 2)
			}), "2"},
		{"ToolRegistry PHASE is status.phase", toolRegistryKind, "PHASE",
			registry(func(r *omniav1alpha1.ToolRegistry) { r.Status.Phase = omniav1alpha1.ToolRegistryPhaseDegraded }), "Degraded"},
		{"ToolRegistry HANDLERS (wide) counts spec.handlers", toolRegistryKind, "HANDLERS",
			registry(func(r *omniav1alpha1.ToolRegistry) { r.Spec.Handlers = make([]omniav1alpha1.HandlerDefinition, 3) }), "3"},
		{"ToolRegistry AVAILABLE (wide) is available/discovered tools", toolRegistryKind, "AVAILABLE",
			registry(func(r *omniav1alpha1.ToolRegistry) {
				r.Status.DiscoveredTools = []omniav1alpha1.DiscoveredTool{{Status: omniav1alpha1.ToolStatusAvailable}, {Status: omniav1alpha1.ToolStatusUnavailable}}
			}), "1/2"},
		{"AGE is <unknown> for an object without a creation time", toolRegistryKind, "AGE", registry(func(*omniav1alpha1.ToolRegistry) {}), "<unknown>"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := cellOf(t, c.kind, c.header, c.obj); got != c.want {
				t.Errorf("%s = %q, want %q", c.header, got, c.want)
			}
		})
	}
}

// header prints an empty table of k and returns its header line's words.
func header(t *testing.T, k *kind, output string, withNS bool) string {
	t.Helper()
	var out bytes.Buffer
	if err := printObjects(&out, k, nil, output, withNS, time.Now()); err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(out.String()), " ")
}

func TestTableRules(t *testing.T) {
	cases := []struct {
		rule   string
		kind   *kind
		output string
		withNS bool
		want   string
	}{
		{"Agents show the CRD's printer columns", agentKind, "", false, "NAME PHASE STATION JOB AGE"},
		{"-o wide adds an Agent's model, session, exit code and failure reason", agentKind, "wide", false, "NAME PHASE STATION JOB AGE MODEL SESSION EXIT REASON"},
		{"-A puts NAMESPACE first", agentKind, "", true, "NAMESPACE NAME PHASE STATION JOB AGE"},
		{"AgentRuntimes show phase, ready replicas and the served version", agentRuntimeKind, "", false, "NAME PHASE READY VERSION AGE"},
		{"-o wide adds an AgentRuntime's pack, providers and replicas", agentRuntimeKind, "wide", true, "NAMESPACE NAME PHASE READY VERSION AGE PACK PROVIDER REPLICAS"},
		{"PromptPacks show pack, version and phase", promptPackKind, "", false, "NAME PACK VERSION PHASE AGE"},
		{"-o wide adds a PromptPack's channel, active version and digest", promptPackKind, "wide", false, "NAME PACK VERSION PHASE AGE CHANNEL ACTIVE DIGEST"},
		{"ToolRegistries show the tool count and phase", toolRegistryKind, "", false, "NAME TOOLS PHASE AGE"},
		{"-o wide adds a ToolRegistry's handlers and available tools", toolRegistryKind, "wide", false, "NAME TOOLS PHASE AGE HANDLERS AVAILABLE"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := header(t, c.kind, c.output, c.withNS); got != c.want {
				t.Errorf("header %q, want %q", got, c.want)
			}
		})
	}
}

func TestRowsAreSortedAndFull(t *testing.T) {
	mk := func(ns, name string) client.Object {
		r := &omniav1alpha1.ToolRegistry{}
		r.Namespace, r.Name = ns, name
		return r
	}
	var out bytes.Buffer
	if err := printObjects(&out, toolRegistryKind, []client.Object{mk("b", "x"), mk("a", "z"), mk("a", "y")}, "wide", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var order []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		// Every row has a word per column, so awk and cut still work.
		if len(f) != len(strings.Fields(lines[0])) {
			t.Errorf("row %q has %d fields, the header %d", l, len(f), len(strings.Fields(lines[0])))
		}
		order = append(order, f[0]+"/"+f[1])
	}
	if got := strings.Join(order, " "); got != "a/y a/z b/x" {
		t.Errorf("rows in order %s, want by namespace then name", got)
	}
}

func TestStructuredOutputCanBeAppliedAgain(t *testing.T) {
	p := &omniav1alpha1.PromptPack{Spec: omniav1alpha1.PromptPackSpec{PackName: "support", Version: "1.0.0"}}
	p.Name = "support-1"
	var out bytes.Buffer
	if err := printObjects(&out, promptPackKind, []client.Object{p}, "json", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0]["apiVersion"] != "omnia.altairalabs.ai/v1alpha1" || got[0]["kind"] != "PromptPack" {
		t.Fatalf("json:\n%s", out.String())
	}
	out.Reset()
	if err := printObjects(&out, promptPackKind, []client.Object{p}, "yaml", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "kind: PromptPack") || !strings.Contains(out.String(), "packName: support") {
		t.Fatalf("yaml:\n%s", out.String())
	}
}

func TestKindArguments(t *testing.T) {
	cases := []struct {
		rule     string
		args     []string
		wantKind *kind
		wantName string
		wantErr  bool
	}{
		{"no argument lists Agents", nil, agentKind, "", false},
		{"one argument that is a kind lists that kind", []string{"ar"}, agentRuntimeKind, "", false},
		{"a kind is found by any spelling, ignoring case", []string{"PromptPack"}, promptPackKind, "", false},
		{"one argument that is not a kind is an Agent's name", []string{"fix-issue-42"}, agentKind, "fix-issue-42", false},
		{"KIND NAME reads one object of the kind", []string{"toolregistries", "tools"}, toolRegistryKind, "tools", false},
		{"an Agent named like a kind is reached as agent NAME", []string{"agent", "pp"}, agentKind, "pp", false},
		{"an unknown KIND before a NAME is a usage error", []string{"pods", "x"}, nil, "", true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			k, name, err := kindAndName(c.args)
			if c.wantErr {
				var ec *exitCodeError
				if !errors.As(err, &ec) || ec.code != exitUsage {
					t.Fatalf("err %v, want a usage error", err)
				}
				return
			}
			if err != nil || k != c.wantKind || name != c.wantName {
				t.Fatalf("got %v %q %v, want %s %q", k.plural, name, err, c.wantKind.plural, c.wantName)
			}
		})
	}
}

// TestTerminalEscapesAreNeutralised plays a run pod or controller that
// writes escape sequences into a status field: printed raw they would
// retitle the terminal, clear the screen or reorder the text shown. The
// table shows them as inert escapes.
func TestTerminalEscapesAreNeutralised(t *testing.T) {
	attacks := []struct {
		rule, in, want string
	}{
		{"an OSC sequence that retitles the terminal is shown escaped", "\x1b]0;owned\x07done", `\x1b]0;owned\x07done`},
		{"a CSI sequence that clears the screen is shown escaped", "ok\x1b[2J\x1b[H", `ok\x1b[2J\x1b[H`},
		{"a C1 control is shown escaped", "a\u009bb", `a\x9bb`},
		{"a right-to-left override is shown escaped", "exe.\u202etxt", `exe.\u202etxt`},
		{"a carriage return cannot overwrite the row", "fine\rFAKE", "fine FAKE"},
		{"invalid UTF-8 is replaced", "a\xffb", "a\ufffdb"},
		{"plain text and non-ASCII letters are kept", "échec: exit 3", "échec: exit 3"},
	}
	for _, c := range attacks {
		t.Run(c.rule, func(t *testing.T) {
			a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: agentsv1alpha1.AgentSpec{Model: c.in}}
			var out bytes.Buffer
			if err := printObjects(&out, agentKind, []client.Object{a}, "wide", false, time.Now()); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), c.want) {
				t.Errorf("table:\n%q\nwant it to contain %q", out.String(), c.want)
			}
			if strings.ContainsAny(out.String(), "\x1b\x07\r\u009b\u202e") {
				t.Errorf("a control character reached the terminal:\n%q", out.String())
			}
		})
	}
}
