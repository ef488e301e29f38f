package agentruntime

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// podEnv is the runtime container's environment by name.
func podEnv(d *appsv1.Deployment) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		out[e.Name] = e
	}
	return out
}

// providersEntry decodes the pod's OMNIA_PROVIDERS and returns its one
// entry as generic JSON, as the runtime reads it.
func providersEntry(t *testing.T, d *appsv1.Deployment) map[string]any {
	t.Helper()
	var entries []map[string]any
	if err := json.Unmarshal([]byte(podEnv(d)["OMNIA_PROVIDERS"].Value), &entries); err != nil || len(entries) != 1 {
		t.Fatalf("OMNIA_PROVIDERS %q: %v", podEnv(d)["OMNIA_PROVIDERS"].Value, err)
	}
	return entries[0]
}

func secretRef(e corev1.EnvVar) string {
	if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.Value != "" {
		return ""
	}
	return e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
}

// TestProviderSettingsReachThePod: each Provider setting the runtime
// needs is in the pod's OMNIA_PROVIDERS entry of that Provider, under its
// JSON name; platform credentials are environment variables that
// reference their Secret's keys (secretKeyRef), never a value.
func TestProviderSettingsReachThePod(t *testing.T) {
	bedrock := func(p *omniav1.Provider) {
		p.Spec.Type, p.Spec.Model = omniav1.ProviderTypeClaude, "claude"
		p.Spec.Platform = &omniav1.ProviderPlatform{Type: omniav1.PlatformBedrock, Region: "us-east-1"}
		p.Spec.Auth = &omniav1.ProviderAuth{Type: omniav1.PlatformAuthAccessKey, RoleArn: "arn:aws:iam::1:role/r",
			CredentialsSecretRef: &omniav1.SecretKeyRef{Name: "aws"}}
	}
	cases := []struct {
		name    string
		mut     func(*omniav1.Provider)
		field   string // the OMNIA_PROVIDERS key
		want    string // its JSON
		wantEnv map[string]string
	}{
		{"spec.headers → headers", func(p *omniav1.Provider) { p.Spec.Headers = map[string]string{"X-Team": "support"} },
			"headers", `{"X-Team":"support"}`, nil},
		{"spec.defaults → defaults, durations as Go durations", func(p *omniav1.Provider) {
			p.Spec.Defaults = &omniav1.ProviderDefaults{Temperature: ptr("0.2"), MaxTokens: ptr(int32(512)), ContextWindow: ptr(int32(8000)),
				TruncationStrategy: omniav1.TruncationSliding, RequestTimeout: &metav1.Duration{Duration: 2 * time.Minute}}
		}, "defaults", `{"temperature":"0.2","maxTokens":512,"contextWindow":8000,"truncationStrategy":"sliding","requestTimeout":"2m0s"}`, nil},
		{"spec.pricing → pricing", func(p *omniav1.Provider) { p.Spec.Pricing = &omniav1.ProviderPricing{InputCostPer1K: ptr("0.003")} },
			"pricing", `{"inputCostPer1K":"0.003"}`, nil},
		{"spec.platform → platform", func(p *omniav1.Provider) {
			p.Spec.Type, p.Spec.Model = omniav1.ProviderTypeClaude, "claude"
			p.Spec.Platform = &omniav1.ProviderPlatform{Type: omniav1.PlatformBedrock, Region: "us-east-1"}
			p.Spec.Auth = &omniav1.ProviderAuth{Type: omniav1.PlatformAuthWorkloadIdentity}
		}, "platform", `{"type":"bedrock","region":"us-east-1"}`, nil},
		{"spec.auth accessKey → auth, each default key an env var from the Secret", bedrock,
			"auth", `{"type":"accessKey","roleArn":"arn:aws:iam::1:role/r","credentialEnv":{"AWS_ACCESS_KEY_ID":"OMNIA_PROVIDER_DEFAULT_AUTH_AWS_ACCESS_KEY_ID","AWS_SECRET_ACCESS_KEY":"OMNIA_PROVIDER_DEFAULT_AUTH_AWS_SECRET_ACCESS_KEY"}}`,
			map[string]string{"OMNIA_PROVIDER_DEFAULT_AUTH_AWS_ACCESS_KEY_ID": "aws/AWS_ACCESS_KEY_ID", "OMNIA_PROVIDER_DEFAULT_AUTH_AWS_SECRET_ACCESS_KEY": "aws/AWS_SECRET_ACCESS_KEY"}},
		{"spec.auth serviceAccount with an explicit key → that key only", func(p *omniav1.Provider) {
			p.Spec.Type, p.Spec.Model = omniav1.ProviderTypeGemini, "gemini"
			p.Spec.Platform = &omniav1.ProviderPlatform{Type: omniav1.PlatformVertex, Project: "p"}
			p.Spec.Auth = &omniav1.ProviderAuth{Type: omniav1.PlatformAuthServiceAccount, ServiceAccountEmail: "sa@p.iam",
				CredentialsSecretRef: &omniav1.SecretKeyRef{Name: "gcp", Key: ptr("sa.json")}}
		}, "auth", `{"type":"serviceAccount","serviceAccountEmail":"sa@p.iam","credentialEnv":{"sa.json":"OMNIA_PROVIDER_DEFAULT_AUTH_SA_JSON"}}`,
			map[string]string{"OMNIA_PROVIDER_DEFAULT_AUTH_SA_JSON": "gcp/sa.json"}},
		{"spec.auth workloadIdentity → auth, no Secret", func(p *omniav1.Provider) {
			p.Spec.Type, p.Spec.Model = omniav1.ProviderTypeOpenAI, "gpt"
			p.Spec.Platform = &omniav1.ProviderPlatform{Type: omniav1.PlatformAzure, Endpoint: "https://az"}
			p.Spec.Auth = &omniav1.ProviderAuth{Type: omniav1.PlatformAuthWorkloadIdentity}
		}, "auth", `{"type":"workloadIdentity"}`, nil},
		{"spec.credential.filePath → keyFile", func(p *omniav1.Provider) {
			p.Spec.Credential = &omniav1.CredentialConfig{FilePath: "/var/run/keys/openai"}
		}, "keyFile", `"/var/run/keys/openai"`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := inputs(agentSpec(nil), []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}, readyProvider(tc.mut))
			d := mustBuild(t, in, testConfig)
			got, _ := json.Marshal(providersEntry(t, d)[tc.field])
			var want any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			wantJSON, _ := json.Marshal(want)
			if string(got) != string(wantJSON) {
				t.Fatalf("%s = %s, want %s", tc.field, got, wantJSON)
			}
			env := podEnv(d)
			for name, ref := range tc.wantEnv {
				if got := secretRef(env[name]); got != ref {
					t.Errorf("%s references %q, want %q", name, got, ref)
				}
			}
			for name, e := range env {
				if strings.Contains(name, "_AUTH_") && tc.wantEnv[name] == "" {
					t.Errorf("unexpected credential variable %s %+v", name, e)
				}
			}
		})
	}
	t.Run("nothing set → the entry has none of these keys", func(t *testing.T) {
		in := inputs(agentSpec(nil), []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}, readyProvider(nil))
		e := providersEntry(t, mustBuild(t, in, testConfig))
		for _, k := range []string{"headers", "defaults", "pricing", "platform", "auth", "keyFile"} {
			if _, ok := e[k]; ok {
				t.Errorf("%s present: %v", k, e)
			}
		}
	})
}

