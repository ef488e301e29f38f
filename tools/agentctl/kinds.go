package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// kind is one resource agentctl gets, describes and completes: how to name
// it on the command line, read it, print it as a table and describe it.
type kind struct {
	// plural is the canonical name (agents); names are its other
	// spellings: the singular and the CRD's short names.
	plural string
	names  []string
	// title is the plural as an error message names it (Agents).
	title string
	gvk   schema.GroupVersionKind
	// newObject and newList make empty typed objects for the client.
	newObject func() client.Object
	newList   func() client.ObjectList
	// columns follow NAME (and NAMESPACE with -A); the wide ones only
	// with -o wide.
	columns []column
	// describe lists the status and spec fields describe prints, and the
	// sections that follow them (conditions and events come after).
	describe   func(o client.Object, now time.Time) ([]field, []section)
	conditions func(o client.Object) []metav1.Condition
}

// column is one table column after NAME.
type column struct {
	header string
	wide   bool
	cell   func(o client.Object, now time.Time) string
}

// field is one "Label:  value" line of describe.
type field struct{ label, value string }

// section is a titled table of describe, such as Conditions or Events.
type section struct {
	title  string
	header []string
	rows   [][]string
}

// col builds a column from a function of the kind's own type.
func col[T client.Object](header string, wide bool, cell func(T) string) column {
	return column{header: header, wide: wide, cell: func(o client.Object, _ time.Time) string { return cell(o.(T)) }}
}

// ageColumn is AGE, from the object's creation time.
var ageColumn = column{header: "AGE", cell: func(o client.Object, now time.Time) string {
	return age(o.GetCreationTimestamp(), now)
}}

// kinds are every kind agentctl knows; the first is the default.
var kinds = []*kind{agentKind, agentRuntimeKind, promptPackKind, toolRegistryKind}

// lookupKind finds a kind by any of its spellings, ignoring case.
func lookupKind(name string) (*kind, bool) {
	name = strings.ToLower(name)
	for _, k := range kinds {
		if name == k.plural {
			return k, true
		}
		for _, n := range k.names {
			if name == n {
				return k, true
			}
		}
	}
	return nil, false
}

// unknownKind is the usage error for a kind agentctl does not know.
func unknownKind(name string) error {
	var known []string
	for _, k := range kinds {
		known = append(known, k.plural+" ("+strings.Join(k.names, ", ")+")")
	}
	return &exitCodeError{code: exitUsage, msg: fmt.Sprintf("unknown kind %q: want one of %s", name, strings.Join(known, ", "))}
}

var agentKind = &kind{
	plural: "agents", names: []string{"agent", "agt"}, title: "Agents",
	gvk:       agentsv1alpha1.GroupVersion.WithKind("Agent"),
	newObject: func() client.Object { return &agentsv1alpha1.Agent{} },
	newList:   func() client.ObjectList { return &agentsv1alpha1.AgentList{} },
	// The Agent CRD's printer columns, as kubectl get shows them, then its
	// priority-1 columns and what a failed run needs at a glance.
	columns: []column{
		col("PHASE", false, func(a *agentsv1alpha1.Agent) string { return string(a.Status.Phase) }),
		col("STATION", false, func(a *agentsv1alpha1.Agent) string { return a.Spec.StationRef }),
		col("JOB", false, func(a *agentsv1alpha1.Agent) string { return a.Status.JobName }),
		ageColumn,
		col("MODEL", true, func(a *agentsv1alpha1.Agent) string { return a.Spec.Model }),
		col("SESSION", true, func(a *agentsv1alpha1.Agent) string { return a.Status.SessionID }),
		col("EXIT", true, func(a *agentsv1alpha1.Agent) string { return int32Text(a.Status.ExitCode) }),
		col("REASON", true, func(a *agentsv1alpha1.Agent) string { return truncate(a.Status.FailureReason, maxReason) }),
	},
	describe:   describeAgent,
	conditions: func(o client.Object) []metav1.Condition { return o.(*agentsv1alpha1.Agent).Status.Conditions },
}

var agentRuntimeKind = &kind{
	plural: "agentruntimes", names: []string{"agentruntime", "ar"}, title: "AgentRuntimes",
	gvk:       omniav1alpha1.GroupVersion.WithKind("AgentRuntime"),
	newObject: func() client.Object { return &omniav1alpha1.AgentRuntime{} },
	newList:   func() client.ObjectList { return &omniav1alpha1.AgentRuntimeList{} },
	columns: []column{
		col("PHASE", false, func(r *omniav1alpha1.AgentRuntime) string { return string(r.Status.Phase) }),
		col("READY", false, func(r *omniav1alpha1.AgentRuntime) string {
			if r.Status.Replicas == nil {
				return ""
			}
			return strconv.Itoa(int(r.Status.Replicas.Ready))
		}),
		col("VERSION", false, func(r *omniav1alpha1.AgentRuntime) string { return deref(r.Status.ActiveVersion) }),
		ageColumn,
		col("PACK", true, func(r *omniav1alpha1.AgentRuntime) string { return packRef(r.Spec.PromptPackRef) }),
		col("PROVIDER", true, func(r *omniav1alpha1.AgentRuntime) string { return providers(r.Spec.Providers) }),
		col("REPLICAS", true, func(r *omniav1alpha1.AgentRuntime) string {
			if r.Status.Replicas == nil {
				return ""
			}
			return fmt.Sprintf("%d/%d", r.Status.Replicas.Ready, r.Status.Replicas.Desired)
		}),
	},
	describe:   describeAgentRuntime,
	conditions: func(o client.Object) []metav1.Condition { return o.(*omniav1alpha1.AgentRuntime).Status.Conditions },
}

