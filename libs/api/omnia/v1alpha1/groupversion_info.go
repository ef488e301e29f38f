// Package v1alpha1 holds the omnia.altairalabs.ai/v1alpha1 API: the
// Kubernetes resources that describe long-lived AI assistants.
//
//   - PromptPack is one immutable, published version of a pack of prompts.
//     Several PromptPacks share a packName; the controller decides which
//     version serves the stable and the prerelease channel.
//   - ToolRegistry lists the tool handlers (HTTP, gRPC, MCP, OpenAPI,
//     browser-side client tools and platform services) an agent may call.
//   - Provider is one configured model endpoint (an LLM, an embedding model,
//     a speech or image model) with its credential.
//   - AgentRuntime is a running assistant: it binds a PromptPack, Providers
//     and optionally a ToolRegistry and becomes a Deployment and a Service.
//   - ToolPolicy, SandboxClass and Connection are what a ToolRegistry is
//     judged against: the policy that governs its tool calls, the sandbox
//     its locally executed tools run in and the outbound endpoints those
//     sandboxes may reach.
//   - Workspace (cluster-scoped) is a tenant: it owns one namespace and
//     holds the pod and autoscaling defaults its AgentRuntimes inherit.
//
// Field names, defaults and enum values follow the public Omnia operator so
// its manifests apply unchanged. Everything that can be judged from one
// object alone is validated by the CRD schema (OpenAPI and CEL) at
// admission; checks that need other objects are made by the controllers and
// reported as conditions.
//
// +kubebuilder:object:generate=true
// +groupName=omnia.altairalabs.ai
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/agentplane/agentplane/libs/api/internal/schemebuilder"
)

// GroupName is the API group of every kind in this package.
const GroupName = "omnia.altairalabs.ai"

var (
	// GroupVersion is the API group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder collects the kinds of this package; each kind registers
	// itself in an init function of its own file.
	SchemeBuilder = &schemebuilder.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds every kind of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
