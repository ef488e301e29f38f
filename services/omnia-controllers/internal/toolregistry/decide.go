// Package toolregistry is the ToolRegistry controller. Discovery reads the
// handler definitions, never the cluster: explicit tools for http, grpc and
// client handlers, a placeholder for self-describing mcp and openapi
// handlers, the service's tool list for platform handlers. Optional TCP
// probing marks tools Unavailable. The policy and sandbox conditions are
// judged against the ToolPolicies, SandboxClasses and Connections of the
// namespace. Decide is pure; Reconciler gathers, probes and writes.
package toolregistry

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// DefaultProbeInterval is the probe period when spec.probe.interval is
// unset or not positive.
const DefaultProbeInterval = 60 * time.Second

// DefaultProbeTimeout bounds one TCP connection attempt.
const DefaultProbeTimeout = 5 * time.Second

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Registry is the ToolRegistry being reconciled.
	Registry *omniav1.ToolRegistry
	// Policies are the ToolPolicies of the namespace selecting the registry.
	Policies []omniav1.ToolPolicy
	// SandboxClasses maps each class name the handlers use to the object,
	// nil when it does not exist.
	SandboxClasses map[string]*omniav1.SandboxClass
	// Connections maps each connection name the handlers use to the object,
	// nil when it does not exist.
	Connections map[string]*omniav1.Connection
	// Probes maps a probed endpoint to its failure (nil: reachable). Empty
	// when probing is off.
	Probes map[string]error
	// Catalog lists the platform services' tools.
	Catalog PlatformCatalog
	// Now stamps times.
	Now metav1.Time
}

// Decision is the desired status and whether to come back on a timer.
type Decision struct {
	// Status is the complete desired status.
	Status omniav1.ToolRegistryStatus
	// Changed reports whether Status differs from the stored one (times of
	// discovery and checks aside). While probing it is always true: a
	// probe round records when it checked the tools.
	Changed bool
	// RequeueAfter is the probe interval when probing is on, else zero:
	// probing is the only timer of this controller.
	RequeueAfter time.Duration
}

// Probing reports whether spec.probe turns probing on.
func Probing(tr *omniav1.ToolRegistry) bool { return tr.Spec.Probe != nil && tr.Spec.Probe.Enabled }

// MinProbeInterval is the shortest probe period. A probe round can write
// the registry's status, and every status change reaches each agent that
// uses the registry, so a period of milliseconds would be a hot loop of
// writes fanning out across the namespace. Admission refuses a shorter
// spec.probe.interval; ProbeInterval clamps one stored before that rule.
const MinProbeInterval = 10 * time.Second

// ProbeInterval is the configured probe period, at least MinProbeInterval.
func ProbeInterval(tr *omniav1.ToolRegistry) time.Duration {
	if p := tr.Spec.Probe; p != nil && p.Interval != nil && p.Interval.Duration > 0 {
		return max(p.Interval.Duration, MinProbeInterval)
	}
	return DefaultProbeInterval
}

// ProbeTimeout is the configured dial timeout.
func ProbeTimeout(tr *omniav1.ToolRegistry) time.Duration {
	if p := tr.Spec.Probe; p != nil && p.Timeout != nil && p.Timeout.Duration > 0 {
		return p.Timeout.Duration
	}
	return DefaultProbeTimeout
}

// Decide computes a ToolRegistry's status.
func Decide(s Snapshot) Decision {
	tr := s.Registry
	st := tr.Status.DeepCopy()
	st.ObservedGeneration = tr.Generation
	gen, now := tr.Generation, s.Now
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		kubeutil.SetCondition(&st.Conditions, gen, now, typ, status, reason, msg)
	}

	tools, errs := DiscoverTools(&tr.Spec, s.Catalog)
	if len(errs) > 0 {
		set(omniav1.ConditionHandlersValid, metav1.ConditionFalse, omniav1.ReasonValidationFailed,
			truncate.String("Handler validation errors: ["+strings.Join(errs, "; ")+"]", 4096))
	} else {
		set(omniav1.ConditionHandlersValid, metav1.ConditionTrue, omniav1.ReasonHandlersValid,
			fmt.Sprintf("all %d handler(s) are valid", len(tr.Spec.Handlers)))
	}
	probing := Probing(tr)
	available := 0
	for i := range tools {
		t := &tools[i]
		t.Status = omniav1.ToolStatusAvailable
		if probing && Probeable(t.Endpoint) {
			if err, probed := s.Probes[t.Endpoint]; probed && err != nil {
				t.Status = omniav1.ToolStatusUnavailable
				t.Error = ptr("probe failed: " + err.Error())
			}
		}
		if t.Status == omniav1.ToolStatusAvailable {
			available++
		}
	}
	switch {
	case len(errs) > 0, available == 0:
		st.Phase = omniav1.ToolRegistryPhaseFailed
	case available == len(tools):
		st.Phase = omniav1.ToolRegistryPhaseReady
	default:
		st.Phase = omniav1.ToolRegistryPhaseDegraded
	}
	set(omniav1.ConditionToolsDiscovered, metav1.ConditionTrue, omniav1.ReasonToolsDiscovered,
		fmt.Sprintf("Discovered %d tool(s) from %d handler(s), %d available", len(tools), len(tr.Spec.Handlers)-len(errs), available))
	policyBound(s, set)
	sandboxes(s, set)
	connections(s, set)

	// Carry the previous check times over when nothing else changed, so an
	// unprobed registry is written once per spec change and not per pass.
	prev := tr.Status.DeepCopy()
	setTimes(tools, prev.DiscoveredTools)
	st.DiscoveredTools = tools
	st.DiscoveredToolsCount = int32(len(tools))
	st.LastDiscoveryTime = prev.LastDiscoveryTime
	changed := !equality.Semantic.DeepEqual(*st, tr.Status) || probing
	if changed {
		st.LastDiscoveryTime = &now
		for i := range st.DiscoveredTools {
			st.DiscoveredTools[i].LastChecked = &now
		}
	}
	d := Decision{Status: *st, Changed: changed}
	if probing {
		d.RequeueAfter = ProbeInterval(tr)
	}
	return d
}

