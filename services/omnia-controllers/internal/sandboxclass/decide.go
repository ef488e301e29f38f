// Package sandboxclass is the SandboxClass controller: it checks what a
// SandboxClass refers to — the RuntimeClass of spec.runtimeClassName and
// the Connections of spec.allowedConnections must exist — and that its
// resources are ones a pod may have, and reports the result in phase and
// the Ready condition, from which a ToolRegistry judges SandboxesValid.
// Whether an allowed Connection is Ready is the registry's to judge
// (SandboxConnectionsValid), not the class's. Decide is pure; Reconciler
// reads the referenced objects through the manager's cache and writes.
package sandboxclass

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Class is the SandboxClass being reconciled.
	Class *omniav1.SandboxClass
	// RuntimeClass is the RuntimeClass spec.runtimeClassName names; nil
	// when none is named or it does not exist.
	RuntimeClass *nodev1.RuntimeClass
	// Connections are the Connections of the namespace that
	// spec.allowedConnections names and that exist, by name.
	Connections map[string]bool
	// Now stamps condition transitions.
	Now metav1.Time
}

// Decision is what the reconciler writes, emits and returns: Warning
// events, one per transition into a fault, and Retry when a referenced
// object is missing — it is retried with backoff, on top of the watches.
// A spec problem waits for an edit.
type Decision = kubeutil.Outcome[omniav1.SandboxClassStatus]

type fault struct{ reason, msg string }

// Decide computes a SandboxClass's status. Every fault is named in the
// message; the reason is the first one's: resources, then the
// RuntimeClass, then the Connections.
func Decide(s Snapshot) Decision {
	c := s.Class
	st := c.Status.DeepCopy()
	st.ObservedGeneration = c.Generation
	j := kubeutil.Judgement{Conditions: &st.Conditions, Generation: c.Generation, Now: s.Now}

	var faults []fault
	missing := false
	if bad := overLimits(c.Spec.Resources); len(bad) > 0 {
		faults = append(faults, fault{omniav1.ReasonSandboxResourcesInvalid, "spec.resources requests more than it limits: " + strings.Join(bad, ", ")})
	}
	if n := runtimeClass(c); n != "" && s.RuntimeClass == nil {
		faults = append(faults, fault{omniav1.ReasonRuntimeClassNotFound, fmt.Sprintf("RuntimeClass %q not found", n)})
		missing = true
	}
	var absent []string
	for _, ref := range c.Spec.AllowedConnections {
		if !s.Connections[ref.Name] {
			absent = append(absent, ref.Name)
		}
	}
	if len(absent) > 0 {
		faults = append(faults, fault{omniav1.ReasonAllowedConnectionNotFound, "allowed Connection not found: " + strings.Join(absent, ", ")})
		missing = true
	}

	var retry error
	if len(faults) > 0 {
		msgs := make([]string, len(faults))
		for i, f := range faults {
			msgs[i] = f.msg
		}
		msg := strings.Join(msgs, "; ")
		st.Phase = omniav1.SandboxClassPhaseFailed
		j.WarnOn(j.Set(omniav1.ConditionReady, metav1.ConditionFalse, faults[0].reason, msg), faults[0].reason, msg)
		if missing {
			retry = fmt.Errorf("check SandboxClass %s/%s: %s", c.Namespace, c.Name, msg)
		}
	} else {
		st.Phase = omniav1.SandboxClassPhaseReady
		j.Set(omniav1.ConditionReady, metav1.ConditionTrue, omniav1.ReasonSandboxClassValid, summary(c))
	}
	return kubeutil.Decided(c.Status, *st, j.Events, retry)
}

// runtimeClass is spec.runtimeClassName, "" for the cluster's default.
func runtimeClass(c *omniav1.SandboxClass) string {
	if c.Spec.RuntimeClassName == nil {
		return ""
	}
	return *c.Spec.RuntimeClassName
}

// overLimits names each resource whose request exceeds its limit, sorted.
// A CRD cannot say this, and a pod with it is refused only when the first
// sandbox starts, far from the class that caused it.
func overLimits(r *corev1.ResourceRequirements) []string {
	if r == nil {
		return nil
	}
	var out []string
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			out = append(out, fmt.Sprintf("%s %s > %s", name, req.String(), lim.String()))
		}
	}
	sort.Strings(out)
	return out
}

func summary(c *omniav1.SandboxClass) string {
	rc := "the cluster's default runtime"
	if n := runtimeClass(c); n != "" {
		rc = "RuntimeClass " + n
	}
	egress := omniav1.SandboxEgressConnections
	if c.Spec.Network != nil && c.Spec.Network.Egress != "" {
		egress = c.Spec.Network.Egress
	}
	return fmt.Sprintf("image %s on %s, egress %s, %d allowed Connection(s)", c.Spec.Image, rc, egress, len(c.Spec.AllowedConnections))
}
