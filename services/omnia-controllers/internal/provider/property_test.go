package provider

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	pt "github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

// TestDecideProperties checks Decide on random Providers of every role,
// type, platform and credential strategy the CRD admits (and a few it no
// longer does), with random Secrets, endpoint and probe results and
// stored statuses:
//
//   - no input makes it panic, and it leaves its input as it was;
//   - the same input gives the same decision;
//   - the only timer is UnreachableRetry, exactly while the endpoint is
//     unreachable;
//   - its status, stored and decided on again later with the same
//     Secrets and check results, needs no write and emits no event; so
//     does the next pass's cached probe verdict, which the reconciler
//     gets for the same Secret version;
//   - the phase follows the conditions (Unavailable: endpoint
//     unreachable; Error: a configuration or credential condition False;
//     else Ready), Ready and the capabilities are reported only in phase
//     Ready, and Retry is set exactly when a named Secret is missing.
func TestDecideProperties(t *testing.T) {
	pt.RunCounted(t, genSnapshot, fresh, Decide, sameDecision, countOutcomes, checkTimer, checkStatus, checkFixedPoint).
		Require(t, 0.02, "phase Ready", "phase Error", "phase Unavailable", "retry", "events", "probed", "status write", "no status write")
}

// countOutcomes counts what a decision reached, for Require.
func countOutcomes(c pt.Counts, s Snapshot, d Decision) {
	c.Add("phase " + string(d.Status.Phase))
	if d.Retry != nil {
		c.Add("retry")
	}
	if len(d.Events) > 0 {
		c.Add("events")
	}
	if s.Probe != nil {
		c.Add("probed")
	}
	c.AddWrite(d.Changed)
}

// checkTimer: the only timer is UnreachableRetry, exactly while the
// endpoint is unreachable.
func checkTimer(_ *rand.Rand, s Snapshot, d Decision) error {
	unreachable := s.Health != nil && s.Health.Err != nil
	switch {
	case unreachable && d.RequeueAfter != UnreachableRetry:
		return fmt.Errorf("unreachable endpoint requeues after %s, want %s", d.RequeueAfter, UnreachableRetry)
	case !unreachable && d.RequeueAfter != 0:
		return fmt.Errorf("requeue after %s without an unreachable endpoint", d.RequeueAfter)
	}
	return nil
}

// fresh copies the Provider, the part of a snapshot Decide could write.
func fresh(s Snapshot) Snapshot {
	s.Provider = s.Provider.DeepCopy()
	return s
}

func sameDecision(a, b Decision) bool {
	errText := func(e error) string {
		if e == nil {
			return ""
		}
		return e.Error()
	}
	return equality.Semantic.DeepEqual(a.Status, b.Status) && a.Changed == b.Changed && a.RequeueAfter == b.RequeueAfter &&
		equality.Semantic.DeepEqual(a.Events, b.Events) && errText(a.Retry) == errText(b.Retry)
}

