// Package agentruntime is the AgentRuntime controller. It resolves the
// PromptPack, the optional ToolRegistry and the Providers first and builds
// nothing until every input is usable; then it writes the Deployment,
// Service and, when autoscaling is on, the HorizontalPodAutoscaler, from
// inputs gathered in full beforehand so the pod template changes only when
// an input does. decide (with Resolve and the builders) is pure: it turns
// a snapshot of the agent, its references and the objects it owns into a
// plan of writes; Reconciler reads the snapshot and makes the writes.
package agentruntime

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/promptpack"
)

// Inputs are the referenced objects of one AgentRuntime, as read.
type Inputs struct {
	// Agent is the AgentRuntime.
	Agent *omniav1.AgentRuntime
	// Packs are the PromptPacks of the agent's namespace whose packName is
	// promptPackRef.name.
	Packs []omniav1.PromptPack
	// Registry is the referenced ToolRegistry; nil when not set, missing or
	// in another namespace.
	Registry *omniav1.ToolRegistry
	// ToolPolicies are the ToolPolicies of the agent's namespace that
	// select Registry; they go into the agent's tools file.
	ToolPolicies []omniav1.ToolPolicy
	// Providers maps "<ns>/<name>" of each providerRef to the Provider;
	// a nil value means it does not exist.
	Providers map[string]*omniav1.Provider
	// Secrets maps the name of each Secret the Providers read (their
	// credential and platform credentials, providerSecretNames) to the
	// Secret (nil when missing); its data feeds the config hash so a
	// rotated key rolls the pods. The Secrets the registry's handlers
	// authenticate with are here too, only to be judged usable (tools.go).
	Secrets map[string]*corev1.Secret
	// Workspace is the Workspace that owns the agent's namespace
	// (NamespaceWorkspace); nil for the many namespaces without one. Its
	// name, runtime defaults and service-group autoscaling shape the pods.
	Workspace *omniav1.Workspace
	// SkillSources are the SkillSources the pack versions name, by name;
	// a nil value means it does not exist. The resolved pack's skills are
	// judged against them (skills.go).
	SkillSources map[string]*omniav1.SkillSource
	// SessionPolicies and MemoryPolicies are the namespace's policies of
	// each kind; the one in force for the agent reaches its pods
	// (policies.go).
	SessionPolicies []omniav1.SessionRetentionPolicy
	MemoryPolicies  []omniav1.MemoryPolicy
}

// ResolvedProvider is one usable providers entry.
type ResolvedProvider struct {
	// Ref is the agent's entry.
	Ref omniav1.NamedProviderRef
	// Provider is the Provider it names.
	Provider *omniav1.Provider
}

// Resolution is the outcome of resolving an agent's references.
type Resolution struct {
	// Usable is true when every input can be used; only then is anything
	// built.
	Usable bool
	// Phase is set when not usable: Failed or Pending.
	Phase omniav1.AgentRuntimePhase
	// Retry is the reconcile error: a reference to an object that does not
	// exist is retried with backoff. Spec problems and waits leave it nil.
	Retry error
	// Pack is the resolved PromptPack.
	Pack *omniav1.PromptPack
	// Registry is the usable ToolRegistry, nil to run without tools.
	Registry *omniav1.ToolRegistry
	// Tools is what the pods get of Registry (tools.go); nil without one.
	Tools *ToolSet
	// Skills is what the pods get of the pack's skills (skills.go); nil
	// when the pack declares none.
	Skills *SkillSet
	// Providers are the usable providers in spec order.
	Providers []ResolvedProvider
	// Events to emit (Warning), once per condition transition.
	Events []Event
}

// Event is a Warning event the resolution asks for.
type Event struct {
	// Reason is the event reason.
	Reason string
	// Message is the note.
	Message string
}

type resolver struct {
	in    Inputs
	conds *[]metav1.Condition
	now   metav1.Time
	res   Resolution
}

func (r *resolver) set(typ string, status metav1.ConditionStatus, reason, msg string) bool {
	old := meta.FindStatusCondition(*r.conds, typ)
	changed := old == nil || old.Status != status || old.Reason != reason || old.Message != msg
	meta.SetStatusCondition(r.conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: r.in.Agent.Generation, LastTransitionTime: r.now})
	return changed
}

// Resolve judges the agent's references in order — PromptPack, then
// ToolRegistry, then Providers (docs/omnia-controllers.md) — recording a
// condition for each and stopping at the first input that blocks.
func Resolve(in Inputs, conds *[]metav1.Condition, now metav1.Time) Resolution {
	r := &resolver{in: in, conds: conds, now: now}
	if !r.pack() {
		return r.res
	}
	if !r.skills() {
		return r.res
	}
	r.registry()
	r.tools()
	if !r.providers() {
		return r.res
	}
	r.res.Usable = true
	return r.res
}

