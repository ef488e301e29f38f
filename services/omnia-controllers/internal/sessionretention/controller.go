package sessionretention

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentselect"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "sessionretentionpolicy"

// MaxConcurrentReconciles is the worker count, fixed at three (see
// docs/omnia-controllers.md, "Concurrency").
const MaxConcurrentReconciles = agentselect.Workers

// Reconciler reconciles SessionRetentionPolicies: agentselect's policy
// controller over this kind.
type Reconciler = agentselect.Reconciler[omniav1.SessionRetentionPolicy, *omniav1.SessionRetentionPolicy, kind]

// kind is what SessionRetentionPolicy tells agentselect's policy
// controller; its spec problems (Judge) and its Ready message (InForce)
// are in decide.go.
type kind struct{}

// Name names the kind in messages.
func (kind) Name() string { return "SessionRetentionPolicy" }

// Plural names the kind's objects in errors.
func (kind) Plural() string { return "SessionRetentionPolicies" }

// ControllerName names the controller.
func (kind) ControllerName() string { return ControllerName }

// NewList returns an empty list of the kind.
func (kind) NewList() client.ObjectList { return &omniav1.SessionRetentionPolicyList{} }

// Status points at p's status.
func (kind) Status(p *omniav1.SessionRetentionPolicy) *omniav1.AgentPolicyStatus { return &p.Status }
