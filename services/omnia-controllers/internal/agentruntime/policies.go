package agentruntime

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/memorypolicy"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/sessionretention"
)

// The runtime container's environment from the policies in force for the
// agent (docs/omnia-controllers.md, "What reaches the runtime"). Each is
// unset when no policy of its kind governs the agent.
const (
	// EnvSessionRetentionPolicy names the SessionRetentionPolicy in force.
	EnvSessionRetentionPolicy = "OMNIA_SESSION_RETENTION_POLICY"
	// EnvSessionTTL is its sessionTTL, a Go duration.
	EnvSessionTTL = "OMNIA_SESSION_TTL"
	// EnvTranscriptTTL is its transcriptTTL, a Go duration; sessionTTL
	// when unset, so the runtime never has to know that default.
	EnvTranscriptTTL = "OMNIA_TRANSCRIPT_TTL"
	// EnvMemoryPolicy names the MemoryPolicy in force.
	EnvMemoryPolicy = "OMNIA_MEMORY_POLICY"
	// EnvMemoryPolicyJSON is its spec as JSON without agentSelector (which
	// agents it governs is the controller's business, not the runtime's).
	EnvMemoryPolicyJSON = "OMNIA_MEMORY_POLICY_JSON"
)

// policiesInForce returns the SessionRetentionPolicy and MemoryPolicy in
// force for the agent among the namespace's (nil for a kind none governs
// it). ForAgent judges from the spec alone — a policy with a spec problem
// is in force nowhere, the older of two wins — so a status write never
// changes the answer.
func policiesInForce(in Inputs) (*omniav1.SessionRetentionPolicy, *omniav1.MemoryPolicy) {
	sp, _ := sessionretention.ForAgent(in.SessionPolicies, in.Agent)
	mp, _ := memorypolicy.ForAgent(in.MemoryPolicies, in.Agent)
	return sp, mp
}

// policyEnv is what the runtime learns of the policies in force; the
// values are in the pod template, so a change of the policy in force, or
// of its spec, rolls the pods.
func policyEnv(in Inputs) []corev1.EnvVar {
	sp, mp := policiesInForce(in)
	var env []corev1.EnvVar
	if sp != nil {
		transcript := sp.Spec.SessionTTL.Duration
		if t := sp.Spec.TranscriptTTL; t != nil {
			transcript = t.Duration
		}
		env = append(env,
			corev1.EnvVar{Name: EnvSessionRetentionPolicy, Value: sp.Name},
			corev1.EnvVar{Name: EnvSessionTTL, Value: sp.Spec.SessionTTL.Duration.String()},
			corev1.EnvVar{Name: EnvTranscriptTTL, Value: transcript.String()})
	}
	if mp != nil {
		env = append(env,
			corev1.EnvVar{Name: EnvMemoryPolicy, Value: mp.Name},
			corev1.EnvVar{Name: EnvMemoryPolicyJSON, Value: memoryPolicyJSON(&mp.Spec)})
	}
	return env
}

// memoryPolicyJSON is spec without agentSelector, as JSON. A struct
// marshals its fields in declaration order and the lists keep theirs, so
// equal specs give equal bytes and the pods roll only on a real change.
func memoryPolicyJSON(spec *omniav1.MemoryPolicySpec) string {
	s := *spec
	s.AgentSelector = nil
	b, _ := json.Marshal(s) // durations, strings and numbers: it cannot fail
	return string(b)
}
