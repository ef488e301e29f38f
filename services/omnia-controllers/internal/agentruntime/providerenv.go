package agentruntime

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// providerSettings is what the runtime learns of a Provider beyond its
// identity and API key, in its OMNIA_PROVIDERS entry: the request settings
// and the hosting platform. Credentials are referenced, never copied: a
// key file by its path, platform credentials by the environment variables
// that read them from their Secret.
type providerSettings struct {
	// KeyFile is credential.filePath: the file in the runtime container
	// that holds the API key.
	KeyFile string `json:"keyFile,omitempty"`
	// Headers are sent with every request to the model.
	Headers map[string]string `json:"headers,omitempty"`
	// Defaults are the per-request settings (durations as Go durations).
	Defaults *omniav1.ProviderDefaults `json:"defaults,omitempty"`
	// Pricing is the cost per thousand tokens.
	Pricing *omniav1.ProviderPricing `json:"pricing,omitempty"`
	// Platform is the cloud platform requests go through.
	Platform *omniav1.ProviderPlatform `json:"platform,omitempty"`
	// Auth is how the platform is authenticated.
	Auth *providerAuthEnv `json:"auth,omitempty"`
}

// providerAuthEnv is spec.auth as the runtime sees it: the Secret is
// replaced by the environment variables that hold its keys.
type providerAuthEnv struct {
	Type                string `json:"type"`
	RoleArn             string `json:"roleArn,omitempty"`
	ServiceAccountEmail string `json:"serviceAccountEmail,omitempty"`
	// CredentialEnv maps each key of auth.credentialsSecretRef to the
	// environment variable of the runtime container that holds its value.
	CredentialEnv map[string]string `json:"credentialEnv,omitempty"`
}

// providerSettingsOf returns the settings of the Provider bound under the
// logical name ref, and the environment variables that read its platform
// credentials from their Secret (secretKeyRef: the value never passes
// through the controller). The keys are those the Provider controller
// checked before it reported Ready (AuthConfigured): the explicit key, or
// the platform's default keys.
func providerSettingsOf(ref string, s *omniav1.ProviderSpec) (providerSettings, []corev1.EnvVar) {
	out := providerSettings{Headers: s.Headers, Defaults: s.Defaults, Pricing: s.Pricing, Platform: s.Platform}
	if c := s.Credential; c != nil && c.SecretRef == nil && c.EnvVar == "" {
		out.KeyFile = c.FilePath
	}
	a := s.Auth
	if a == nil {
		return out, nil
	}
	out.Auth = &providerAuthEnv{Type: string(a.Type), RoleArn: a.RoleArn, ServiceAccountEmail: a.ServiceAccountEmail}
	if a.CredentialsSecretRef == nil || s.Platform == nil {
		return out, nil
	}
	keys := omniav1.PlatformCredentialKeys(s.Platform.Type, a.Type)
	if k := a.CredentialsSecretRef.KeyOr(""); k != "" {
		keys = []string{k}
	}
	sort.Strings(keys)
	var env []corev1.EnvVar
	for _, k := range keys {
		name := "OMNIA_PROVIDER_" + envName(ref) + "_AUTH_" + envKey(k)
		if out.Auth.CredentialEnv == nil {
			out.Auth.CredentialEnv = map[string]string{}
		}
		out.Auth.CredentialEnv[k] = name
		env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: a.CredentialsSecretRef.Name}, Key: k}}})
	}
	return out, env
}

// envKey turns a Secret key into an environment variable fragment:
// upper case, every character but letters and digits an underscore
// ("credentials.json" → "CREDENTIALS_JSON").
func envKey(k string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, k)
}

// providerSecretNames are the Secrets of a Provider whose data the pod
// reads (credential.secretRef, auth.credentialsSecretRef): their data is
// hashed into the config hash, so a rotated key rolls the pods.
func providerSecretNames(s *omniav1.ProviderSpec) []string {
	var out []string
	if c := s.Credential; c != nil && c.SecretRef != nil {
		out = append(out, c.SecretRef.Name)
	}
	if a := s.Auth; a != nil && a.CredentialsSecretRef != nil {
		out = append(out, a.CredentialsSecretRef.Name)
	}
	return out
}
