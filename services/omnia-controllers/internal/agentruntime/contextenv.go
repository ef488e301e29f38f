package agentruntime

import (
	corev1 "k8s.io/api/core/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// ContextRedisURLKey is the key of spec.context.storeRef's Secret that
// holds the Redis address.
const ContextRedisURLKey = "url"

// contextEnv tells the runtime where conversation state is kept
// (spec.context): OMNIA_CONTEXT_TYPE (memory or redis), OMNIA_CONTEXT_TTL
// (a Go duration) and, for redis, OMNIA_CONTEXT_REDIS_URL read from the
// storeRef Secret's "url" key by the kubelet (the address may carry a
// password, so it never passes through the controller). Nothing when the
// spec has no context: the runtime's default, memory, applies.
func contextEnv(a *omniav1.AgentRuntime) []corev1.EnvVar {
	c := a.Spec.Context
	if c == nil {
		return nil
	}
	typ := c.Type
	if typ == "" {
		typ = omniav1.StoreTypeMemory
	}
	env := []corev1.EnvVar{{Name: "OMNIA_CONTEXT_TYPE", Value: string(typ)}}
	if c.TTL != nil {
		env = append(env, corev1.EnvVar{Name: "OMNIA_CONTEXT_TTL", Value: c.TTL.Duration.String()})
	}
	if typ == omniav1.StoreTypeRedis && c.StoreRef != nil {
		env = append(env, corev1.EnvVar{Name: "OMNIA_CONTEXT_REDIS_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: c.StoreRef.Name}, Key: ContextRedisURLKey}}})
	}
	return env
}
