package memorypolicy

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentselect"
)

// ControllerName names the controller in logs, metrics and events.
const ControllerName = "memorypolicy"

// MaxConcurrentReconciles is the worker count, fixed at three (see
// docs/omnia-controllers.md, "Concurrency").
const MaxConcurrentReconciles = agentselect.Workers

// Reconciler reconciles MemoryPolicies: agentselect's policy controller
// over this kind.
type Reconciler = agentselect.Reconciler[omniav1.MemoryPolicy, *omniav1.MemoryPolicy, kind]

// kind is what MemoryPolicy tells agentselect's policy controller; its
// spec problems (Judge) and its Ready message (InForce) are in decide.go.
type kind struct{}

// Name names the kind in messages.
func (kind) Name() string { return "MemoryPolicy" }

// Plural names the kind's objects in errors.
func (kind) Plural() string { return "MemoryPolicies" }

// ControllerName names the controller.
func (kind) ControllerName() string { return ControllerName }

// NewList returns an empty list of the kind.
func (kind) NewList() client.ObjectList { return &omniav1.MemoryPolicyList{} }

// Status points at p's status.
func (kind) Status(p *omniav1.MemoryPolicy) *omniav1.AgentPolicyStatus { return &p.Status }
