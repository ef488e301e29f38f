package agentselect

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// Fault is a spec problem that keeps a policy out of force.
type Fault struct {
	// Reason is the Ready condition's reason.
	Reason string
	// Message names the field and what is wrong with it.
	Message string
}

// Input is what Judge reads of one policy's pass.
type Input struct {
	// Kind names the policies' kind in messages.
	Kind string
	// Self is the judged policy; its Selector is nil when Fault is set.
	Self Policy
	// Fault is the judged policy's spec problem, if any.
	Fault *Fault
	// InForce is the Ready message of a valid policy: what it enforces.
	InForce string
	// Peers are the namespace's other policies of the kind, those with a
	// spec problem with a nil Selector.
	Peers []Policy
	// Agents are the namespace's AgentRuntimes.
	Agents []Agent
}

// Judge writes a policy's status: Ready (valid, or the fault, with a
// Warning event on the transition into it), the agents it is in force for
// and the Conflict condition. A policy with a fault comes with a nil
// Selector (Input.Self), so it is in force nowhere.
func Judge(st *omniav1.AgentPolicyStatus, j *kubeutil.Judgement, in Input) {
	if in.Fault != nil {
		j.WarnOn(j.Set(omniav1.ConditionReady, metav1.ConditionFalse, in.Fault.Reason, in.Fault.Message), in.Fault.Reason, in.Fault.Message)
	} else {
		j.Set(omniav1.ConditionReady, metav1.ConditionTrue, omniav1.ReasonPolicyValid, in.InForce)
	}
	Resolve(in.Self, in.Peers, in.Agents).Status(st, in.Kind, j.Set)
}
