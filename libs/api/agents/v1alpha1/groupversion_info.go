// Package v1alpha1 holds the agents.re-cinq.com/v1alpha1 API: the Kubernetes
// resources a team uses to run AI coding agents on the cluster.
//
//   - AgentDefinition is the recipe: prompt, model, tools, outputs and how the
//     work is executed (a Job, a vendor batch request or a realtime session).
//   - Station is the place a recipe runs: the pod template, deadline,
//     concurrency and how much finished history to keep.
//   - Agent is one run of a Station's recipe. It is driven by the agent
//     controller from Pending to Succeeded or Failed and records the result in
//     its status.
//
// Field names, including the snake_case ones, match the manifests of the
// re-cinq ai-agent-subsystem so those manifests apply unchanged. Everything
// that can be judged from one object alone is validated by the CRD schema at
// admission; checks that need other objects or controller configuration
// (missing references, batch and realtime suitability) are made by the
// controller, which fails the Agent with a reason.
//
// +kubebuilder:object:generate=true
// +groupName=agents.re-cinq.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentplane/agentplane/libs/api/internal/schemebuilder"
)

var (
	// GroupVersion is the API group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "agents.re-cinq.com", Version: "v1alpha1"}

	// SchemeBuilder collects the kinds of this package; each kind registers
	// itself in an init function of its own file.
	SchemeBuilder = &schemebuilder.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds every kind of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
