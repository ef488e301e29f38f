package toolregistry

import (
	"errors"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

var t0 = metav1.NewTime(proptest.Epoch)

func tool(name string) *omniav1.ToolDefinition {
	return &omniav1.ToolDefinition{Name: name, Description: "does " + name, InputSchema: apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}}
}

func httpH(name, endpoint string) omniav1.HandlerDefinition {
	return omniav1.HandlerDefinition{Name: name, Type: omniav1.HandlerTypeHTTP, Tool: tool(strings.ReplaceAll(name, "-", "_")),
		HTTPConfig: &omniav1.HTTPConfig{Endpoint: endpoint}}
}

func mcpH(name string) omniav1.HandlerDefinition {
	return omniav1.HandlerDefinition{Name: name, Type: omniav1.HandlerTypeMCP,
		MCPConfig: &omniav1.MCPConfig{Transport: omniav1.MCPTransportStdio, Command: "/bin/server"}}
}

func registry(probe bool, hs ...omniav1.HandlerDefinition) *omniav1.ToolRegistry {
	tr := &omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: "ns", Generation: 2},
		Spec: omniav1.ToolRegistrySpec{Handlers: hs}}
	if probe {
		tr.Spec.Probe = &omniav1.ProbeConfig{Enabled: true, Interval: &metav1.Duration{Duration: 20 * time.Second}}
	}
	return tr
}

func wantCond(t *testing.T, conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	if err := ctrltest.ConditionIs(conds, typ, status, reason); err != nil {
		t.Fatal(err)
	}
}

