// Package api is the root of agentplane's Kubernetes API groups:
//
//   - agents/v1alpha1 — agents.re-cinq.com: Agent (one run), Station (where
//     runs happen) and AgentDefinition (the recipe).
//   - omnia/v1alpha1 — omnia.altairalabs.ai: AgentRuntime, PromptPack,
//     ToolRegistry, Provider and the ToolPolicy, SandboxClass and Connection
//     kinds they are judged against.
//
// The CRDs in deploy/crds are generated from these types by controller-gen
// (`make generate`); the tests in this directory install them into a real
// kube-apiserver and check what admission accepts and refuses.
package api