// checkStatus holds the decided status to what phase and Ready promise.
func checkStatus(_ *rand.Rand, s Snapshot, d Decision) error {
	st := d.Status
	p := s.Provider
	conds := st.Conditions
	var want omniav1.ProviderPhase
	switch {
	case meta.IsStatusConditionFalse(conds, omniav1.ConditionEndpointReachable):
		want = omniav1.ProviderPhaseUnavailable
	case slices.ContainsFunc([]string{omniav1.ConditionSecretFound, omniav1.ConditionCredentialConfigured, omniav1.ConditionCredentialValid,
		omniav1.ConditionAuthConfigured, omniav1.ConditionModelValid}, func(typ string) bool { return meta.IsStatusConditionFalse(conds, typ) }):
		want = omniav1.ProviderPhaseError
	default:
		want = omniav1.ProviderPhaseReady
	}
	if st.Phase != want {
		return fmt.Errorf("phase %s, want %s from conditions %+v", st.Phase, want, conds)
	}
	if (s.Health == nil) != (meta.FindStatusCondition(conds, omniav1.ConditionEndpointReachable) == nil) {
		return fmt.Errorf("EndpointReachable is set without a health check, or missing with one")
	}
	ready := meta.FindStatusCondition(conds, omniav1.ConditionReady)
	if ready == nil || (ready.Status == metav1.ConditionTrue) != (st.Phase == omniav1.ProviderPhaseReady) {
		return fmt.Errorf("Ready condition %+v in phase %s", ready, st.Phase)
	}
	if len(st.Capabilities) > 0 && (st.Phase != omniav1.ProviderPhaseReady || !slices.Equal(st.Capabilities, p.Spec.Capabilities)) {
		return fmt.Errorf("capabilities %v reported in phase %s", st.Capabilities, st.Phase)
	}
	for _, c := range conds {
		if c.Reason == "" || c.ObservedGeneration != p.Generation && slices.Contains(managedConditions, c.Type) {
			return fmt.Errorf("condition %+v not set for generation %d", c, p.Generation)
		}
	}
	missing := false
	if c := p.Spec.Credential; c != nil && c.SecretRef != nil && c.EnvVar == "" && c.FilePath == "" && s.CredentialSecret == nil {
		missing = true
	}
	if a := p.Spec.Auth; p.Spec.IsPlatformHosted() && a != nil && a.Type != omniav1.PlatformAuthWorkloadIdentity && a.CredentialsSecretRef != nil && s.AuthSecret == nil {
		missing = true
	}
	switch {
	case missing && d.Retry == nil:
		return errors.New("a named Secret missing, but no retry")
	case !missing && d.Retry != nil:
		return fmt.Errorf("retry with no named Secret missing: %w", d.Retry)
	}
	if st.ObservedGeneration != p.Generation {
		return fmt.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, p.Generation)
	}
	if u := meta.FindStatusCondition(conds, omniav1.ConditionUnsupported); u == nil || (u.Status == metav1.ConditionTrue) != (len(UnsupportedFields(&p.Spec)) > 0) {
		return fmt.Errorf("Unsupported %+v for unimplemented fields %v", u, UnsupportedFields(&p.Spec))
	}
	return nil
}

// managedConditions are the conditions Decide sets or removes; another
// condition in the stored status is left as it was.
var managedConditions = []string{omniav1.ConditionSecretFound, omniav1.ConditionCredentialConfigured, omniav1.ConditionCredentialValid,
	omniav1.ConditionAuthConfigured, omniav1.ConditionModelValid, omniav1.ConditionEndpointReachable, omniav1.ConditionReady,
	omniav1.ConditionUnsupported}

// checkFixedPoint stores the decided status and decides again a while
// later, once with the same check results and once with the probe verdict
// the cache hands the next pass.
func checkFixedPoint(r *rand.Rand, s Snapshot, d Decision) error {
	old, _ := pt.Stored(s.Provider.Status)
	stored, err := pt.Written(d.Status, old, d.Changed)
	if err != nil {
		return err
	}
	next := func(probe *ProbeResult) Snapshot {
		s2 := fresh(s)
		s2.Provider.Status, s2.Now, s2.Probe = stored, pt.Later(r, s.Now, 30*time.Minute), probe
		return s2
	}
	check := func(what string, s2 Snapshot) error {
		d2 := Decide(s2)
		if d2.Changed || !equality.Semantic.DeepEqual(d2.Status, stored) {
			return fmt.Errorf("%s: the written status needs another write: %s", what, pt.Diff(stored, d2.Status))
		}
		if len(d2.Events) > 0 {
			return fmt.Errorf("%s: events %v repeated without a transition", what, d2.Events)
		}
		return nil
	}
	if err := check("same results", next(s.Probe)); err != nil {
		return err
	}
	if s.Probe != nil && !s.Probe.Cached {
		cached := *s.Probe
		cached.Cached = true
		return check("the cached verdict of the same Secret version", next(&cached))
	}
	return nil
}

// roleTypes are the types the CRD admits for each role.
var roleTypes = map[omniav1.ProviderRole][]omniav1.ProviderType{
	omniav1.ProviderRoleLLM:       {omniav1.ProviderTypeClaude, omniav1.ProviderTypeOpenAI, omniav1.ProviderTypeGemini, omniav1.ProviderTypeOllama, omniav1.ProviderTypeMock, omniav1.ProviderTypeVLLM},
	omniav1.ProviderRoleEmbedding: {omniav1.ProviderTypeOpenAI, omniav1.ProviderTypeVoyageAI, omniav1.ProviderTypeGemini, omniav1.ProviderTypeOllama},
	omniav1.ProviderRoleTTS:       {omniav1.ProviderTypeOpenAI, omniav1.ProviderTypeCartesia, omniav1.ProviderTypeElevenLabs},
	omniav1.ProviderRoleSTT:       {omniav1.ProviderTypeOpenAI},
	omniav1.ProviderRoleImage:     {omniav1.ProviderTypeImagen},
	omniav1.ProviderRoleInference: {omniav1.ProviderTypeHuggingFace},
}

