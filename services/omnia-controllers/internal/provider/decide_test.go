package provider

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

var t0 = metav1.NewTime(proptest.Epoch)

func prov(typ omniav1.ProviderType, mut func(*omniav1.ProviderSpec)) *omniav1.Provider {
	p := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Generation: 1},
		Spec: omniav1.ProviderSpec{Type: typ, Model: "m", Capabilities: []omniav1.ProviderCapability{omniav1.CapabilityText, omniav1.CapabilityTools}}}
	if mut != nil {
		mut(&p.Spec)
	}
	return p
}

func withSecret(name string) func(*omniav1.ProviderSpec) {
	return func(s *omniav1.ProviderSpec) {
		s.Credential = &omniav1.CredentialConfig{SecretRef: &omniav1.SecretKeyRef{Name: name}}
	}
}

func secret(kv ...string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: "ns"}, Data: map[string][]byte{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Data[kv[i]] = []byte(kv[i+1])
	}
	return s
}

// TestDecide has a case per credential, auth, model and endpoint rule.
func TestDecide(t *testing.T) {
	type want struct {
		phase   omniav1.ProviderPhase
		conds   map[string][2]string
		absent  []string
		event   string
		retry   bool
		requeue time.Duration
		// next, when set, changes the inputs of the pass after this one,
		// which runs on the status this one wrote and must write nothing.
		next func(*Snapshot)
	}
	platform := func(auth omniav1.PlatformAuthType, ref bool) func(*omniav1.ProviderSpec) {
		return func(s *omniav1.ProviderSpec) {
			s.Platform = &omniav1.ProviderPlatform{Type: omniav1.PlatformBedrock, Region: "us-east-1"}
			s.Auth = &omniav1.ProviderAuth{Type: auth}
			if ref {
				s.Auth.CredentialsSecretRef = &omniav1.SecretKeyRef{Name: "aws"}
			}
		}
	}
	awsSecret := secret("AWS_ACCESS_KEY_ID", "id", "AWS_SECRET_ACCESS_KEY", "k")
	awsSecret.Name = "aws"
	cases := []struct {
		name string
		snap Snapshot
		want want
	}{
		{"mock needs nothing", Snapshot{Provider: prov(omniav1.ProviderTypeMock, nil)}, want{phase: omniav1.ProviderPhaseReady,
			conds: map[string][2]string{
				omniav1.ConditionSecretFound:          {"True", omniav1.ReasonNoSecretRequired},
				omniav1.ConditionCredentialConfigured: {"True", omniav1.ReasonNoCredentialRequired},
				omniav1.ConditionModelValid:           {"True", omniav1.ReasonModelNotRequired},
				omniav1.ConditionReady:                {"True", ReasonReady}},
			absent: []string{omniav1.ConditionEndpointReachable, omniav1.ConditionCredentialValid, omniav1.ConditionAuthConfigured}}},
		{"credential required but absent", Snapshot{Provider: prov(omniav1.ProviderTypeOpenAI, nil)}, want{phase: omniav1.ProviderPhaseError,
			conds: map[string][2]string{omniav1.ConditionCredentialConfigured: {"False", omniav1.ReasonCredentialRequired}},
			event: omniav1.EventCredentialInvalid}},
		{"Secret missing: Error and retried", Snapshot{Provider: prov(omniav1.ProviderTypeOpenAI, withSecret("key"))}, want{phase: omniav1.ProviderPhaseError, retry: true,
			conds: map[string][2]string{
				omniav1.ConditionSecretFound:          {"False", omniav1.ReasonSecretNotFound},
				omniav1.ConditionCredentialConfigured: {"False", omniav1.ReasonSecretNotFound}}}},
		{"Secret without any default key", Snapshot{Provider: prov(omniav1.ProviderTypeOpenAI, withSecret("key")), CredentialSecret: secret("other", "x")},
			want{phase: omniav1.ProviderPhaseError, conds: map[string][2]string{omniav1.ConditionSecretFound: {"False", omniav1.ReasonSecretKeyMissing}}}},
		{"placeholder value", Snapshot{Provider: prov(omniav1.ProviderTypeOpenAI, withSecret("key")), CredentialSecret: secret("OPENAI_API_KEY", "REPLACE-ME please")},
			want{phase: omniav1.ProviderPhaseError, event: omniav1.EventCredentialInvalid, conds: map[string][2]string{
				omniav1.ConditionSecretFound:          {"True", omniav1.ReasonSecretFound},
				omniav1.ConditionCredentialConfigured: {"False", omniav1.ReasonPlaceholderCredential}}}},
		{"key found, not probed", Snapshot{Provider: prov(omniav1.ProviderTypeOpenAI, withSecret("key")), CredentialSecret: secret("api-key", "sk-real")},
			want{phase: omniav1.ProviderPhaseReady, conds: map[string][2]string{
				omniav1.ConditionCredentialConfigured: {"True", omniav1.ReasonSecretFound},
				omniav1.ConditionCredentialValid:      {"Unknown", omniav1.ReasonValidationNotSupported}}}},
		{"probe accepted", Snapshot{Provider: prov(omniav1.ProviderTypeOpenAI, withSecret("key")), CredentialSecret: secret("api-key", "sk"), Probe: &ProbeResult{Verdict: ProbeAccepted}},
			want{phase: omniav1.ProviderPhaseReady, conds: map[string][2]string{omniav1.ConditionCredentialValid: {"True", omniav1.ReasonCredentialAccepted}}}},
		{"a cached verdict of the same Secret version rewrites nothing", Snapshot{Provider: prov(omniav1.ProviderTypeOpenAI, withSecret("key")), CredentialSecret: secret("api-key", "sk"), Probe: &ProbeResult{Verdict: ProbeAccepted}},
			want{phase: omniav1.ProviderPhaseReady, conds: map[string][2]string{omniav1.ConditionCredentialValid: {"True", omniav1.ReasonCredentialAccepted}},
				next: func(s *Snapshot) { s.Probe = &ProbeResult{Verdict: ProbeAccepted, Cached: true} }}},
		{"probe rejected: Error", Snapshot{Provider: prov(omniav1.ProviderTypeOpenAI, withSecret("key")), CredentialSecret: secret("api-key", "sk"), Probe: &ProbeResult{Verdict: ProbeRejected, Detail: "HTTP 401"}},
			want{phase: omniav1.ProviderPhaseError, event: omniav1.EventCredentialInvalid, conds: map[string][2]string{omniav1.ConditionCredentialValid: {"False", omniav1.ReasonCredentialRejected}}}},
		{"probe inconclusive: still Ready", Snapshot{Provider: prov(omniav1.ProviderTypeOpenAI, withSecret("key")), CredentialSecret: secret("api-key", "sk"), Probe: &ProbeResult{Verdict: ProbeError, Detail: "HTTP 503"}},
			want{phase: omniav1.ProviderPhaseReady, conds: map[string][2]string{omniav1.ConditionCredentialValid: {"Unknown", omniav1.ReasonCredentialValidationError}}}},
		{"envVar credential", Snapshot{Provider: prov(omniav1.ProviderTypeClaude, func(s *omniav1.ProviderSpec) { s.Credential = &omniav1.CredentialConfig{EnvVar: "KEY"} })},
			want{phase: omniav1.ProviderPhaseReady, conds: map[string][2]string{omniav1.ConditionCredentialConfigured: {"True", omniav1.ReasonEnvVarConfigured}}, absent: []string{omniav1.ConditionSecretFound}}},
		{"invalid envVar", Snapshot{Provider: prov(omniav1.ProviderTypeClaude, func(s *omniav1.ProviderSpec) { s.Credential = &omniav1.CredentialConfig{EnvVar: "1KEY"} })},
			want{phase: omniav1.ProviderPhaseError, conds: map[string][2]string{omniav1.ConditionCredentialConfigured: {"False", omniav1.ReasonInvalidEnvVar}}}},
		{"filePath credential", Snapshot{Provider: prov(omniav1.ProviderTypeClaude, func(s *omniav1.ProviderSpec) { s.Credential = &omniav1.CredentialConfig{FilePath: "/etc/key"} })},
			want{phase: omniav1.ProviderPhaseReady, conds: map[string][2]string{omniav1.ConditionCredentialConfigured: {"True", omniav1.ReasonFilePathConfigured}}}},
		{"unclean filePath", Snapshot{Provider: prov(omniav1.ProviderTypeClaude, func(s *omniav1.ProviderSpec) { s.Credential = &omniav1.CredentialConfig{FilePath: "/etc/../key"} })},
			want{phase: omniav1.ProviderPhaseError, conds: map[string][2]string{omniav1.ConditionCredentialConfigured: {"False", omniav1.ReasonInvalidFilePath}}}},
		{"two strategies", Snapshot{Provider: prov(omniav1.ProviderTypeClaude, func(s *omniav1.ProviderSpec) {
			s.Credential = &omniav1.CredentialConfig{FilePath: "/k", EnvVar: "K"}
		})}, want{phase: omniav1.ProviderPhaseError, event: omniav1.EventMultipleCredentials,
			conds: map[string][2]string{omniav1.ConditionCredentialConfigured: {"False", omniav1.ReasonMultipleStrategies}}}},
		{"no strategy", Snapshot{Provider: prov(omniav1.ProviderTypeClaude, func(s *omniav1.ProviderSpec) { s.Credential = &omniav1.CredentialConfig{} })},
			want{phase: omniav1.ProviderPhaseError, conds: map[string][2]string{omniav1.ConditionCredentialConfigured: {"False", omniav1.ReasonNoStrategySpecified}}}},
		{"platform workload identity", Snapshot{Provider: prov(omniav1.ProviderTypeClaude, platform(omniav1.PlatformAuthWorkloadIdentity, false))},
			want{phase: omniav1.ProviderPhaseReady, conds: map[string][2]string{
				omniav1.ConditionAuthConfigured:       {"True", omniav1.ReasonWorkloadIdentityConfigured},
				omniav1.ConditionCredentialConfigured: {"True", omniav1.ReasonNoCredentialRequired}}}},
		{"platform access key without ref", Snapshot{Provider: prov(omniav1.ProviderTypeClaude, platform(omniav1.PlatformAuthAccessKey, false))},
			want{phase: omniav1.ProviderPhaseError, conds: map[string][2]string{omniav1.ConditionAuthConfigured: {"False", omniav1.ReasonCredentialsSecretRefNeeded}}}},
		{"platform Secret missing: retried", Snapshot{Provider: prov(omniav1.ProviderTypeClaude, platform(omniav1.PlatformAuthAccessKey, true))},
			want{phase: omniav1.ProviderPhaseError, retry: true, conds: map[string][2]string{omniav1.ConditionAuthConfigured: {"False", omniav1.ReasonCredentialsSecretNotFound}}}},
		{"platform Secret complete", Snapshot{Provider: prov(omniav1.ProviderTypeClaude, platform(omniav1.PlatformAuthAccessKey, true)), AuthSecret: awsSecret},
			want{phase: omniav1.ProviderPhaseReady, conds: map[string][2]string{omniav1.ConditionAuthConfigured: {"True", omniav1.ReasonAuthConfigured}}}},
		{"model missing", Snapshot{Provider: prov(omniav1.ProviderTypeOllama, func(s *omniav1.ProviderSpec) { s.Model = "" })},
			want{phase: omniav1.ProviderPhaseError, event: omniav1.EventModelInvalid, conds: map[string][2]string{omniav1.ConditionModelValid: {"False", omniav1.ReasonModelMissing}}}},
		{"endpoint unreachable: Unavailable, checked again in 30s", Snapshot{Provider: prov(omniav1.ProviderTypeOllama, nil), Health: &HealthResult{URL: "http://x/api/tags", Err: errors.New("connection refused")}},
			want{phase: omniav1.ProviderPhaseUnavailable, requeue: 30 * time.Second, conds: map[string][2]string{
				omniav1.ConditionEndpointReachable: {"False", omniav1.ReasonEndpointUnreachable},
				omniav1.ConditionReady:             {"False", ReasonNotReady}}}},
		{"endpoint reachable: no timer", Snapshot{Provider: prov(omniav1.ProviderTypeOllama, nil), Health: &HealthResult{URL: "http://x/api/tags"}},
			want{phase: omniav1.ProviderPhaseReady, conds: map[string][2]string{omniav1.ConditionEndpointReachable: {"True", omniav1.ReasonEndpointReachable}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.snap.Now = t0
			d := Decide(tc.snap)
			if d.Status.Phase != tc.want.phase {
				t.Fatalf("phase %s, want %s: %+v", d.Status.Phase, tc.want.phase, d.Status.Conditions)
			}
			for typ, w := range tc.want.conds {
				c := meta.FindStatusCondition(d.Status.Conditions, typ)
				if c == nil || string(c.Status) != w[0] || c.Reason != w[1] {
					t.Errorf("condition %s = %+v, want %s/%s", typ, c, w[0], w[1])
				}
			}
			for _, typ := range tc.want.absent {
				if c := meta.FindStatusCondition(d.Status.Conditions, typ); c != nil {
					t.Errorf("condition %s present: %+v", typ, c)
				}
			}
			if (d.Retry != nil) != tc.want.retry {
				t.Errorf("retry %v, want %v", d.Retry, tc.want.retry)
			}
			if d.RequeueAfter != tc.want.requeue {
				t.Errorf("requeue %s, want %s", d.RequeueAfter, tc.want.requeue)
			}
			if tc.want.event == "" && len(d.Events) > 0 || tc.want.event != "" && (len(d.Events) != 1 || d.Events[0].Reason != tc.want.event) {
				t.Errorf("events %+v, want %q", d.Events, tc.want.event)
			}
			for _, c := range d.Status.Conditions {
				if strings.Contains(c.Message, "sk-real") || strings.Contains(c.Message, "REPLACE-ME") {
					t.Errorf("condition %s leaks the secret value: %q", c.Type, c.Message)
				}
			}
			if tc.want.phase == omniav1.ProviderPhaseReady {
				if c := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionReady); !strings.Contains(c.Message, "text, tools") {
					t.Errorf("Ready message %q lacks the capabilities", c.Message)
				}
			}
			if tc.want.next != nil {
				next := tc.snap
				next.Provider = tc.snap.Provider.DeepCopy()
				next.Provider.Status = d.Status
				next.Now = metav1.NewTime(t0.Add(time.Minute))
				tc.want.next(&next)
				if again := Decide(next); again.Changed || len(again.Events) > 0 {
					t.Errorf("the next pass rewrites the status: %+v", again.Status.Conditions)
				}
			}
		})
	}
}

