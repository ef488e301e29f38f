package toolregistry

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

// TestDecideProperties checks Decide on random registries, in every
// combination of handler kinds, probe settings and results, policies,
// sandbox classes, connections and stored statuses (including statuses
// this controller never writes):
//
//   - no input makes it panic, and it leaves its input as it was;
//   - the same input gives the same decision;
//   - it asks for a timer only while probing, never under MinProbeInterval;
//   - its status, stored and decided on again later, needs no write
//     without probing; with probing only the round's check times change;
//   - the phase follows the tools (Ready all available, Degraded some,
//     Failed none or an invalid handler), every condition of the registry
//     is set for the current generation, and Changed is true exactly when
//     the status differs from the stored one (times aside) or a probe
//     round ran.
func TestDecideProperties(t *testing.T) {
	pt.RunCounted(t, genSnapshot, fresh, Decide, sameDecision, countOutcomes, checkTimer, checkStatus, checkFixedPoint).
		Require(t, 0.02, "phase Ready", "phase Degraded", "phase Failed", "probing", "status write", "no status write",
			"HandlersValid False", "PolicyBound False", "SandboxesValid False", "SandboxConnectionsValid False")
}

// countOutcomes counts what a decision reached, for Require: its phase,
// probing, the status write and each condition it left False.
func countOutcomes(c pt.Counts, s Snapshot, d Decision) {
	c.Add("phase " + string(d.Status.Phase))
	if Probing(s.Registry) {
		c.Add("probing")
	}
	c.AddWrite(d.Changed)
	for _, cond := range d.Status.Conditions {
		if cond.Status == metav1.ConditionFalse {
			c.Add(cond.Type + " False")
		}
	}
}

// checkTimer: a timer only while probing, never under MinProbeInterval.
func checkTimer(_ *rand.Rand, s Snapshot, d Decision) error {
	probing := Probing(s.Registry)
	switch {
	case probing && d.RequeueAfter < MinProbeInterval:
		return fmt.Errorf("probing requeues after %s, under %s", d.RequeueAfter, MinProbeInterval)
	case !probing && d.RequeueAfter != 0:
		return fmt.Errorf("not probing yet requeues after %s", d.RequeueAfter)
	}
	return nil
}

// fresh copies the registry, the part of a snapshot Decide could write.
func fresh(s Snapshot) Snapshot {
	s.Registry = s.Registry.DeepCopy()
	return s
}

func sameDecision(a, b Decision) bool {
	return equality.Semantic.DeepEqual(a.Status, b.Status) && a.Changed == b.Changed && a.RequeueAfter == b.RequeueAfter
}

// checkStatus holds the decided status to what the phase and conditions
// promise.
func checkStatus(_ *rand.Rand, s Snapshot, d Decision) error {
	st := d.Status
	gen := s.Registry.Generation
	if st.ObservedGeneration != gen {
		return fmt.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, gen)
	}
	for _, typ := range []string{omniav1.ConditionHandlersValid, omniav1.ConditionToolsDiscovered, omniav1.ConditionPolicyBound,
		omniav1.ConditionSandboxesValid, omniav1.ConditionSandboxConnectionsValid} {
		c := meta.FindStatusCondition(st.Conditions, typ)
		if c == nil || c.ObservedGeneration != gen || c.Reason == "" {
			return fmt.Errorf("condition %s = %+v, want it set for generation %d", typ, c, gen)
		}
	}
	if int(st.DiscoveredToolsCount) != len(st.DiscoveredTools) {
		return fmt.Errorf("discoveredToolsCount %d for %d tools", st.DiscoveredToolsCount, len(st.DiscoveredTools))
	}
	available := 0
	for _, tool := range st.DiscoveredTools {
		switch tool.Status {
		case omniav1.ToolStatusAvailable:
			available++
		case omniav1.ToolStatusUnavailable:
			if tool.Error == nil || !Probing(s.Registry) {
				return fmt.Errorf("tool %s Unavailable without a probe failure", tool.Name)
			}
		default:
			return fmt.Errorf("tool %s has status %q", tool.Name, tool.Status)
		}
	}
	valid := meta.IsStatusConditionTrue(st.Conditions, omniav1.ConditionHandlersValid)
	var want omniav1.ToolRegistryPhase
	switch {
	case !valid || available == 0:
		want = omniav1.ToolRegistryPhaseFailed
	case available == len(st.DiscoveredTools):
		want = omniav1.ToolRegistryPhaseReady
	default:
		want = omniav1.ToolRegistryPhaseDegraded
	}
	if st.Phase != want {
		return fmt.Errorf("phase %s with %d of %d tools available (handlers valid: %v), want %s", st.Phase, available, len(st.DiscoveredTools), valid, want)
	}
	if !valid && len(st.DiscoveredTools) > 0 {
		return errors.New("an invalid registry lists tools")
	}
	if differs := !equality.Semantic.DeepEqual(withoutTimes(st), withoutTimes(s.Registry.Status)); d.Changed != (differs || Probing(s.Registry)) {
		return fmt.Errorf("changed %v, but the status differs (times aside): %v", d.Changed, differs)
	}
	return nil
}