// platformAuths are the auth types the CRD admits on each platform.
var platformAuths = map[omniav1.PlatformType][]omniav1.PlatformAuthType{
	omniav1.PlatformBedrock: {omniav1.PlatformAuthWorkloadIdentity, omniav1.PlatformAuthAccessKey},
	omniav1.PlatformVertex:  {omniav1.PlatformAuthWorkloadIdentity, omniav1.PlatformAuthServiceAccount},
	omniav1.PlatformAzure:   {omniav1.PlatformAuthWorkloadIdentity, omniav1.PlatformAuthServicePrincipal},
}

// genSpec draws a ProviderSpec the CRD's rules admit; legacy breaks one
// of them, as an object stored before the rule existed does.
func genSpec(r *rand.Rand, legacy bool) omniav1.ProviderSpec {
	role := pt.Pick(r, omniav1.ProviderRoleLLM, omniav1.ProviderRoleLLM, omniav1.ProviderRoleEmbedding, omniav1.ProviderRoleTTS,
		omniav1.ProviderRoleSTT, omniav1.ProviderRoleImage, omniav1.ProviderRoleInference)
	spec := omniav1.ProviderSpec{Type: pt.Pick(r, roleTypes[role]...)}
	if role != omniav1.ProviderRoleLLM || pt.Chance(r, 0.5) {
		spec.Role = role
	}
	if spec.Type != omniav1.ProviderTypeMock || pt.Chance(r, 0.3) {
		spec.Model = pt.Pick(r, "gpt-4o", "claude-x", "m")
	}
	if pt.Chance(r, 0.3) {
		spec.BaseURL = pt.Pick(r, "http://llm.local:8080", "https://api.example/v1")
	}
	for _, c := range []omniav1.ProviderCapability{omniav1.CapabilityText, omniav1.CapabilityStreaming, omniav1.CapabilityTools, omniav1.CapabilityVision} {
		if pt.Chance(r, 0.4) {
			spec.Capabilities = append(spec.Capabilities, c)
		}
	}
	if pt.Chance(r, 0.3) { // the CRD admits each only with its role
		switch role {
		case omniav1.ProviderRoleTTS:
			spec.TTS = &omniav1.TTSConfig{Voice: "v"}
		case omniav1.ProviderRoleSTT:
			spec.STT = &omniav1.STTConfig{Language: "en"}
		case omniav1.ProviderRoleEmbedding:
			spec.Embedding = &omniav1.EmbeddingConfig{Dimensions: pt.Ptr(int32(768))}
		}
	}
	hostable := (role == omniav1.ProviderRoleLLM || role == omniav1.ProviderRoleEmbedding) &&
		slices.Contains([]omniav1.ProviderType{omniav1.ProviderTypeClaude, omniav1.ProviderTypeOpenAI, omniav1.ProviderTypeGemini}, spec.Type)
	if hostable && pt.Chance(r, 0.3) {
		var plats []omniav1.PlatformType
		for _, pl := range []omniav1.PlatformType{omniav1.PlatformBedrock, omniav1.PlatformVertex, omniav1.PlatformAzure} {
			openAIOnVertex := spec.Type == omniav1.ProviderTypeOpenAI && pl == omniav1.PlatformVertex
			geminiOffVertex := spec.Type == omniav1.ProviderTypeGemini && pl != omniav1.PlatformVertex
			if !openAIOnVertex && !geminiOffVertex { // the CRD refuses both
				plats = append(plats, pl)
			}
		}
		pl := pt.Pick(r, plats...)
		spec.Platform = &omniav1.ProviderPlatform{Type: pl, Project: "p", Endpoint: "https://azure.example"}
		spec.Auth = &omniav1.ProviderAuth{Type: pt.Pick(r, platformAuths[pl]...)}
		if spec.Auth.Type != omniav1.PlatformAuthWorkloadIdentity && (!legacy || pt.Chance(r, 0.5)) {
			spec.Auth.CredentialsSecretRef = &omniav1.SecretKeyRef{Name: "platform-creds", Key: pt.MaybePtr(r, 0.3, "custom")}
		}
		if legacy && pt.Chance(r, 0.3) {
			spec.Auth = nil
		}
	}
	if pt.Chance(r, 0.8) {
		c := &omniav1.CredentialConfig{}
		switch r.IntN(5) {
		case 0, 1, 2:
			c.SecretRef = &omniav1.SecretKeyRef{Name: "api-key", Key: pt.MaybePtr(r, 0.3, "custom")}
		case 3:
			c.EnvVar = pt.Pick(r, "OPENAI_API_KEY", "_K")
			if legacy {
				c.EnvVar = "1BAD"
			}
		case 4:
			c.FilePath = pt.Pick(r, "/var/run/key", "/k")
			if legacy {
				c.FilePath = pt.Pick(r, "/a/../k", "relative")
			}
		}
		if legacy && pt.Chance(r, 0.3) {
			c.EnvVar = "SECOND" // more than one strategy
		}
		if pt.Chance(r, 0.05) {
			c = &omniav1.CredentialConfig{} // none set: admitted, and judged
		}
		spec.Credential = c
	}
	return spec
}