// DiscoverTools lists the tools of a registry's spec, before probing, and
// the validation error of each invalid handler. An invalid registry offers
// nothing: with any error the list is empty. It reads the spec alone, so
// the AgentRuntime controller, which hands the tools to the agent's pods,
// gets from it what this controller lists in status.discoveredTools for
// the same spec, without waiting for that status.
func DiscoverTools(spec *omniav1.ToolRegistrySpec, catalog PlatformCatalog) ([]omniav1.DiscoveredTool, []string) {
	var errs []string
	var tools []omniav1.DiscoveredTool
	for i := range spec.Handlers {
		h := &spec.Handlers[i]
		if err := ValidateHandler(h, catalog); err != nil {
			errs = append(errs, fmt.Sprintf("handler %q: %v", h.Name, err))
			continue
		}
		tools = append(tools, HandlerTools(h, catalog)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return tools, nil
}

// setTimes copies lastChecked from the previous tools with the same handler
// and name, so unchanged tools compare equal.
func setTimes(tools, prev []omniav1.DiscoveredTool) {
	for i := range tools {
		for j := range prev {
			if prev[j].HandlerName == tools[i].HandlerName && prev[j].Name == tools[i].Name {
				tools[i].LastChecked = prev[j].LastChecked
			}
		}
	}
}

// HandlerTools lists the tools a valid handler contributes, before probing.
func HandlerTools(h *omniav1.HandlerDefinition, catalog PlatformCatalog) []omniav1.DiscoveredTool {
	switch {
	case h.HasExplicitTool():
		return []omniav1.DiscoveredTool{{
			Name: h.Tool.Name, HandlerName: h.Name, Description: h.Tool.Description,
			InputSchema: h.Tool.InputSchema.DeepCopy(), OutputSchema: h.Tool.OutputSchema.DeepCopy(),
			Endpoint: Endpoint(h),
		}}
	case h.IsSelfDescribing():
		return []omniav1.DiscoveredTool{{
			Name: h.Name, HandlerName: h.Name,
			Description: fmt.Sprintf("Self-describing %s handler (tools discovered at runtime)", h.Type),
			Endpoint:    Endpoint(h),
		}}
	case h.Type == omniav1.HandlerTypePlatform:
		list, _ := platformTools(h, catalog)
		out := make([]omniav1.DiscoveredTool, 0, len(list))
		for _, t := range list {
			out = append(out, omniav1.DiscoveredTool{Name: t.Name, HandlerName: h.Name, Description: t.Description,
				InputSchema: rawJSON(t.InputSchema), Endpoint: Endpoint(h)})
		}
		return out
	}
	return nil
}

// Endpoint is a handler's resolved backend address.
func Endpoint(h *omniav1.HandlerDefinition) string {
	switch h.Type {
	case omniav1.HandlerTypeHTTP:
		if h.HTTPConfig.Endpoint != "" {
			return h.HTTPConfig.Endpoint
		}
		return h.HTTPConfig.URLTemplate
	case omniav1.HandlerTypeGRPC:
		return h.GRPCConfig.Endpoint
	case omniav1.HandlerTypeMCP:
		if h.MCPConfig.Transport == omniav1.MCPTransportStdio {
			return "stdio://" + h.MCPConfig.Command
		}
		return h.MCPConfig.Endpoint
	case omniav1.HandlerTypeOpenAPI:
		return h.OpenAPIConfig.SpecURL
	case omniav1.HandlerTypeClient:
		return "client://browser"
	case omniav1.HandlerTypePlatform:
		return "platform://" + h.PlatformConfig.Service
	}
	return ""
}

func policyBound(s Snapshot, set func(string, metav1.ConditionStatus, string, string)) {
	if len(s.Policies) == 0 {
		set(omniav1.ConditionPolicyBound, metav1.ConditionFalse, omniav1.ReasonNoPolicy, "no ToolPolicy selects this registry")
		return
	}
	var bound, notCompiled []string
	for i := range s.Policies {
		p := &s.Policies[i]
		if compiled(p) {
			bound = append(bound, p.Name)
		} else {
			notCompiled = append(notCompiled, p.Name)
		}
	}
	sort.Strings(bound)
	sort.Strings(notCompiled)
	if len(notCompiled) > 0 {
		set(omniav1.ConditionPolicyBound, metav1.ConditionFalse, omniav1.ReasonPolicyNotCompiled,
			"ToolPolicy "+strings.Join(notCompiled, ", ")+" selects this registry but has not compiled")
		return
	}
	set(omniav1.ConditionPolicyBound, metav1.ConditionTrue, omniav1.ReasonPolicyBound, "bound to ToolPolicy "+strings.Join(bound, ", "))
}

// compiled: the policy's Compiled condition is True for its current
// generation, or its phase is Active.
func compiled(p *omniav1.ToolPolicy) bool {
	if c := meta.FindStatusCondition(p.Status.Conditions, omniav1.ConditionCompiled); c != nil {
		return c.Status == metav1.ConditionTrue && (c.ObservedGeneration == 0 || c.ObservedGeneration == p.Generation)
	}
	return p.Status.Phase == omniav1.ToolPolicyPhaseActive
}

// ready reports a Ready phase or a True Ready condition.
func ready(phase string, conds []metav1.Condition) bool {
	return phase == "Ready" || meta.IsStatusConditionTrue(conds, omniav1.ConditionReady)
}

func sandboxes(s Snapshot, set func(string, metav1.ConditionStatus, string, string)) {
	names := s.Registry.Spec.SandboxClassNames()
	if len(names) == 0 {
		set(omniav1.ConditionSandboxesValid, metav1.ConditionTrue, omniav1.ReasonNoSandboxes, "no handler runs in a sandbox")
		return
	}
	var missing, notReady []string
	for _, n := range names {
		c := s.SandboxClasses[n]
		switch {
		case c == nil:
			missing = append(missing, n)
		case !ready(string(c.Status.Phase), c.Status.Conditions):
			notReady = append(notReady, n)
		}
	}
	switch {
	case len(missing) > 0:
		set(omniav1.ConditionSandboxesValid, metav1.ConditionFalse, omniav1.ReasonSandboxClassNotFound, "SandboxClass not found: "+strings.Join(missing, ", "))
	case len(notReady) > 0:
		set(omniav1.ConditionSandboxesValid, metav1.ConditionFalse, omniav1.ReasonSandboxClassNotReady, "SandboxClass not Ready: "+strings.Join(notReady, ", "))
	default:
		set(omniav1.ConditionSandboxesValid, metav1.ConditionTrue, omniav1.ReasonSandboxesValid, "every SandboxClass exists and is Ready: "+strings.Join(names, ", "))
	}
}

func connections(s Snapshot, set func(string, metav1.ConditionStatus, string, string)) {
	if len(s.Registry.Spec.ConnectionNames()) == 0 {
		set(omniav1.ConditionSandboxConnectionsValid, metav1.ConditionTrue, omniav1.ReasonNoConnections, "no sandboxed handler names a Connection")
		return
	}
	var missing, notReady, notAllowed []string
	for i := range s.Registry.Spec.Handlers {
		h := &s.Registry.Spec.Handlers[i]
		if h.Sandbox == nil {
			continue
		}
		class := s.SandboxClasses[h.Sandbox.ClassName]
		for _, ref := range h.Sandbox.ConnectionRefs {
			c := s.Connections[ref.Name]
			switch {
			case c == nil:
				missing = append(missing, ref.Name)
			case !ready(string(c.Status.Phase), c.Status.Conditions):
				notReady = append(notReady, ref.Name)
			case class != nil && !class.Spec.AllowsConnection(ref.Name):
				notAllowed = append(notAllowed, fmt.Sprintf("%s (handler %s, SandboxClass %s)", ref.Name, h.Name, class.Name))
			}
		}
	}
	switch {
	case len(missing) > 0:
		set(omniav1.ConditionSandboxConnectionsValid, metav1.ConditionFalse, omniav1.ReasonConnectionNotFound, "Connection not found: "+strings.Join(uniq(missing), ", "))
	case len(notReady) > 0:
		set(omniav1.ConditionSandboxConnectionsValid, metav1.ConditionFalse, omniav1.ReasonConnectionNotReady, "Connection not Ready: "+strings.Join(uniq(notReady), ", "))
	case len(notAllowed) > 0:
		set(omniav1.ConditionSandboxConnectionsValid, metav1.ConditionFalse, omniav1.ReasonConnectionNotAllowed, "Connection not allowed by its SandboxClass: "+strings.Join(notAllowed, ", "))
	default:
		set(omniav1.ConditionSandboxConnectionsValid, metav1.ConditionTrue, omniav1.ReasonConnectionsValid, "every Connection exists, is Ready and is allowed")
	}
}

func uniq(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }
