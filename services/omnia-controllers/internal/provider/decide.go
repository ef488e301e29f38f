// Package provider is the Provider controller: it checks a Provider's
// credential and platform authentication against its Secrets, probes the
// credential with the vendor where the vendor offers a cheap call, checks
// that the endpoint answers, and summarises the result in phase and a
// Ready condition that lists the Provider's capabilities. An unreachable
// endpoint is checked again every 30 seconds, and only then. Decide is
// pure; Reconciler gathers the Secrets, runs the HTTP checks and writes.
package provider

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/safeurl"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// UnreachableRetry is how often an unreachable endpoint is checked again.
const UnreachableRetry = 30 * time.Second

// Ready condition reasons. The Ready condition summarises the others for
// the AgentRuntime controller and people; its message lists capabilities.
const (
	ReasonReady    = "ProviderReady"
	ReasonNotReady = "ProviderNotReady"
)

// HealthResult is the outcome of the endpoint check.
type HealthResult struct {
	// URL is what was requested.
	URL string
	// Err is the transport error; nil means the endpoint answered (any HTTP
	// status counts: only the network path is judged).
	Err error
}

// ProbeVerdict is the vendor's answer to the credential probe.
type ProbeVerdict int

// Probe verdicts.
const (
	// ProbeUnsupported: the vendor has no cheap authenticated call.
	ProbeUnsupported ProbeVerdict = iota
	// ProbeAccepted: 2xx.
	ProbeAccepted
	// ProbeRejected: 401, 403 or a 400 naming an invalid key.
	ProbeRejected
	// ProbeRefused: the probe was not sent, because the address is not
	// one a key may be sent to (checkProbeURL); Detail says why.
	ProbeRefused
	// ProbeError: any other status or a transport error; says nothing
	// about the credential.
	ProbeError
)

// ProbeResult is the outcome of the credential probe.
type ProbeResult struct {
	// Verdict classifies the answer.
	Verdict ProbeVerdict
	// Detail is a short, secret-free explanation ("HTTP 401").
	Detail string
	// Cached reports a result reused for the same Secret version. The
	// status does not show it: a reused verdict is the same verdict.
	Cached bool
}

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Provider is the object being reconciled.
	Provider *omniav1.Provider
	// CredentialSecret is the Secret of credential.secretRef; nil when it
	// does not exist or none is named.
	CredentialSecret *corev1.Secret
	// AuthSecret is the Secret of auth.credentialsSecretRef; nil when it
	// does not exist or none is named.
	AuthSecret *corev1.Secret
	// Health is the endpoint check; nil when the Provider has no endpoint
	// to check (mock, platform-hosted, speech and image roles).
	Health *HealthResult
	// Probe is the credential probe; nil when the credential was not
	// probed.
	Probe *ProbeResult
	// Now stamps condition transitions.
	Now metav1.Time
}

// Decision is the desired status and the reconcile's result.
type Decision struct {
	// Status is the complete desired status.
	Status omniav1.ProviderStatus
	// Changed reports whether Status differs from the stored status.
	Changed bool
	// Events are emitted once per condition transition.
	Events []kubeutil.Event
	// RequeueAfter is UnreachableRetry while the endpoint is unreachable.
	RequeueAfter time.Duration
	// Retry is returned as the reconcile error: a named Secret is missing,
	// and a reference to a missing object is retried with backoff.
	Retry error
}

var envVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// placeholders are values people leave in example Secrets; matched
// case-insensitively as substrings.
var placeholders = []string{"replace-with-real-key", "replace-me", "your-api-key-here", "changeme"}

// decider judges one Provider's status.
type decider struct {
	kubeutil.Judgement
	s     Snapshot
	st    *omniav1.ProviderStatus
	retry error
}

// Decide computes a Provider's status.
func Decide(s Snapshot) Decision {
	p := s.Provider
	st := p.Status.DeepCopy()
	st.ObservedGeneration = p.Generation
	d := &decider{s: s, st: st, Judgement: kubeutil.Judgement{Conditions: &st.Conditions, Generation: p.Generation, Now: s.Now}}

	d.credential()
	d.platformAuth()
	d.model()
	d.unsupported()
	var requeue time.Duration
	switch {
	case s.Health == nil:
		meta.RemoveStatusCondition(&st.Conditions, omniav1.ConditionEndpointReachable)
	case s.Health.Err != nil:
		d.Set(omniav1.ConditionEndpointReachable, metav1.ConditionFalse, omniav1.ReasonEndpointUnreachable,
			fmt.Sprintf("%s: %v; checked again every %s", safeurl.Parse(s.Health.URL), s.Health.Err, UnreachableRetry))
		requeue = UnreachableRetry
	default:
		d.Set(omniav1.ConditionEndpointReachable, metav1.ConditionTrue, omniav1.ReasonEndpointReachable, safeurl.Parse(s.Health.URL)+" answered")
	}
	if s.Health != nil {
		now := s.Now
		st.LastHealthCheckTime = &now
	}

	st.Phase = phase(st.Conditions)
	st.Capabilities = nil
	if st.Phase == omniav1.ProviderPhaseReady && len(p.Spec.Capabilities) > 0 {
		st.Capabilities = append([]omniav1.ProviderCapability(nil), p.Spec.Capabilities...)
	}
	if st.Phase == omniav1.ProviderPhaseReady {
		d.Set(omniav1.ConditionReady, metav1.ConditionTrue, ReasonReady, "capabilities: "+capabilities(p))
	} else {
		d.Set(omniav1.ConditionReady, metav1.ConditionFalse, ReasonNotReady, fmt.Sprintf("phase %s; capabilities: %s", st.Phase, capabilities(p)))
	}
	prev := p.Status.DeepCopy()
	cmp := st.DeepCopy()
	prev.LastHealthCheckTime, cmp.LastHealthCheckTime = nil, nil
	changed := !equality.Semantic.DeepEqual(prev, cmp)
	if !changed {
		// Keep the stored check time: a healthy endpoint is not rewritten
		// on every pass.
		st.LastHealthCheckTime = p.Status.LastHealthCheckTime
	}
	return Decision{Status: *st, Changed: changed, Events: d.Events, RequeueAfter: requeue, Retry: d.retry}
}

// phase: Unavailable while the endpoint is unreachable; Error when any
// configuration or credential condition is False; otherwise Ready. An
// Unknown CredentialValid (a probe that could not decide) keeps Ready.
func phase(conds []metav1.Condition) omniav1.ProviderPhase {
	if meta.IsStatusConditionFalse(conds, omniav1.ConditionEndpointReachable) {
		return omniav1.ProviderPhaseUnavailable
	}
	for _, t := range []string{omniav1.ConditionSecretFound, omniav1.ConditionCredentialConfigured, omniav1.ConditionCredentialValid,
		omniav1.ConditionAuthConfigured, omniav1.ConditionModelValid} {
		if meta.IsStatusConditionFalse(conds, t) {
			return omniav1.ProviderPhaseError
		}
	}
	return omniav1.ProviderPhaseReady
}

func capabilities(p *omniav1.Provider) string {
	if len(p.Spec.Capabilities) == 0 {
		return "none declared"
	}
	out := make([]string, len(p.Spec.Capabilities))
	for i, c := range p.Spec.Capabilities {
		out[i] = string(c)
	}
	return strings.Join(out, ", ")
}

func (d *decider) credential() {
	spec := &d.s.Provider.Spec
	c := spec.Credential
	if c == nil {
		if spec.RequiresCredential() {
			d.Set(omniav1.ConditionSecretFound, metav1.ConditionFalse, omniav1.ReasonSecretNotFound, "no credential configured")
			changed := d.Set(omniav1.ConditionCredentialConfigured, metav1.ConditionFalse, omniav1.ReasonCredentialRequired,
				fmt.Sprintf("type %s needs spec.credential (secretRef, envVar or filePath)", spec.Type))
			d.WarnOn(changed, omniav1.EventCredentialInvalid, "spec.credential is required for type "+string(spec.Type))
		} else {
			d.Set(omniav1.ConditionSecretFound, metav1.ConditionTrue, omniav1.ReasonNoSecretRequired, "no Secret is needed")
			d.Set(omniav1.ConditionCredentialConfigured, metav1.ConditionTrue, omniav1.ReasonNoCredentialRequired, noCredentialWhy(spec))
		}
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionCredentialValid)
		return
	}
	n := 0
	for _, set := range []bool{c.SecretRef != nil, c.EnvVar != "", c.FilePath != ""} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		d.Set(omniav1.ConditionCredentialConfigured, metav1.ConditionFalse, omniav1.ReasonNoStrategySpecified, "spec.credential sets none of secretRef, envVar and filePath")
	case n > 1:
		changed := d.Set(omniav1.ConditionCredentialConfigured, metav1.ConditionFalse, omniav1.ReasonMultipleStrategies, "spec.credential sets more than one of secretRef, envVar and filePath")
		d.WarnOn(changed, omniav1.EventMultipleCredentials, "spec.credential must set exactly one of secretRef, envVar and filePath")
	case c.EnvVar != "":
		d.external(envVarRE.MatchString(c.EnvVar), omniav1.ReasonEnvVarConfigured, omniav1.ReasonInvalidEnvVar,
			fmt.Sprintf("environment variable %s", c.EnvVar))
	case c.FilePath != "":
		d.external(strings.HasPrefix(c.FilePath, "/") && path.Clean(c.FilePath) == c.FilePath, omniav1.ReasonFilePathConfigured, omniav1.ReasonInvalidFilePath,
			fmt.Sprintf("file %s", c.FilePath))
	default:
		d.secretRef()
		return
	}
	meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionSecretFound)
	if n != 1 {
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionCredentialValid)
	}
}

func noCredentialWhy(spec *omniav1.ProviderSpec) string {
	if spec.IsPlatformHosted() {
		return "platform-hosted: authenticated through spec.auth"
	}
	return fmt.Sprintf("type %s runs without an API key", spec.Type)
}

// external judges an envVar or filePath credential, which the controller
// cannot read: its shape only, and the vendor probe is not possible.
func (d *decider) external(ok bool, okReason, badReason, what string) {
	if !ok {
		d.Set(omniav1.ConditionCredentialConfigured, metav1.ConditionFalse, badReason, what+" is not valid")
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionCredentialValid)
		return
	}
	d.Set(omniav1.ConditionCredentialConfigured, metav1.ConditionTrue, okReason, what+" supplies the key")
	d.Set(omniav1.ConditionCredentialValid, metav1.ConditionUnknown, omniav1.ReasonValidationNotSupported,
		"the controller cannot read a key held in the runtime's "+what)
}

func (d *decider) secretRef() {
	spec := &d.s.Provider.Spec
	ref := spec.Credential.SecretRef
	sec := d.s.CredentialSecret
	if sec == nil {
		msg := fmt.Sprintf("Secret %q not found", ref.Name)
		d.Set(omniav1.ConditionSecretFound, metav1.ConditionFalse, omniav1.ReasonSecretNotFound, msg)
		d.Set(omniav1.ConditionCredentialConfigured, metav1.ConditionFalse, omniav1.ReasonSecretNotFound, msg)
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionCredentialValid)
		d.retry = fmt.Errorf("check Provider %s/%s: %s", d.s.Provider.Namespace, d.s.Provider.Name, msg)
		return
	}
	key, value, ok := CredentialValue(spec, sec)
	if !ok {
		msg := fmt.Sprintf("Secret %q has none of the keys %s", ref.Name, strings.Join(spec.CredentialKeys(), ", "))
		d.Set(omniav1.ConditionSecretFound, metav1.ConditionFalse, omniav1.ReasonSecretKeyMissing, msg)
		d.Set(omniav1.ConditionCredentialConfigured, metav1.ConditionFalse, omniav1.ReasonSecretKeyMissing, msg)
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionCredentialValid)
		return
	}
	d.Set(omniav1.ConditionSecretFound, metav1.ConditionTrue, omniav1.ReasonSecretFound, fmt.Sprintf("Secret %q has key %s", ref.Name, key))
	if IsPlaceholder(value) {
		msg := fmt.Sprintf("key %s of Secret %q holds a placeholder value, not an API key", key, ref.Name)
		changed := d.Set(omniav1.ConditionCredentialConfigured, metav1.ConditionFalse, omniav1.ReasonPlaceholderCredential, msg)
		d.WarnOn(changed, omniav1.EventCredentialInvalid, msg)
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionCredentialValid)
		return
	}
	d.Set(omniav1.ConditionCredentialConfigured, metav1.ConditionTrue, omniav1.ReasonSecretFound, fmt.Sprintf("key %s of Secret %q", key, ref.Name))
	d.credentialValid()
}

func (d *decider) credentialValid() {
	pr := d.s.Probe
	if pr == nil || pr.Verdict == ProbeUnsupported {
		d.Set(omniav1.ConditionCredentialValid, metav1.ConditionUnknown, omniav1.ReasonValidationNotSupported,
			fmt.Sprintf("no credential probe for type %s", d.s.Provider.Spec.Type))
		return
	}
	// The message says what the vendor answered, not whether this pass
	// asked it or reused its answer (pr.Cached): a pass that reuses the
	// verdict a pass just recorded must find nothing to write, and each
	// write of this status reaches every agent using the Provider.
	switch pr.Verdict {
	case ProbeAccepted:
		d.Set(omniav1.ConditionCredentialValid, metav1.ConditionTrue, omniav1.ReasonCredentialAccepted, "the vendor accepted the key")
	case ProbeRejected:
		msg := "the vendor rejected the key: " + pr.Detail
		changed := d.Set(omniav1.ConditionCredentialValid, metav1.ConditionFalse, omniav1.ReasonCredentialRejected, msg)
		d.WarnOn(changed, omniav1.EventCredentialInvalid, msg)
	case ProbeRefused:
		d.Set(omniav1.ConditionCredentialValid, metav1.ConditionUnknown, omniav1.ReasonCredentialProbeRefused, "the key was not sent: "+pr.Detail)
	default:
		d.Set(omniav1.ConditionCredentialValid, metav1.ConditionUnknown, omniav1.ReasonCredentialValidationError, "could not check the key: "+pr.Detail)
	}
}