// TestDecide has a case per branch of the ToolRegistry decision: handler
// validation, tools, probing, policy and sandbox conditions, and phase.
func TestDecide(t *testing.T) {
	badMult := httpH("bad", "http://x")
	badMult.HTTPConfig.RetryPolicy = &omniav1.HTTPRetryPolicy{RetryBackoff: omniav1.RetryBackoff{MaxAttempts: 2, BackoffMultiplier: "0.5"}}
	sseNoEndpoint := omniav1.HandlerDefinition{Name: "sse", Type: omniav1.HandlerTypeMCP, MCPConfig: &omniav1.MCPConfig{Transport: omniav1.MCPTransportSSE}}
	clientNoTool := omniav1.HandlerDefinition{Name: "client", Type: omniav1.HandlerTypeClient}
	grpc := omniav1.HandlerDefinition{Name: "rpc", Type: omniav1.HandlerTypeGRPC, Tool: tool("rpc"), GRPCConfig: &omniav1.GRPCConfig{Endpoint: "rpc.local:9000"}}
	client := omniav1.HandlerDefinition{Name: "ask", Type: omniav1.HandlerTypeClient, Tool: tool("ask_user")}
	openapi := omniav1.HandlerDefinition{Name: "pets", Type: omniav1.HandlerTypeOpenAPI, OpenAPIConfig: &omniav1.OpenAPIConfig{SpecURL: "http://pets/openapi.json"}}
	platform := omniav1.HandlerDefinition{Name: "plat", Type: omniav1.HandlerTypePlatform, PlatformConfig: &omniav1.PlatformConfig{Service: "agents", Tools: []string{"list_agents"}}}
	platformBad := omniav1.HandlerDefinition{Name: "plat", Type: omniav1.HandlerTypePlatform, PlatformConfig: &omniav1.PlatformConfig{Service: "nope"}}
	platformBadTool := omniav1.HandlerDefinition{Name: "plat", Type: omniav1.HandlerTypePlatform, PlatformConfig: &omniav1.PlatformConfig{Service: "agents", Tools: []string{"rm_rf"}}}

	cases := []struct {
		name    string
		tr      *omniav1.ToolRegistry
		probes  map[string]error
		phase   omniav1.ToolRegistryPhase
		valid   bool
		tools   []string // name/handler/status
		requeue time.Duration
		errSub  string
	}{
		{name: "backoffMultiplier below 1: Failed, HandlersValid false", tr: registry(false, badMult, mcpH("ok")),
			phase: omniav1.ToolRegistryPhaseFailed, errSub: "backoffMultiplier 0.5 is below 1.0"},
		{name: "sse without endpoint: Failed", tr: registry(false, sseNoEndpoint), phase: omniav1.ToolRegistryPhaseFailed, errSub: "endpoint is required"},
		{name: "client without tool: Failed", tr: registry(false, clientNoTool), phase: omniav1.ToolRegistryPhaseFailed, errSub: "needs tool"},
		{name: "unknown platform service: Failed", tr: registry(false, platformBad), phase: omniav1.ToolRegistryPhaseFailed, errSub: `unknown platform service "nope"`},
		{name: "platform tool the service lacks: Failed", tr: registry(false, platformBadTool), phase: omniav1.ToolRegistryPhaseFailed, errSub: `offers no tool "rm_rf"`},
		{name: "http, grpc, client use the explicit tool definition", tr: registry(false, httpH("weather", "http://w"), grpc, client),
			phase: omniav1.ToolRegistryPhaseReady, valid: true,
			tools: []string{"weather/weather/Available", "rpc/rpc/Available", "ask_user/ask/Available"}},
		{name: "mcp and openapi add a placeholder", tr: registry(false, mcpH("fs"), openapi),
			phase: omniav1.ToolRegistryPhaseReady, valid: true, tools: []string{"fs/fs/Available", "pets/pets/Available"}},
		{name: "platform adds the service's tool list", tr: registry(false, platform),
			phase: omniav1.ToolRegistryPhaseReady, valid: true, tools: []string{"list_agents/plat/Available"}},
		{name: "probing: all reachable → Ready, requeue at the interval", tr: registry(true, httpH("a", "http://a:80")),
			probes: map[string]error{"http://a:80": nil}, phase: omniav1.ToolRegistryPhaseReady, valid: true,
			tools: []string{"a/a/Available"}, requeue: 20 * time.Second},
		{name: "probing: some unreachable → Degraded", tr: registry(true, httpH("a", "http://a:80"), httpH("b", "http://b:80"), client),
			probes: map[string]error{"http://a:80": nil, "http://b:80": errors.New("connection refused")}, phase: omniav1.ToolRegistryPhaseDegraded, valid: true,
			tools: []string{"a/a/Available", "b/b/Unavailable", "ask_user/ask/Available"}, requeue: 20 * time.Second},
		{name: "probing: none reachable → Failed with valid handlers", tr: registry(true, httpH("a", "http://a:80")),
			probes: map[string]error{"http://a:80": errors.New("refused")}, phase: omniav1.ToolRegistryPhaseFailed, valid: true,
			tools: []string{"a/a/Unavailable"}, requeue: 20 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Snapshot{Registry: tc.tr, Probes: tc.probes, Catalog: DefaultPlatformCatalog, Now: t0})
			if d.Status.Phase != tc.phase {
				t.Fatalf("phase %s, want %s (%+v)", d.Status.Phase, tc.phase, d.Status.Conditions)
			}
			if tc.valid {
				wantCond(t, d.Status.Conditions, omniav1.ConditionHandlersValid, metav1.ConditionTrue, omniav1.ReasonHandlersValid)
			} else {
				wantCond(t, d.Status.Conditions, omniav1.ConditionHandlersValid, metav1.ConditionFalse, omniav1.ReasonValidationFailed)
				if c := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionHandlersValid); !strings.Contains(c.Message, tc.errSub) {
					t.Errorf("message %q lacks %q", c.Message, tc.errSub)
				}
			}
			var got []string
			for _, tl := range d.Status.DiscoveredTools {
				got = append(got, tl.Name+"/"+tl.HandlerName+"/"+string(tl.Status))
			}
			if strings.Join(got, ",") != strings.Join(tc.tools, ",") {
				t.Errorf("tools %v, want %v", got, tc.tools)
			}
			if int(d.Status.DiscoveredToolsCount) != len(tc.tools) {
				t.Errorf("count %d", d.Status.DiscoveredToolsCount)
			}
			if d.RequeueAfter != tc.requeue {
				t.Errorf("requeue %s, want %s", d.RequeueAfter, tc.requeue)
			}
			wantCond(t, d.Status.Conditions, omniav1.ConditionToolsDiscovered, metav1.ConditionTrue, omniav1.ReasonToolsDiscovered)
		})
	}
}