var promptPackKind = &kind{
	plural: "promptpacks", names: []string{"promptpack", "pp"}, title: "PromptPacks",
	gvk:       omniav1alpha1.GroupVersion.WithKind("PromptPack"),
	newObject: func() client.Object { return &omniav1alpha1.PromptPack{} },
	newList:   func() client.ObjectList { return &omniav1alpha1.PromptPackList{} },
	columns: []column{
		col("PACK", false, func(p *omniav1alpha1.PromptPack) string { return p.Spec.PackName }),
		col("VERSION", false, func(p *omniav1alpha1.PromptPack) string { return p.Spec.Version }),
		col("PHASE", false, func(p *omniav1alpha1.PromptPack) string { return string(p.Status.Phase) }),
		ageColumn,
		col("CHANNEL", true, func(p *omniav1alpha1.PromptPack) string { return string(p.Status.Channel) }),
		col("ACTIVE", true, func(p *omniav1alpha1.PromptPack) string { return deref(p.Status.ActiveVersion) }),
		col("DIGEST", true, func(p *omniav1alpha1.PromptPack) string { return shortDigest(p.Status.ContentDigest) }),
	},
	describe:   describePromptPack,
	conditions: func(o client.Object) []metav1.Condition { return o.(*omniav1alpha1.PromptPack).Status.Conditions },
}

var toolRegistryKind = &kind{
	plural: "toolregistries", names: []string{"toolregistry", "tr"}, title: "ToolRegistries",
	gvk:       omniav1alpha1.GroupVersion.WithKind("ToolRegistry"),
	newObject: func() client.Object { return &omniav1alpha1.ToolRegistry{} },
	newList:   func() client.ObjectList { return &omniav1alpha1.ToolRegistryList{} },
	columns: []column{
		col("TOOLS", false, func(r *omniav1alpha1.ToolRegistry) string { return strconv.Itoa(toolCount(r)) }),
		col("PHASE", false, func(r *omniav1alpha1.ToolRegistry) string { return string(r.Status.Phase) }),
		ageColumn,
		col("HANDLERS", true, func(r *omniav1alpha1.ToolRegistry) string { return strconv.Itoa(len(r.Spec.Handlers)) }),
		col("AVAILABLE", true, func(r *omniav1alpha1.ToolRegistry) string {
			n := 0
			for _, t := range r.Status.DiscoveredTools {
				if t.Status == omniav1alpha1.ToolStatusAvailable {
					n++
				}
			}
			return fmt.Sprintf("%d/%d", n, len(r.Status.DiscoveredTools))
		}),
	},
	describe:   describeToolRegistry,
	conditions: func(o client.Object) []metav1.Condition { return o.(*omniav1alpha1.ToolRegistry).Status.Conditions },
}

// maxReason bounds the REASON column so one long failure keeps the table
// readable; describe prints it whole.
const maxReason = 40

// toolCount is status.discoveredToolsCount, or the length of the list
// when a controller wrote only the list.
func toolCount(r *omniav1alpha1.ToolRegistry) int {
	if r.Status.DiscoveredToolsCount > 0 {
		return int(r.Status.DiscoveredToolsCount)
	}
	return len(r.Status.DiscoveredTools)
}

// packRef renders a promptPackRef as name@version, or name:channel when
// it follows a channel (stable when neither is set, as the controller
// resolves it).
func packRef(ref omniav1alpha1.PromptPackRef) string {
	switch {
	case ref.Version != nil:
		return ref.Name + "@" + *ref.Version
	case ref.Track != nil:
		return ref.Name + ":" + string(*ref.Track)
	default:
		return ref.Name + ":" + string(omniav1alpha1.ChannelStable)
	}
}

// providers renders the bound Providers as name, or logical=provider
// when the logical name differs, sorted by logical name.
func providers(ps []omniav1alpha1.NamedProviderRef) string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		s := p.ProviderRef.Name
		if p.Name != p.ProviderRef.Name {
			s = p.Name + "=" + s
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// shortDigest keeps the algorithm and the first 12 hex digits, enough to
// tell versions apart, as container tools shorten image ids.
func shortDigest(d string) string {
	alg, hex, ok := strings.Cut(d, ":")
	if !ok {
		alg, hex = "", d
	}
	if len(hex) > 12 {
		hex = hex[:12]
	}
	if alg == "" {
		return hex
	}
	return alg + ":" + hex
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func int32Text(v *int32) string {
	if v == nil {
		return ""
	}
	return strconv.Itoa(int(*v))
}