// checkFixedPoint stores the decided status, as the reconciler writes it,
// and decides again a while later on the same spec and objects.
func checkFixedPoint(r *rand.Rand, s Snapshot, d Decision) error {
	old, _ := pt.Stored(s.Registry.Status) // what the pass left, when it wrote nothing
	stored, err := pt.Written(d.Status, old, d.Changed)
	if err != nil {
		return err
	}
	s2 := fresh(s)
	s2.Registry.Status, s2.Now = stored, pt.Later(r, s.Now, time.Hour)
	d2 := Decide(s2)
	if !Probing(s.Registry) {
		if d2.Changed || !equality.Semantic.DeepEqual(d2.Status, stored) {
			return fmt.Errorf("the written status needs another write: %s", pt.Diff(stored, d2.Status))
		}
		return nil
	}
	if !equality.Semantic.DeepEqual(withoutTimes(d2.Status), withoutTimes(stored)) {
		return fmt.Errorf("a probe round with the same results changes more than its check times: %s", pt.Diff(withoutTimes(stored), withoutTimes(d2.Status)))
	}
	return nil
}

// withoutTimes drops the times a probe round records.
func withoutTimes(st omniav1.ToolRegistryStatus) omniav1.ToolRegistryStatus {
	st = *st.DeepCopy()
	st.LastDiscoveryTime = nil
	for i := range st.DiscoveredTools {
		st.DiscoveredTools[i].LastChecked = nil
	}
	return st
}

// genSnapshot draws a registry (valid per the CRD, with the occasional
// object stored before a CEL rule existed), the objects its conditions
// read, probe results and a stored status.
func genSnapshot(r *rand.Rand) Snapshot {
	tr := &omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: "ns", Generation: int64(1 + r.IntN(4))}}
	names := r.Perm(8)[:1+r.IntN(5)]
	for _, n := range names {
		tr.Spec.Handlers = append(tr.Spec.Handlers, genHandler(r, fmt.Sprintf("h%d", n)))
	}
	if pt.Chance(r, 0.5) {
		tr.Spec.Probe = &omniav1.ProbeConfig{Enabled: pt.Chance(r, 0.8)}
		if pt.Chance(r, 0.7) {
			iv := MinProbeInterval + pt.Duration(r)
			if pt.Chance(r, 0.1) {
				iv = pt.Duration(r) // stored before admission refused short intervals
			}
			tr.Spec.Probe.Interval = &metav1.Duration{Duration: iv}
		}
		if pt.Chance(r, 0.5) {
			tr.Spec.Probe.Timeout = &metav1.Duration{Duration: pt.Duration(r)}
		}
	}
	s := Snapshot{Registry: tr, Catalog: DefaultPlatformCatalog, Now: pt.MetaTime(r),
		SandboxClasses: map[string]*omniav1.SandboxClass{}, Connections: map[string]*omniav1.Connection{}}
	for i := range r.IntN(4) {
		p := omniav1.ToolPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pol%d", i), Namespace: "ns", Generation: int64(1 + r.IntN(3))},
			Spec: omniav1.ToolPolicySpec{Selector: omniav1.ToolPolicySelector{Registry: "tools"}}}
		p.Status.Phase = pt.Pick(r, omniav1.ToolPolicyPhaseActive, omniav1.ToolPolicyPhaseError, "")
		p.Status.Conditions = pt.Conditions(r, 0.6, omniav1.ConditionCompiled)
		s.Policies = append(s.Policies, p)
	}
	for _, n := range tr.Spec.SandboxClassNames() {
		if pt.Chance(r, 0.15) {
			continue // not found
		}
		c := &omniav1.SandboxClass{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "ns"}}
		c.Status.Phase = pt.Pick(r, omniav1.SandboxClassPhaseReady, omniav1.SandboxClassPhaseReady, omniav1.SandboxClassPhasePending, omniav1.SandboxClassPhaseFailed, "")
		c.Status.Conditions = pt.Conditions(r, 0.3, omniav1.ConditionReady)
		if pt.Chance(r, 0.3) {
			c.Spec.Network = &omniav1.SandboxNetwork{Egress: pt.Pick(r, omniav1.SandboxEgressNone, omniav1.SandboxEgressConnections, omniav1.SandboxEgressUnrestricted)}
		}
		for _, cn := range connPool {
			if pt.Chance(r, 0.7) {
				c.Spec.AllowedConnections = append(c.Spec.AllowedConnections, omniav1.LocalObjectReference{Name: cn})
			}
		}
		s.SandboxClasses[n] = c
	}
	for _, n := range tr.Spec.ConnectionNames() {
		if pt.Chance(r, 0.15) {
			continue
		}
		c := &omniav1.Connection{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "ns"}}
		c.Status.Phase = pt.Pick(r, omniav1.ConnectionPhaseReady, omniav1.ConnectionPhaseReady, omniav1.ConnectionPhasePending, omniav1.ConnectionPhaseFailed, "")
		c.Status.Conditions = pt.Conditions(r, 0.3, omniav1.ConditionReady)
		s.Connections[n] = c
	}
	if Probing(tr) {
		s.Probes = map[string]error{}
		for i := range tr.Spec.Handlers {
			if e := Endpoint(&tr.Spec.Handlers[i]); Probeable(e) {
				switch r.IntN(3) {
				case 0:
					s.Probes[e] = nil
				case 1:
					s.Probes[e] = pt.Pick(r, errors.New("connection refused"), errors.New("i/o timeout"))
				} // else not probed this round
			}
		}
	}
	tr.Status = genStatus(r, s)
	s.Registry = pt.Cached(tr)
	return s
}

