package agentselect

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Object is a policy kind's Go type P as the controller handles it: a
// pointer to the stored type V.
type Object[V any] interface {
	*V
	client.Object
}

// Kind is what one policy kind tells the shared policy controller, as the
// methods of a zero-size type the controller is instantiated with. The
// rest — snapshot, decision, reconcile pass, wiring and ForAgent — is the
// same for every kind.
type Kind[P any] interface {
	// Name names the kind in messages ("MemoryPolicy").
	Name() string
	// Plural names the kind's objects in errors ("MemoryPolicies").
	Plural() string
	// ControllerName names the controller in logs, metrics and events.
	ControllerName() string
	// NewList returns an empty list of the kind.
	NewList() client.ObjectList
	// Status points at p's status.
	Status(p P) *omniav1.AgentPolicyStatus
	// Judge is p as the selection sees it, with its spec problem: a policy
	// with one has a nil Selector, so it is in force nowhere.
	Judge(p P) (Policy, *Fault)
	// InForce is the Ready message of a valid p: what it enforces.
	InForce(p P) string
}

// Snapshot is everything one decision over a policy of stored type V
// reads.
type Snapshot[V any] struct {
	// Policy is the policy being reconciled.
	Policy *V
	// All are the policies of the namespace, Policy among them or not.
	All []V
	// Agents are the AgentRuntimes of the namespace.
	Agents []omniav1.AgentRuntime
	// Now stamps condition transitions.
	Now metav1.Time
}

// Decision is what a policy controller writes and emits: its events are
// Warnings, one per transition into a spec problem. It never retries.
type Decision = kubeutil.Outcome[omniav1.AgentPolicyStatus]

// Decide computes a policy's status. A spec problem is a condition, never
// an error: only an edit can fix it, and the policy watch brings that.
func Decide[V any, P Object[V], K Kind[P]](s Snapshot[V]) Decision {
	var k K
	p := P(s.Policy)
	old := k.Status(p)
	st := old.DeepCopy()
	st.ObservedGeneration = p.GetGeneration()
	j := kubeutil.Judgement{Conditions: &st.Conditions, Generation: p.GetGeneration(), Now: s.Now}
	self, fault := k.Judge(p)
	in := Input{Kind: k.Name(), Self: self, Fault: fault, InForce: k.InForce(p)}
	for i := range s.All {
		if q := P(&s.All[i]); q.GetName() != p.GetName() {
			peer, _ := k.Judge(q)
			in.Peers = append(in.Peers, peer)
		}
	}
	for _, a := range s.Agents {
		in.Agents = append(in.Agents, Agent{Name: a.Name, Labels: a.Labels})
	}
	Judge(st, &j, in)
	return kubeutil.Decided(*old, *st, j.Events, nil)
}

// ForAgent returns the policy in force for agent among policies — of those
// in the agent's namespace that select it and have no spec problem, the
// oldest (creationTimestamp, then name) — or nil when none governs the
// agent.
func ForAgent[V any, P Object[V], K Kind[P]](policies []V, agent *omniav1.AgentRuntime) P {
	var k K
	var cands []Policy
	var idx []int
	for i := range policies {
		p := P(&policies[i])
		if p.GetNamespace() != agent.Namespace {
			continue
		}
		if sel, fault := k.Judge(p); fault == nil {
			cands = append(cands, sel)
			idx = append(idx, i)
		}
	}
	w := Winner(cands, agent.Labels)
	if w < 0 {
		return nil
	}
	return P(&policies[idx[w]])
}
