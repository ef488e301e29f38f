// Package index registers the cache field indexes the controllers of this
// module share. Each index is registered once per manager (controller-runtime
// refuses a second registration of the same field), so main and the tests
// call Setup before wiring any controller.
package index

import (
	"context"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Field index names. Values of namespaced objects are matched within the
// namespace given to List (controller-runtime keys them by namespace).
const (
	// PackName indexes PromptPacks by spec.packName, so sibling versions
	// are found without a namespace scan and without waiting for the
	// controller to stamp the pack label.
	PackName = "spec.packName"
	// ConfigMapRef indexes PromptPacks by spec.source.configMapRef.name.
	ConfigMapRef = "spec.source.configMapRef.name"
	// AgentPromptPack indexes AgentRuntimes by spec.promptPackRef.name (a
	// pack name, not an object name) and by the rollout candidate's.
	AgentPromptPack = "spec.promptPackRef.name"
	// AgentToolRegistry indexes AgentRuntimes by "<ns>/<name>" of
	// spec.toolRegistryRef and of the rollout candidate's, cross-namespace
	// references included so their registries still map back to them.
	AgentToolRegistry = "spec.toolRegistryRef"
	// AgentProvider indexes AgentRuntimes by "<ns>/<name>" of every
	// spec.providers[].providerRef and rollout candidate providerRef.
	AgentProvider = "spec.providers.providerRef"
	// ProviderSecret indexes Providers by the Secrets they read
	// (credential.secretRef and auth.credentialsSecretRef).
	ProviderSecret = "spec.secretRefs"
	// ToolPolicyRegistry indexes ToolPolicies by spec.selector.registry.
	ToolPolicyRegistry = "spec.selector.registry"
	// RegistrySandboxClass indexes ToolRegistries by the SandboxClasses
	// their handlers name.
	RegistrySandboxClass = "spec.handlers.sandbox.className"
	// RegistryConnection indexes ToolRegistries by the Connections their
	// handlers name.
	RegistryConnection = "spec.handlers.sandbox.connectionRefs"
	// WorkspaceNamespace indexes Workspaces (cluster-scoped) by
	// spec.namespace.name, so an agent finds its namespace's Workspace and
	// a namespace event finds the Workspaces that want it.
	WorkspaceNamespace = "spec.namespace.name"
	// PackSkillSource indexes PromptPacks by the SkillSources their
	// spec.skills name.
	PackSkillSource = "spec.skills.source"
	// SkillSourceConfigMap indexes SkillSources by
	// spec.configMapRef.name.
	SkillSourceConfigMap = "spec.configMapRef.name"
	// ConnectionSecret indexes Connections by the Secret of
	// spec.credential.secretRef.
	ConnectionSecret = "spec.credential.secretRef.name"
	// SandboxClassConnection indexes SandboxClasses by the Connections
	// their spec.allowedConnections name.
	SandboxClassConnection = "spec.allowedConnections"
	// SandboxClassRuntimeClass indexes SandboxClasses by
	// spec.runtimeClassName; the RuntimeClass is cluster-scoped, so its
	// events are mapped across namespaces.
	SandboxClassRuntimeClass = "spec.runtimeClassName"
)

// Key joins a namespace and a name the way the cross-namespace indexes
// store them.
func Key(namespace, name string) string { return namespace + "/" + name }

// Setup registers every index on the manager's cache.
func Setup(ctx context.Context, mgr manager.Manager) error {
	fi := mgr.GetFieldIndexer()
	for _, ix := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&omniav1.PromptPack{}, PackName, func(o client.Object) []string {
			return []string{o.(*omniav1.PromptPack).Spec.PackName}
		}},
		{&omniav1.PromptPack{}, ConfigMapRef, func(o client.Object) []string {
			if r := o.(*omniav1.PromptPack).Spec.Source.ConfigMapRef; r != nil {
				return []string{r.Name}
			}
			return nil
		}},
		{&omniav1.AgentRuntime{}, AgentPromptPack, agentPackNames},
		{&omniav1.AgentRuntime{}, AgentToolRegistry, agentToolRegistry},
		{&omniav1.AgentRuntime{}, AgentProvider, agentProviders},
		{&omniav1.Provider{}, ProviderSecret, providerSecrets},
		{&omniav1.ToolPolicy{}, ToolPolicyRegistry, func(o client.Object) []string {
			return []string{o.(*omniav1.ToolPolicy).Spec.Selector.Registry}
		}},
		{&omniav1.ToolRegistry{}, RegistrySandboxClass, func(o client.Object) []string {
			return o.(*omniav1.ToolRegistry).Spec.SandboxClassNames()
		}},
		{&omniav1.ToolRegistry{}, RegistryConnection, func(o client.Object) []string {
			return o.(*omniav1.ToolRegistry).Spec.ConnectionNames()
		}},
		{&omniav1.Workspace{}, WorkspaceNamespace, func(o client.Object) []string {
			return []string{o.(*omniav1.Workspace).Spec.Namespace.Name}
		}},
		{&omniav1.PromptPack{}, PackSkillSource, packSkillSources},
		{&omniav1.SkillSource{}, SkillSourceConfigMap, func(o client.Object) []string {
			return []string{o.(*omniav1.SkillSource).Spec.ConfigMapRef.Name}
		}},
		{&omniav1.Connection{}, ConnectionSecret, func(o client.Object) []string {
			if c := o.(*omniav1.Connection).Spec.Credential; c != nil {
				return []string{c.SecretRef.Name}
			}
			return nil
		}},
		{&omniav1.SandboxClass{}, SandboxClassConnection, func(o client.Object) []string {
			var out []string
			for _, c := range o.(*omniav1.SandboxClass).Spec.AllowedConnections {
				out = append(out, c.Name)
			}
			return out
		}},
		{&omniav1.SandboxClass{}, SandboxClassRuntimeClass, func(o client.Object) []string {
			if n := o.(*omniav1.SandboxClass).Spec.RuntimeClassName; n != nil && *n != "" {
				return []string{*n}
			}
			return nil
		}},
	} {
		if err := fi.IndexField(ctx, ix.obj, ix.field, ix.fn); err != nil {
			return fmt.Errorf("index %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return nil
}

// candidate is the rollout's candidate overrides, nil when none: a
// candidate's pack, registry and Providers are inputs of the agent too (of
// its candidate Deployment), so their changes must reach it.
func candidate(ar *omniav1.AgentRuntime) *omniav1.CandidateOverrides {
	if ar.Spec.Rollout == nil {
		return nil
	}
	return ar.Spec.Rollout.Candidate
}

func agentPackNames(o client.Object) []string {
	ar := o.(*omniav1.AgentRuntime)
	out := []string{ar.Spec.PromptPackRef.Name}
	if c := candidate(ar); c != nil && c.PromptPackRef != nil && c.PromptPackRef.Name != out[0] {
		out = append(out, c.PromptPackRef.Name)
	}
	return out
}

func agentToolRegistry(o client.Object) []string {
	ar := o.(*omniav1.AgentRuntime)
	var out []string
	for _, ref := range []*omniav1.ToolRegistryRef{ar.Spec.ToolRegistryRef, candidateRegistry(ar)} {
		if ref == nil {
			continue
		}
		ns := ar.Namespace
		if ref.Namespace != nil && *ref.Namespace != "" {
			ns = *ref.Namespace
		}
		if k := Key(ns, ref.Name); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func candidateRegistry(ar *omniav1.AgentRuntime) *omniav1.ToolRegistryRef {
	if c := candidate(ar); c != nil {
		return c.ToolRegistryRef
	}
	return nil
}

// AgentProviderKeys lists "<ns>/<name>" of every Provider an AgentRuntime
// references, without duplicates; exported for the mapping fallbacks.
func AgentProviderKeys(ar *omniav1.AgentRuntime) []string { return agentProviders(ar) }

func agentProviders(o client.Object) []string {
	ar := o.(*omniav1.AgentRuntime)
	seen := map[string]bool{}
	var out []string
	refs := ar.Spec.Providers
	if c := candidate(ar); c != nil {
		refs = append(slices.Clip(refs), c.ProviderRefs...)
	}
	for _, p := range refs {
		ns := ar.Namespace
		if p.ProviderRef.Namespace != nil && *p.ProviderRef.Namespace != "" {
			ns = *p.ProviderRef.Namespace
		}
		k := Key(ns, p.ProviderRef.Name)
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

func providerSecrets(o client.Object) []string {
	p := o.(*omniav1.Provider)
	var out []string
	if c := p.Spec.Credential; c != nil && c.SecretRef != nil {
		out = append(out, c.SecretRef.Name)
	}
	if a := p.Spec.Auth; a != nil && a.CredentialsSecretRef != nil {
		if len(out) == 0 || out[0] != a.CredentialsSecretRef.Name {
			out = append(out, a.CredentialsSecretRef.Name)
		}
	}
	return out
}

// packSkillSources lists the SkillSources a PromptPack's spec.skills name,
// without duplicates.
func packSkillSources(o client.Object) []string {
	var out []string
	seen := map[string]bool{}
	for _, ref := range o.(*omniav1.PromptPack).Spec.Skills {
		if !seen[ref.Source] {
			seen[ref.Source] = true
			out = append(out, ref.Source)
		}
	}
	return out
}