// TestDecideWritesOnlyOnChange: without probing, a second pass over the
// result changes nothing.
func TestDecideWritesOnlyOnChange(t *testing.T) {
	tr := registry(false, httpH("a", "http://a"), mcpH("fs"))
	d := Decide(Snapshot{Registry: tr, Catalog: DefaultPlatformCatalog, Now: t0})
	tr.Status = d.Status
	again := Decide(Snapshot{Registry: tr, Catalog: DefaultPlatformCatalog, Now: metav1.NewTime(t0.Add(time.Hour))})
	if again.Changed {
		t.Fatal("an unchanged registry must not be rewritten")
	}
}

func TestPolicyAndSandboxConditions(t *testing.T) {
	sandboxed := mcpH("fs")
	sandboxed.Sandbox = &omniav1.HandlerSandbox{ClassName: "gvisor", ConnectionRefs: []omniav1.LocalObjectReference{{Name: "github"}}}
	tr := registry(false, sandboxed)
	readyClass := &omniav1.SandboxClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Status: omniav1.SandboxClassStatus{Phase: omniav1.SandboxClassPhaseReady},
		Spec: omniav1.SandboxClassSpec{AllowedConnections: []omniav1.LocalObjectReference{{Name: "github"}}}}
	otherClass := readyClass.DeepCopy()
	otherClass.Spec.AllowedConnections = nil
	pendingClass := readyClass.DeepCopy()
	pendingClass.Status.Phase = omniav1.SandboxClassPhasePending
	readyConn := &omniav1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "github"}, Status: omniav1.ConnectionStatus{Phase: omniav1.ConnectionPhaseReady}}
	pendingConn := readyConn.DeepCopy()
	pendingConn.Status.Phase = omniav1.ConnectionPhasePending
	compiled := omniav1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p1", Generation: 1}, Status: omniav1.ToolPolicyStatus{
		Conditions: []metav1.Condition{{Type: omniav1.ConditionCompiled, Status: metav1.ConditionTrue, ObservedGeneration: 1}}}}
	broken := omniav1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p2"}, Status: omniav1.ToolPolicyStatus{Phase: omniav1.ToolPolicyPhaseError}}

	cases := []struct {
		name     string
		policies []omniav1.ToolPolicy
		class    *omniav1.SandboxClass
		conn     *omniav1.Connection
		want     map[string][2]string
	}{
		{name: "nothing exists", want: map[string][2]string{
			omniav1.ConditionPolicyBound:             {"False", omniav1.ReasonNoPolicy},
			omniav1.ConditionSandboxesValid:          {"False", omniav1.ReasonSandboxClassNotFound},
			omniav1.ConditionSandboxConnectionsValid: {"False", omniav1.ReasonConnectionNotFound}}},
		{name: "all good", policies: []omniav1.ToolPolicy{compiled}, class: readyClass, conn: readyConn, want: map[string][2]string{
			omniav1.ConditionPolicyBound:             {"True", omniav1.ReasonPolicyBound},
			omniav1.ConditionSandboxesValid:          {"True", omniav1.ReasonSandboxesValid},
			omniav1.ConditionSandboxConnectionsValid: {"True", omniav1.ReasonConnectionsValid}}},
		{name: "not compiled, not ready", policies: []omniav1.ToolPolicy{compiled, broken}, class: pendingClass, conn: pendingConn, want: map[string][2]string{
			omniav1.ConditionPolicyBound:             {"False", omniav1.ReasonPolicyNotCompiled},
			omniav1.ConditionSandboxesValid:          {"False", omniav1.ReasonSandboxClassNotReady},
			omniav1.ConditionSandboxConnectionsValid: {"False", omniav1.ReasonConnectionNotReady}}},
		{name: "connection not allowed by the class", class: otherClass, conn: readyConn, want: map[string][2]string{
			omniav1.ConditionSandboxConnectionsValid: {"False", omniav1.ReasonConnectionNotAllowed}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := Snapshot{Registry: tr, Policies: tc.policies, Catalog: DefaultPlatformCatalog, Now: t0,
				SandboxClasses: map[string]*omniav1.SandboxClass{}, Connections: map[string]*omniav1.Connection{}}
			if tc.class != nil {
				s.SandboxClasses["gvisor"] = tc.class
			}
			if tc.conn != nil {
				s.Connections["github"] = tc.conn
			}
			d := Decide(s)
			for typ, w := range tc.want {
				wantCond(t, d.Status.Conditions, typ, metav1.ConditionStatus(w[0]), w[1])
			}
		})
	}
	noSandbox := Decide(Snapshot{Registry: registry(false, mcpH("x")), Catalog: DefaultPlatformCatalog, Now: t0})
	wantCond(t, noSandbox.Status.Conditions, omniav1.ConditionSandboxesValid, metav1.ConditionTrue, omniav1.ReasonNoSandboxes)
	wantCond(t, noSandbox.Status.Conditions, omniav1.ConditionSandboxConnectionsValid, metav1.ConditionTrue, omniav1.ReasonNoConnections)
}