var connPool = []string{"github", "slack", "db"}

// genHandler draws one handler of any type.
func genHandler(r *rand.Rand, name string) omniav1.HandlerDefinition {
	h := omniav1.HandlerDefinition{Name: name, Type: pt.Pick(r, omniav1.HandlerTypeHTTP, omniav1.HandlerTypeOpenAPI, omniav1.HandlerTypeGRPC,
		omniav1.HandlerTypeMCP, omniav1.HandlerTypeClient, omniav1.HandlerTypePlatform)}
	legacy := pt.Chance(r, 0.08) // an object stored before a CEL rule existed
	tool := &omniav1.ToolDefinition{Name: "t_" + name, Description: "does " + name, InputSchema: apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}}
	endpoint := pt.Pick(r, "http://a:80", "http://b:8080/x", "https://c", "d.local:9000")
	switch h.Type {
	case omniav1.HandlerTypeHTTP:
		h.Tool = tool
		h.HTTPConfig = &omniav1.HTTPConfig{Endpoint: endpoint, RetryPolicy: genHTTPRetry(r, legacy)}
		if pt.Chance(r, 0.2) {
			h.HTTPConfig.Endpoint, h.HTTPConfig.URLTemplate = "", endpoint+"/{id}"
		}
	case omniav1.HandlerTypeGRPC:
		h.Tool = tool
		h.GRPCConfig = &omniav1.GRPCConfig{Endpoint: pt.Pick(r, "rpc.local:9000", "d.local:9000")}
		if b := genBackoff(r, legacy); b != nil {
			h.GRPCConfig.RetryPolicy = &omniav1.GRPCRetryPolicy{RetryBackoff: *b}
		}
	case omniav1.HandlerTypeMCP:
		h.MCPConfig = &omniav1.MCPConfig{Transport: pt.Pick(r, omniav1.MCPTransportStdio, omniav1.MCPTransportSSE, omniav1.MCPTransportStreamableHTTP)}
		if h.MCPConfig.Transport == omniav1.MCPTransportStdio {
			h.MCPConfig.Command = "/bin/server"
			if pt.Chance(r, 0.5) {
				h.Sandbox = &omniav1.HandlerSandbox{ClassName: pt.Pick(r, "gvisor", "kata")}
				for _, cn := range connPool {
					if pt.Chance(r, 0.4) {
						h.Sandbox.ConnectionRefs = append(h.Sandbox.ConnectionRefs, omniav1.LocalObjectReference{Name: cn})
					}
				}
			}
		} else {
			h.MCPConfig.Endpoint = endpoint
		}
		if b := genBackoff(r, legacy); b != nil {
			h.MCPConfig.RetryPolicy = &omniav1.MCPRetryPolicy{RetryBackoff: *b}
		}
		if legacy && pt.Chance(r, 0.5) {
			h.MCPConfig.Command, h.MCPConfig.Endpoint = "", ""
		}
	case omniav1.HandlerTypeOpenAPI:
		h.OpenAPIConfig = &omniav1.OpenAPIConfig{SpecURL: endpoint + "/openapi.json", RetryPolicy: genHTTPRetry(r, legacy)}
	case omniav1.HandlerTypeClient:
		h.Tool = tool
	case omniav1.HandlerTypePlatform:
		h.PlatformConfig = &omniav1.PlatformConfig{Service: pt.Pick(r, "agents", "agents", "agents", "billing")}
		for _, n := range []string{"list_agents", "get_agent_run", "rm_rf"} {
			if pt.Chance(r, 0.3) {
				h.PlatformConfig.Tools = append(h.PlatformConfig.Tools, n)
			}
		}
	}
	if legacy && h.Tool != nil && pt.Chance(r, 0.5) {
		h.Tool = nil
	}
	if pt.Chance(r, 0.3) {
		h.Auth = &omniav1.ToolAuth{Type: pt.Pick(r, omniav1.ToolAuthNone, omniav1.ToolAuthBearer, omniav1.ToolAuthBasic)}
		if h.Auth.Type != omniav1.ToolAuthNone && (!legacy || pt.Chance(r, 0.5)) {
			h.Auth.SecretRef = &omniav1.SecretKeyRef{Name: "creds"}
		}
	}
	return h
}