func TestDecideIdempotent(t *testing.T) {
	p := prov(omniav1.ProviderTypeOllama, nil)
	d := Decide(Snapshot{Provider: p, Health: &HealthResult{URL: "u"}, Now: t0})
	p.Status = d.Status
	again := Decide(Snapshot{Provider: p, Health: &HealthResult{URL: "u"}, Now: metav1.NewTime(t0.Add(time.Minute))})
	if again.Changed || len(again.Events) > 0 {
		t.Fatalf("unchanged Provider rewritten: %+v", again)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   ProbeVerdict
	}{
		{200, "", ProbeAccepted}, {401, "", ProbeRejected}, {403, "", ProbeRejected},
		{400, `{"error":{"status":"INVALID_ARGUMENT","reason":"API_KEY_INVALID"}}`, ProbeRejected},
		{400, `{"error":"bad request"}`, ProbeError}, {500, "", ProbeError}, {429, "", ProbeError},
	} {
		if got := Classify(tc.status, tc.body).Verdict; got != tc.want {
			t.Errorf("%d %q: %v, want %v", tc.status, tc.body, got, tc.want)
		}
	}
}

func TestHealthURL(t *testing.T) {
	for _, tc := range []struct {
		spec omniav1.ProviderSpec
		want string
	}{
		{omniav1.ProviderSpec{Type: omniav1.ProviderTypeMock}, ""},
		{omniav1.ProviderSpec{Type: omniav1.ProviderTypeClaude}, "https://api.anthropic.com"},
		{omniav1.ProviderSpec{Type: omniav1.ProviderTypeOllama, BaseURL: "http://o:11434/"}, "http://o:11434/api/tags"},
		{omniav1.ProviderSpec{Type: omniav1.ProviderTypeOllama, BaseURL: "http://o:11434/v1?key=k"}, "http://o:11434/v1/api/tags?key=k"},
		{omniav1.ProviderSpec{Type: omniav1.ProviderTypeVLLM}, ""},
		{omniav1.ProviderSpec{Type: omniav1.ProviderTypeOpenAI, Role: omniav1.ProviderRoleTTS}, ""},
		{omniav1.ProviderSpec{Type: omniav1.ProviderTypeClaude, Platform: &omniav1.ProviderPlatform{Type: omniav1.PlatformBedrock}}, ""},
	} {
		if got := HealthURL(&tc.spec); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.spec, got, tc.want)
		}
	}
}

// TestCapabilitiesInStatus: a Ready Provider lists its capabilities in
// status; one that is not Ready lists none, so no AgentRuntime relies on it.
func TestCapabilitiesInStatus(t *testing.T) {
	ready := Decide(Snapshot{Provider: prov(omniav1.ProviderTypeMock, nil), Now: t0})
	if ready.Status.Phase != omniav1.ProviderPhaseReady || len(ready.Status.Capabilities) != 2 || ready.Status.Capabilities[1] != omniav1.CapabilityTools {
		t.Errorf("a Ready Provider lists its capabilities: %+v", ready.Status)
	}
	down := Decide(Snapshot{Provider: prov(omniav1.ProviderTypeOllama, nil), Health: &HealthResult{URL: "u", Err: errUnreachable}, Now: t0})
	if down.Status.Phase == omniav1.ProviderPhaseReady || len(down.Status.Capabilities) != 0 {
		t.Errorf("an unavailable Provider lists no capabilities: %+v", down.Status)
	}
}

var errUnreachable = errors.New("connection refused")