func TestDialAddress(t *testing.T) {
	for in, want := range map[string]string{
		"http://svc.ns:8080/x": "svc.ns:8080",
		"https://api.example":  "api.example:443",
		"http://api.example/a": "api.example:80",
		"rpc.local:9000":       "rpc.local:9000",
		"myhost":               "",
	} {
		got, err := DialAddress(in)
		if want == "" {
			if err == nil {
				t.Errorf("%s: want an error, got %s", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
	for _, e := range []string{"client://browser", "stdio:///bin/x", "platform://agents", ""} {
		if Probeable(e) {
			t.Errorf("%q must not be probed", e)
		}
	}
}

// TestProbeInterval: the probe period is spec.probe.interval, never below
// MinProbeInterval, so a registry stored before admission bounded the
// field cannot turn probing into a hot loop of status writes.
func TestProbeInterval(t *testing.T) {
	withInterval := func(d *time.Duration) *omniav1.ToolRegistry {
		tr := registry(true, httpH("a", "http://a:80"))
		tr.Spec.Probe.Interval = nil
		if d != nil {
			tr.Spec.Probe.Interval = &metav1.Duration{Duration: *d}
		}
		return tr
	}
	dur := func(d time.Duration) *time.Duration { return &d }
	cases := []struct {
		name string
		tr   *omniav1.ToolRegistry
		want time.Duration
	}{
		{"unset interval: the default", withInterval(nil), DefaultProbeInterval},
		{"no probe config: the default", registry(false, httpH("a", "http://a:80")), DefaultProbeInterval},
		{"an interval above the minimum is kept", withInterval(dur(5 * time.Minute)), 5 * time.Minute},
		{"the minimum itself is kept", withInterval(dur(MinProbeInterval)), MinProbeInterval},
		{"a millisecond interval is clamped to the minimum", withInterval(dur(time.Millisecond)), MinProbeInterval},
		{"just below the minimum is clamped", withInterval(dur(MinProbeInterval - time.Nanosecond)), MinProbeInterval},
		{"a zero interval: the default", withInterval(dur(0)), DefaultProbeInterval},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ProbeInterval(tc.tr); got != tc.want {
				t.Fatalf("ProbeInterval = %s, want %s", got, tc.want)
			}
		})
	}
	// The timer Decide asks for is the clamped period.
	d := Decide(Snapshot{Registry: withInterval(dur(time.Millisecond)), Probes: map[string]error{"http://a:80": nil}, Catalog: DefaultPlatformCatalog, Now: t0})
	if d.RequeueAfter != MinProbeInterval {
		t.Fatalf("requeue %s, want %s", d.RequeueAfter, MinProbeInterval)
	}
}