func genHTTPRetry(r *rand.Rand, legacy bool) *omniav1.HTTPRetryPolicy {
	b := genBackoff(r, legacy)
	if b == nil {
		return nil
	}
	return &omniav1.HTTPRetryPolicy{RetryBackoff: *b}
}

// genBackoff draws a retry backoff; a legacy one may break the CEL rules
// (multiplier under 1, maxBackoff under initialBackoff).
func genBackoff(r *rand.Rand, legacy bool) *omniav1.RetryBackoff {
	if !pt.Chance(r, 0.3) {
		return nil
	}
	b := &omniav1.RetryBackoff{MaxAttempts: int32(1 + r.IntN(10))}
	if pt.Chance(r, 0.5) {
		b.BackoffMultiplier = pt.Pick(r, "1", "1.5", "2.0")
		if legacy {
			b.BackoffMultiplier = pt.Pick(r, "0.5", "0")
		}
	}
	if pt.Chance(r, 0.5) {
		b.InitialBackoff = &metav1.Duration{Duration: pt.Duration(r)}
	}
	if pt.Chance(r, 0.5) {
		b.MaxBackoff = &metav1.Duration{Duration: pt.Duration(r)}
		if b.InitialBackoff != nil && b.MaxBackoff.Duration < b.InitialBackoff.Duration && !legacy {
			b.MaxBackoff, b.InitialBackoff = b.InitialBackoff, b.MaxBackoff
		}
	}
	return b
}

// genStatus draws a stored status: none, a random one, or what an earlier
// pass decided (for this spec or an older generation, with other probe
// results), so the "nothing changed" paths are reached too.
func genStatus(r *rand.Rand, s Snapshot) omniav1.ToolRegistryStatus {
	switch r.IntN(4) {
	case 0:
		return omniav1.ToolRegistryStatus{}
	case 1:
		st := omniav1.ToolRegistryStatus{
			Phase:              pt.Pick(r, omniav1.ToolRegistryPhasePending, omniav1.ToolRegistryPhaseReady, omniav1.ToolRegistryPhaseDegraded, omniav1.ToolRegistryPhaseFailed),
			ObservedGeneration: int64(r.IntN(4)),
			LastDiscoveryTime:  pt.MaybeTime(r, 0.5),
			Conditions: pt.Conditions(r, 0.5, omniav1.ConditionHandlersValid, omniav1.ConditionToolsDiscovered, omniav1.ConditionPolicyBound,
				omniav1.ConditionSandboxesValid, omniav1.ConditionSandboxConnectionsValid, "SomeOtherCondition"),
		}
		for i := range r.IntN(3) {
			st.DiscoveredTools = append(st.DiscoveredTools, omniav1.DiscoveredTool{Name: fmt.Sprintf("t_h%d", i), HandlerName: fmt.Sprintf("h%d", i),
				Status: pt.Pick(r, omniav1.ToolStatusAvailable, omniav1.ToolStatusUnavailable, omniav1.ToolStatusUnknown), LastChecked: pt.MaybeTime(r, 0.5)})
		}
		st.DiscoveredToolsCount = int32(r.IntN(4))
		return st
	}
	prev := s
	prev.Registry = s.Registry.DeepCopy()
	pt.Earlier(r, &prev.Now, prev.Registry)
	if prev.Probes != nil && pt.Chance(r, 0.3) {
		prev.Probes = map[string]error{}
	}
	return Decide(prev).Status
}