func (r *resolver) fail(phase omniav1.AgentRuntimePhase, retry bool, typ, reason, msg string) bool {
	r.set(typ, metav1.ConditionFalse, reason, msg)
	r.res.Phase = phase
	if retry {
		a := r.in.Agent
		r.res.Retry = fmt.Errorf("resolve AgentRuntime %s/%s: %s", a.Namespace, a.Name, msg)
	}
	return false
}

func (r *resolver) pack() bool {
	a := r.in.Agent
	ref := a.Spec.PromptPackRef
	packFail := func(retry bool, reason, msg string) bool {
		return r.fail(omniav1.AgentRuntimePhaseFailed, retry, omniav1.ConditionPromptPackReady, reason, msg)
	}
	if ref.Version != nil && ref.Track != nil {
		return packFail(false, omniav1.ReasonPromptPackRefInvalid, "promptPackRef sets both version and track")
	}
	if ref.Version != nil {
		if _, err := omniav1.ParseVersion(*ref.Version); err != nil {
			return packFail(false, omniav1.ReasonPromptPackRefInvalid, "promptPackRef.version: "+err.Error())
		}
	}
	if len(r.in.Packs) == 0 {
		return packFail(true, omniav1.ReasonPromptPackNotFound, fmt.Sprintf("no PromptPack has packName %q", ref.Name))
	}
	var live, published []*omniav1.PromptPack
	for i := range r.in.Packs {
		if r.in.Packs[i].IsLive() {
			live = append(live, &r.in.Packs[i])
		} else {
			published = append(published, &r.in.Packs[i])
		}
	}
	var pack *omniav1.PromptPack
	switch {
	case len(live) > 0 && len(published) > 0:
		return packFail(false, omniav1.ReasonPromptPackRefInvalid,
			fmt.Sprintf("pack %q has both live and published versions; a pack name must use one kind", ref.Name))
	case len(live) > 0:
		if a.Spec.Rollout != nil {
			return packFail(false, omniav1.ReasonPromptPackRefInvalid,
				fmt.Sprintf("pack %q is live and cannot take part in spec.rollout", ref.Name))
		}
		pack = latest(live)
	case ref.Version != nil:
		var eq []*omniav1.PromptPack
		for _, p := range published {
			if omniav1.VersionsEqual(p.Spec.Version, *ref.Version) {
				eq = append(eq, p)
			}
		}
		if len(eq) == 0 {
			return packFail(true, omniav1.ReasonPromptPackNotFound, fmt.Sprintf("pack %q has no version %s", ref.Name, *ref.Version))
		}
		pack = latest(eq)
	default:
		ch := ref.Channel()
		pack = promptpack.ChannelMax(r.in.Packs, ch)
		if pack == nil {
			if allFailed(published) {
				return packFail(false, omniav1.ReasonPromptPackInvalid,
					fmt.Sprintf("every version of pack %q failed validation", ref.Name))
			}
			return packFail(true, omniav1.ReasonPromptPackNotFound,
				fmt.Sprintf("no validated version of pack %q serves the %s channel yet", ref.Name, ch))
		}
	}
	if pack.Status.Phase == omniav1.PromptPackPhaseFailed || meta.IsStatusConditionFalse(pack.Status.Conditions, omniav1.ConditionSchemaValid) {
		return packFail(false, omniav1.ReasonPromptPackInvalid, fmt.Sprintf("PromptPack %s (version %s) failed validation", pack.Name, pack.Spec.Version))
	}
	if !pack.IsLive() && pack.Status.Phase != omniav1.PromptPackPhaseActive && pack.Status.Phase != omniav1.PromptPackPhaseSuperseded {
		return packFail(true, omniav1.ReasonPromptPackNotFound, fmt.Sprintf("PromptPack %s (version %s) is not validated yet", pack.Name, pack.Spec.Version))
	}
	r.set(omniav1.ConditionPromptPackReady, metav1.ConditionTrue, omniav1.ReasonPromptPackFound,
		fmt.Sprintf("PromptPack %s, version %s", pack.Name, pack.Spec.Version))
	r.res.Pack = pack
	return true
}

func allFailed(ps []*omniav1.PromptPack) bool {
	for _, p := range ps {
		if p.Status.Phase != omniav1.PromptPackPhaseFailed {
			return false
		}
	}
	return len(ps) > 0
}

// latest picks the later-created of equal candidates, as the PromptPack
// controller does for equal precedence.
func latest(ps []*omniav1.PromptPack) *omniav1.PromptPack {
	best := ps[0]
	for _, p := range ps[1:] {
		if best.CreationTimestamp.Before(&p.CreationTimestamp) ||
			best.CreationTimestamp.Equal(&p.CreationTimestamp) && p.Name > best.Name {
			best = p
		}
	}
	return best
}