// TestPlatformCredentialRotationRollsThePods: the platform credentials'
// Secret data is in the config hash (as a digest), so rotating it rolls
// the pods, which read the values only when they start; the values are
// never in the pod template.
func TestPlatformCredentialRotationRollsThePods(t *testing.T) {
	base := func() Inputs {
		in := inputs(agentSpec(nil), []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}, readyProvider(func(p *omniav1.Provider) {
			p.Spec.Type, p.Spec.Model = omniav1.ProviderTypeClaude, "claude"
			p.Spec.Platform = &omniav1.ProviderPlatform{Type: omniav1.PlatformBedrock}
			p.Spec.Auth = &omniav1.ProviderAuth{Type: omniav1.PlatformAuthAccessKey, CredentialsSecretRef: &omniav1.SecretKeyRef{Name: "aws"}}
		}))
		in.Secrets["aws"] = &corev1.Secret{Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte("AKIA-one"), "AWS_SECRET_ACCESS_KEY": []byte("secret-one")}}
		return in
	}
	ref := mustBuild(t, base(), testConfig)
	rotated := base()
	rotated.Secrets["aws"].Data["AWS_SECRET_ACCESS_KEY"] = []byte("secret-two")
	if equality.Semantic.DeepEqual(ref.Spec.Template, mustBuild(t, rotated, testConfig).Spec.Template) {
		t.Fatal("a rotated platform credential did not change the pod template")
	}
	b, _ := json.Marshal(ref.Spec.Template)
	for _, v := range []string{"AKIA-one", "secret-one"} {
		if strings.Contains(string(b), v) {
			t.Fatalf("the credential value %q is in the pod template", v)
		}
	}
}

// TestContextReachesThePod: spec.context reaches the runtime as
// OMNIA_CONTEXT_* variables; the Redis address is read by the kubelet
// from the storeRef Secret's "url" key, never copied into the template.
func TestContextReachesThePod(t *testing.T) {
	cases := []struct {
		name string
		ctx  *omniav1.ContextConfig
		want map[string]string // name → value, or "secret:<name>/<key>"
	}{
		{"no spec.context → no OMNIA_CONTEXT_* (the runtime's default)", nil, map[string]string{}},
		{"spec.context memory with a ttl → type and ttl", &omniav1.ContextConfig{Type: omniav1.StoreTypeMemory, TTL: &metav1.Duration{Duration: 90 * time.Minute}},
			map[string]string{"OMNIA_CONTEXT_TYPE": "memory", "OMNIA_CONTEXT_TTL": "1h30m0s"}},
		{"spec.context without a type → memory", &omniav1.ContextConfig{}, map[string]string{"OMNIA_CONTEXT_TYPE": "memory"}},
		{"spec.context redis → type, ttl and the URL from the storeRef Secret", &omniav1.ContextConfig{Type: omniav1.StoreTypeRedis,
			StoreRef: &omniav1.LocalObjectReference{Name: "redis-conn"}, TTL: &metav1.Duration{Duration: 24 * time.Hour}},
			map[string]string{"OMNIA_CONTEXT_TYPE": "redis", "OMNIA_CONTEXT_TTL": "24h0m0s", "OMNIA_CONTEXT_REDIS_URL": "secret:redis-conn/url"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := agentSpec(func(a *omniav1.AgentRuntime) { a.Spec.Context = tc.ctx })
			d := mustBuild(t, inputs(a, []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}, readyProvider(nil)), testConfig)
			got := map[string]string{}
			for name, e := range podEnv(d) {
				if !strings.HasPrefix(name, "OMNIA_CONTEXT_") {
					continue
				}
				if r := secretRef(e); r != "" {
					got[name] = "secret:" + r
				} else {
					got[name] = e.Value
				}
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