func (d *decider) platformAuth() {
	spec := &d.s.Provider.Spec
	if !spec.IsPlatformHosted() {
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionAuthConfigured)
		return
	}
	a := spec.Auth
	switch {
	case a == nil:
		d.Set(omniav1.ConditionAuthConfigured, metav1.ConditionFalse, omniav1.ReasonAuthRequired, "spec.platform needs spec.auth")
	case a.Type == omniav1.PlatformAuthWorkloadIdentity:
		d.Set(omniav1.ConditionAuthConfigured, metav1.ConditionTrue, omniav1.ReasonWorkloadIdentityConfigured, "the pod's workload identity authenticates to "+string(spec.Platform.Type))
	case a.CredentialsSecretRef == nil:
		d.Set(omniav1.ConditionAuthConfigured, metav1.ConditionFalse, omniav1.ReasonCredentialsSecretRefNeeded, fmt.Sprintf("auth type %s needs auth.credentialsSecretRef", a.Type))
	case d.s.AuthSecret == nil:
		msg := fmt.Sprintf("Secret %q not found", a.CredentialsSecretRef.Name)
		d.Set(omniav1.ConditionAuthConfigured, metav1.ConditionFalse, omniav1.ReasonCredentialsSecretNotFound, msg)
		d.retry = fmt.Errorf("check Provider %s/%s: %s", d.s.Provider.Namespace, d.s.Provider.Name, msg)
	default:
		keys := omniav1.PlatformCredentialKeys(spec.Platform.Type, a.Type)
		if k := a.CredentialsSecretRef.KeyOr(""); k != "" {
			keys = []string{k}
		}
		var missing []string
		for _, k := range keys {
			if len(d.s.AuthSecret.Data[k]) == 0 {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			d.Set(omniav1.ConditionAuthConfigured, metav1.ConditionFalse, omniav1.ReasonCredentialsSecretNotFound,
				fmt.Sprintf("Secret %q lacks keys %s", a.CredentialsSecretRef.Name, strings.Join(missing, ", ")))
			return
		}
		d.Set(omniav1.ConditionAuthConfigured, metav1.ConditionTrue, omniav1.ReasonAuthConfigured, fmt.Sprintf("%s credentials in Secret %q", a.Type, a.CredentialsSecretRef.Name))
	}
}

func (d *decider) model() {
	spec := &d.s.Provider.Spec
	switch {
	case spec.Type == omniav1.ProviderTypeMock:
		d.Set(omniav1.ConditionModelValid, metav1.ConditionTrue, omniav1.ReasonModelNotRequired, "the mock provider needs no model")
	case spec.Model != "":
		d.Set(omniav1.ConditionModelValid, metav1.ConditionTrue, omniav1.ReasonModelSet, "model "+spec.Model)
	default:
		msg := fmt.Sprintf("spec.model is required for type %s", spec.Type)
		changed := d.Set(omniav1.ConditionModelValid, metav1.ConditionFalse, omniav1.ReasonModelMissing, msg)
		d.WarnOn(changed, omniav1.EventModelInvalid, msg)
	}
}

// CredentialValue finds the API key in the Secret: the explicit key, else
// the first of the type's default keys present. The value is returned for
// the probe only and must never be logged or written to status.
func CredentialValue(spec *omniav1.ProviderSpec, sec *corev1.Secret) (key, value string, ok bool) {
	for _, k := range spec.CredentialKeys() {
		if v, found := sec.Data[k]; found && len(v) > 0 {
			return k, strings.TrimSpace(string(v)), true
		}
	}
	return "", "", false
}

// IsPlaceholder reports a value copied from an example rather than a key.
func IsPlaceholder(v string) bool {
	l := strings.ToLower(v)
	for _, p := range placeholders {
		if strings.Contains(l, p) {
			return true
		}
	}
	return false
}