// registry resolves the optional ToolRegistry. Missing or cross-namespace,
// the agent runs without tools: the reference is optional, and a registry
// of another namespace would escape that namespace's ToolPolicies.
func (r *resolver) registry() {
	a := r.in.Agent
	ref := a.Spec.ToolRegistryRef
	switch {
	case ref == nil:
		meta.RemoveStatusCondition(r.conds, omniav1.ConditionToolRegistryReady)
	case ref.Namespace != nil && *ref.Namespace != "" && *ref.Namespace != a.Namespace:
		msg := fmt.Sprintf("toolRegistryRef names namespace %q; only the agent's namespace is allowed, running without tools", *ref.Namespace)
		if r.set(omniav1.ConditionToolRegistryReady, metav1.ConditionFalse, omniav1.ReasonToolRegistryCrossNamespace, msg) {
			r.res.Events = append(r.res.Events, Event{Reason: omniav1.EventToolRegistryCrossNamespace, Message: msg})
		}
	case r.in.Registry == nil:
		r.set(omniav1.ConditionToolRegistryReady, metav1.ConditionFalse, omniav1.ReasonToolRegistryNotFound,
			fmt.Sprintf("ToolRegistry %q not found; running without tools", ref.Name))
	default:
		r.set(omniav1.ConditionToolRegistryReady, metav1.ConditionTrue, omniav1.ReasonToolRegistryFound,
			fmt.Sprintf("ToolRegistry %s (%s, %d tool(s))", ref.Name, phaseOr(string(r.in.Registry.Status.Phase)), r.in.Registry.Status.DiscoveredToolsCount))
		r.res.Registry = r.in.Registry
	}
}

func phaseOr(p string) string {
	if p == "" {
		return "not reconciled yet"
	}
	return p
}

// ProviderKey is the "<ns>/<name>" of a providerRef, the agent's namespace
// when none is given.
func ProviderKey(a *omniav1.AgentRuntime, ref omniav1.ProviderRef) string {
	ns := a.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = *ref.Namespace
	}
	return index.Key(ns, ref.Name)
}

func (r *resolver) providers() bool {
	a := r.in.Agent
	if len(a.Spec.Providers) == 0 {
		meta.RemoveStatusCondition(r.conds, omniav1.ConditionProviderReady)
		return true
	}
	provFail := func(phase omniav1.AgentRuntimePhase, retry bool, reason, msg string) bool {
		return r.fail(phase, retry, omniav1.ConditionProviderReady, reason, msg)
	}
	var names []string
	for _, e := range a.Spec.Providers {
		ref := e.ProviderRef
		if ref.Namespace != nil && *ref.Namespace != "" && *ref.Namespace != a.Namespace {
			return provFail(omniav1.AgentRuntimePhaseFailed, true, omniav1.ReasonProviderCrossNamespace,
				fmt.Sprintf("providers[%s].providerRef names namespace %q; only the agent's namespace is allowed", e.Name, *ref.Namespace))
		}
		p := r.in.Providers[ProviderKey(a, ref)]
		switch {
		case p == nil:
			return provFail(omniav1.AgentRuntimePhaseFailed, true, omniav1.ReasonProviderNotFound,
				fmt.Sprintf("Provider %q (providers[%s]) not found", ref.Name, e.Name))
		case p.Spec.EffectiveRole() != e.EffectiveRole():
			return provFail(omniav1.AgentRuntimePhaseFailed, false, omniav1.ReasonRoleMismatch,
				fmt.Sprintf("Provider %q has role %s; providers[%s] expects %s", ref.Name, p.Spec.EffectiveRole(), e.Name, e.EffectiveRole()))
		case p.Status.Phase != omniav1.ProviderPhaseReady:
			return provFail(omniav1.AgentRuntimePhasePending, false, omniav1.ReasonProviderNotReady,
				fmt.Sprintf("Provider %q is %s", ref.Name, phaseOr(string(p.Status.Phase))))
		}
		var missing []string
		for _, c := range e.RequiredCapabilities {
			if !p.Spec.HasCapability(c) {
				missing = append(missing, string(c))
			}
		}
		if len(missing) > 0 {
			return provFail(omniav1.AgentRuntimePhasePending, false, omniav1.ReasonCapabilityMismatch,
				fmt.Sprintf("Provider %q lacks capabilities %s required by providers[%s]", ref.Name, strings.Join(missing, ", "), e.Name))
		}
		r.res.Providers = append(r.res.Providers, ResolvedProvider{Ref: e, Provider: p})
		names = append(names, e.Name+"="+ref.Name)
	}
	r.set(omniav1.ConditionProviderReady, metav1.ConditionTrue, omniav1.ReasonProviderFound, "providers ready: "+strings.Join(names, ", "))
	return true
}