// genSnapshot draws a Provider, the Secrets it names (or their absence),
// the check results the reconciler would gather, and a stored status.
func genSnapshot(r *rand.Rand) Snapshot {
	p := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Generation: int64(1 + r.IntN(4))},
		Spec: genSpec(r, pt.Chance(r, 0.1))}
	s := Snapshot{Provider: p, Now: pt.MetaTime(r)}
	if c := p.Spec.Credential; c != nil && c.SecretRef != nil && pt.Chance(r, 0.85) {
		s.CredentialSecret = genSecret(r, "api-key", append(p.Spec.CredentialKeys(), "other"))
	}
	if a := p.Spec.Auth; a != nil && a.CredentialsSecretRef != nil && pt.Chance(r, 0.85) {
		keys := []string{"custom", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "credentials.json", "AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET"}
		s.AuthSecret = genSecret(r, "platform-creds", keys)
	}
	if u := HealthURL(&p.Spec); u != "" {
		s.Health = &HealthResult{URL: u}
		if pt.Chance(r, 0.3) {
			s.Health.Err = pt.Pick(r, errors.New("connection refused"), errors.New("context deadline exceeded"))
		}
	}
	// The reconciler probes a real-looking key only, and only while the
	// endpoint answers.
	if s.CredentialSecret != nil && (s.Health == nil || s.Health.Err == nil) && pt.Chance(r, 0.7) {
		if _, v, ok := CredentialValue(&p.Spec, s.CredentialSecret); ok && !IsPlaceholder(v) {
			s.Probe = &ProbeResult{Verdict: pt.Pick(r, ProbeUnsupported, ProbeAccepted, ProbeAccepted, ProbeRejected, ProbeError),
				Detail: pt.Pick(r, "HTTP 401", "HTTP 500", ""), Cached: pt.Chance(r, 0.5)}
		}
	}
	p.Status = genStatus(r, s)
	s.Provider = pt.Cached(p)
	return s
}

func genSecret(r *rand.Rand, name string, keys []string) *corev1.Secret {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "7"}, Data: map[string][]byte{}}
	for _, k := range keys {
		if pt.Chance(r, 0.5) {
			sec.Data[k] = []byte(pt.Pick(r, "sk-real", "  sk-real\n", "replace-me", ""))
		}
	}
	return sec
}

// genStatus draws a stored status: none, a random one, or an earlier
// pass's decision (another generation, other check results).
func genStatus(r *rand.Rand, s Snapshot) omniav1.ProviderStatus {
	switch r.IntN(4) {
	case 0:
		return omniav1.ProviderStatus{}
	case 1:
		return omniav1.ProviderStatus{
			Phase:               pt.Pick(r, omniav1.ProviderPhaseReady, omniav1.ProviderPhaseError, omniav1.ProviderPhaseUnavailable, ""),
			ObservedGeneration:  int64(r.IntN(4)),
			LastHealthCheckTime: pt.MaybeTime(r, 0.5),
			Capabilities:        []omniav1.ProviderCapability{omniav1.CapabilityText}[:r.IntN(2)],
			Conditions:          pt.Conditions(r, 0.5, append(slices.Clone(managedConditions), "SomeOtherCondition")...),
		}
	}
	prev := s
	prev.Provider = s.Provider.DeepCopy()
	pt.Earlier(r, &prev.Now, prev.Provider)
	if prev.Health != nil && pt.Chance(r, 0.3) {
		prev.Health = &HealthResult{URL: prev.Health.URL, Err: errors.New("connection refused")}
	}
	return Decide(prev).Status
}
