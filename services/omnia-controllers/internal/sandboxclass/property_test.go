package sandboxclass

import (
	"fmt"
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

// TestDecideProperties checks Decide on random SandboxClasses (with and
// without a RuntimeClass, allowed Connections and resources) against
// random sets of existing objects, with random stored statuses:
//
//   - no input makes it panic, it leaves its input as it was, and the
//     same input gives the same decision;
//   - Ready (Ready=True, Valid) exactly when every referenced object
//     exists and no request exceeds its limit; Retry exactly when a
//     referenced object is missing;
//   - an event goes with a status write, and the written status, decided
//     on again later, needs no write.
func TestDecideProperties(t *testing.T) {
	decision.Run(t, genSnapshot, checkDecision).Require(t, 0.03, "reason "+omniav1.ReasonSandboxClassValid, "reason "+omniav1.ReasonRuntimeClassNotFound,
		"reason "+omniav1.ReasonAllowedConnectionNotFound, "reason "+omniav1.ReasonSandboxResourcesInvalid, "status write", "no status write")
}

// decision is Decide as the property tests drive it.
var decision = pt.Status[Snapshot, omniav1.SandboxClassStatus]{Fresh: fresh, Decide: Decide,
	At: func(s *Snapshot) (metav1.Object, *omniav1.SandboxClassStatus, *metav1.Time) {
		return s.Class, &s.Class.Status, &s.Now
	},
	Outcomes: func(st omniav1.SandboxClassStatus) []string { return pt.ReadyReason(st.Conditions) }}

func fresh(s Snapshot) Snapshot {
	s.Class = s.Class.DeepCopy()
	s.RuntimeClass = s.RuntimeClass.DeepCopy()
	m := make(map[string]bool, len(s.Connections))
	for k, v := range s.Connections {
		m[k] = v
	}
	s.Connections = m
	return s
}

func checkDecision(s Snapshot, d Decision) error {
	c, st := s.Class, d.Status
	ready, err := pt.ReadyFor(st.Conditions, st.ObservedGeneration, c.Generation)
	if err != nil {
		return err
	}
	missing := c.Spec.RuntimeClassName != nil && s.RuntimeClass == nil
	for _, ref := range c.Spec.AllowedConnections {
		missing = missing || !s.Connections[ref.Name]
	}
	valid := !missing && len(overLimits(c.Spec.Resources)) == 0
	if valid != (st.Phase == omniav1.SandboxClassPhaseReady) || valid != (ready.Status == metav1.ConditionTrue) ||
		(st.Phase != omniav1.SandboxClassPhaseReady && st.Phase != omniav1.SandboxClassPhaseFailed) {
		return fmt.Errorf("valid %v, phase %s, Ready %s/%s", valid, st.Phase, ready.Status, ready.Reason)
	}
	if missing != (d.Retry != nil) {
		return fmt.Errorf("a referenced object missing %v, retry set %v", missing, d.Retry != nil)
	}
	return nil
}

func genSnapshot(r *rand.Rand) Snapshot {
	var conns []string
	for _, n := range []string{"github", "slack", "jira"} {
		if pt.Chance(r, 0.4) {
			conns = append(conns, n)
		}
	}
	c := class(int64(1+r.IntN(4)), pt.Pick(r, "", "gvisor", "kata"), conns...)
	if pt.Chance(r, 0.3) {
		c.Spec.Resources = resources(pt.Pick(r, "512Mi", "1Gi", "2Gi"), pt.Pick(r, "1Gi", "1536Mi"))
	}
	if pt.Chance(r, 0.3) {
		c.Spec.Network = &omniav1.SandboxNetwork{Egress: pt.Pick(r, omniav1.SandboxEgressConnections, omniav1.SandboxEgressUnrestricted, "")}
	}
	s := Snapshot{Class: c, Connections: map[string]bool{}, Now: pt.MetaTime(r)}
	if c.Spec.RuntimeClassName != nil && pt.Chance(r, 0.7) {
		s.RuntimeClass = runtimeClassObj(*c.Spec.RuntimeClassName)
	}
	for _, n := range conns {
		s.Connections[n] = pt.Chance(r, 0.8)
	}
	decision.Prior(r, &s, func() omniav1.SandboxClassStatus {
		return omniav1.SandboxClassStatus{
			Phase:              pt.Pick(r, omniav1.SandboxClassPhasePending, omniav1.SandboxClassPhaseReady, omniav1.SandboxClassPhaseFailed, ""),
			ObservedGeneration: int64(r.IntN(4)),
			Conditions:         pt.Conditions(r, 0.7, omniav1.ConditionReady, "SomeOtherCondition"),
		}
	})
	return s
}
