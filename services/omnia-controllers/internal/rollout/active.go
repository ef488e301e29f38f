// Package rollout holds the decisions of the AgentRuntime rollout engine:
// whether a rollout is active, what its current step asks for, how the
// replicas are split between stable and candidate, what status.rollout
// says, when a newer pack version starts a rollout and when a candidate is
// rolled back. It reads no clock and talks to no API server: the
// controller passes the objects and the time in and carries the answers
// out, so every rule here is a table test.
package rollout

import (
	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Active reports whether spec.rollout has a candidate that differs from
// the spec. A candidate equal to the spec (after a promotion or a
// rollback) is idle, so nothing has to clear it for the rollout to end.
func Active(spec *omniav1.AgentRuntimeSpec) bool {
	if spec.Rollout == nil || spec.Rollout.Candidate == nil {
		return false
	}
	c := spec.Rollout.Candidate
	if c.PromptPackRef != nil && packRefDiffers(spec.PromptPackRef, *c.PromptPackRef) {
		return true
	}
	if len(c.ProviderRefs) > 0 && !sameProviders(spec.Providers, c.ProviderRefs) {
		return true
	}
	return c.ToolRegistryRef != nil && (spec.ToolRegistryRef == nil || spec.ToolRegistryRef.Name != c.ToolRegistryRef.Name)
}

// packRefDiffers compares two references the way resolution would: an
// unset track is the stable channel, and versions compare by semver
// precedence, so "v1.2.0" and "1.2.0" are the same pack.
func packRefDiffers(a, b omniav1.PromptPackRef) bool {
	if a.Name != b.Name || a.Channel() != b.Channel() {
		return true
	}
	if a.Version != nil && b.Version != nil {
		return !omniav1.VersionsEqual(*a.Version, *b.Version)
	}
	return false
}

// sameProviders compares providers by logical name and the Provider each
// names; the candidate list replaces the spec's as a whole.
func sameProviders(spec, cand []omniav1.NamedProviderRef) bool {
	if len(spec) != len(cand) {
		return false
	}
	byName := make(map[string]string, len(spec))
	for _, p := range spec {
		byName[p.Name] = p.ProviderRef.Name
	}
	for _, p := range cand {
		if got, ok := byName[p.Name]; !ok || got != p.ProviderRef.Name {
			return false
		}
	}
	return true
}

// CandidateSpec is a copy of spec with the candidate's overrides applied:
// the spec the candidate Deployment is built from, and the spec a
// promotion writes.
func CandidateSpec(spec *omniav1.AgentRuntimeSpec) *omniav1.AgentRuntimeSpec {
	out := spec.DeepCopy()
	if out.Rollout == nil || out.Rollout.Candidate == nil {
		return out
	}
	c := out.Rollout.Candidate
	if c.PromptPackRef != nil {
		out.PromptPackRef = *c.PromptPackRef.DeepCopy()
	}
	if len(c.ProviderRefs) > 0 {
		// Copies, so the spec and spec.rollout never share a slice.
		out.Providers = make([]omniav1.NamedProviderRef, len(c.ProviderRefs))
		for i := range c.ProviderRefs {
			out.Providers[i] = *c.ProviderRefs[i].DeepCopy()
		}
	}
	if c.ToolRegistryRef != nil {
		out.ToolRegistryRef = c.ToolRegistryRef.DeepCopy()
	}
	return out
}

// Revert copies the spec's references back over the candidate's, so the
// rollout is no longer active while spec.rollout (and its trigger) stays
// as the user wrote it. A rollback does this.
func Revert(spec *omniav1.AgentRuntimeSpec) {
	if spec.Rollout == nil || spec.Rollout.Candidate == nil {
		return
	}
	c := spec.Rollout.Candidate
	if c.PromptPackRef != nil {
		c.PromptPackRef = spec.PromptPackRef.DeepCopy()
	}
	if len(c.ProviderRefs) > 0 {
		c.ProviderRefs = nil
		for i := range spec.Providers {
			c.ProviderRefs = append(c.ProviderRefs, *spec.Providers[i].DeepCopy())
		}
	}
	if c.ToolRegistryRef != nil {
		c.ToolRegistryRef = spec.ToolRegistryRef.DeepCopy()
	}
}

// CandidateVersion names the candidate for status.rollout: its pinned
// version, else its track, else its pack name; a candidate that keeps the
// spec's pack is named after the spec's reference.
func CandidateVersion(spec *omniav1.AgentRuntimeSpec) string {
	ref := spec.PromptPackRef
	if spec.Rollout != nil && spec.Rollout.Candidate != nil && spec.Rollout.Candidate.PromptPackRef != nil {
		ref = *spec.Rollout.Candidate.PromptPackRef
	}
	switch {
	case ref.Version != nil:
		return *ref.Version
	case ref.Track != nil:
		return string(*ref.Track)
	}
	return ref.Name
}
