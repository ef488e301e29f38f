package agentruntime

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/oidc"
)

const (
	// JWKSKey is the data key of the mirrored key set in its Secret.
	JWKSKey = "jwks.json"
	// JWKSRefresh is how long a mirrored key set is served before the
	// issuer is asked again. An issuer rotates its keys without any
	// Kubernetes event, so this is one of the controller's few timers
	// (docs/omnia-controllers.md).
	JWKSRefresh = 6 * time.Hour
)

// JWKSSecretName is the Secret an agent's OIDC key set is mirrored into.
func JWKSSecretName(agent string) string { return "agent-" + agent + "-oidc-jwks" }

// jwksFreshFor is how long the mirror in s stays fresh at now: 0 when
// there is none, it lacks a readable fetch time or key set, it is older
// than JWKSRefresh, or it claims to come from the future (a clock that
// went back must not stretch its life).
func jwksFreshFor(s *corev1.Secret, now time.Time) time.Duration {
	if s == nil {
		return 0
	}
	at, err := time.Parse(time.RFC3339, s.Annotations[omniav1.AnnotationOIDCJWKSFetchedAt])
	if err != nil || at.After(now) {
		return 0
	}
	if _, err := oidc.ParseJWKS(s.Data[JWKSKey]); err != nil {
		return 0
	}
	if left := JWKSRefresh - now.Sub(at); left > 0 {
		return left
	}
	return 0
}

// buildJWKSSecret is the mirror Secret of a key set fetched at at.
func buildJWKSSecret(a *omniav1.AgentRuntime, jwks []byte, at time.Time) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      JWKSSecretName(a.Name),
			Namespace: a.Namespace,
			Labels: map[string]string{
				omniav1.LabelCredentialKind: omniav1.CredentialKindOIDCJWKS,
				// Without it the controllers' cache would not hold the
				// mirror (kubeutil.SecretSelector).
				omniav1.LabelType: omniav1.LabelTypeOIDCJWKS,
				LabelInstance:     a.Name,
				LabelManagedBy:    ManagedBy,
			},
			Annotations: map[string]string{omniav1.AnnotationOIDCJWKSFetchedAt: at.UTC().Format(time.RFC3339)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{JWKSKey: jwks},
	}
}

// mirrorJWKS plans the Secret holding the OIDC issuer's key set of an
// agent with spec.externalAuth.oidc, and its removal otherwise. It returns
// when the mirror should be looked at again (0: no timer). A stale mirror
// asks for the issuer's key set first. A failure of the issuer or a
// refused write is recorded in OIDCJWKSReady and waits for the next
// refresh; only a transient API failure is returned as an error, for
// controller-runtime's backoff. Key material never reaches a log line, an
// event or the status.
func (d *decider) mirrorJWKS() (time.Duration, error) {
	a := d.s.in.Agent
	name := JWKSSecretName(a.Name)
	live := d.s.live.jwks
	if live.err != nil {
		return 0, live.err
	}
	var cfg *omniav1.OIDCAuth
	if ea := a.Spec.ExternalAuth; ea != nil {
		cfg = ea.OIDC
	}
	if cfg == nil {
		meta.RemoveStatusCondition(&d.st.Conditions, omniav1.ConditionOIDCJWKSReady)
		if live.obj != nil && d.controls(live.obj) {
			uid := live.obj.UID
			if o := d.do(write{op: opDelete, obj: live.obj.DeepCopy(), preconditions: &metav1.Preconditions{UID: &uid}}); client.IgnoreNotFound(o.err) != nil {
				return 0, fmt.Errorf("delete Secret %s/%s: %w", a.Namespace, name, o.err)
			}
		}
		return 0, nil
	}
	set := func(status metav1.ConditionStatus, reason, msg string) {
		d.set(omniav1.ConditionOIDCJWKSReady, status, reason, truncate.String(msg, 1024))
	}
	issuer := strings.TrimRight(strings.TrimSpace(cfg.Issuer), "/")
	if issuer == "" {
		// Only a spec edit can fix this, and an edit is a watch event.
		set(metav1.ConditionFalse, omniav1.ReasonMissingIssuer, "spec.externalAuth.oidc.issuer is empty")
		d.p.logs = append(d.p.logs, logLine{msg: "cannot mirror the OIDC key set", err: errors.New("empty OIDC issuer")})
		return 0, nil
	}
	if live.obj != nil && !d.controls(live.obj) {
		// Someone else's Secret of that name: overwriting it could break
		// whatever it belongs to.
		set(metav1.ConditionFalse, omniav1.ReasonSecretWriteFailed, notOwned(live.obj).Error())
		return JWKSRefresh, nil
	}
	if live.obj != nil {
		if left := jwksFreshFor(live.obj, d.t.Time); left > 0 {
			set(metav1.ConditionTrue, omniav1.ReasonJWKSUpdated, fmt.Sprintf("key set of %s mirrored in Secret %s (cached)", issuer, name))
			return left, nil
		}
	}
	ks := d.s.keySet
	if ks == nil {
		d.p.ask = &question{issuer: issuer}
		return 0, nil
	}
	if ks.failure != "" {
		// An issuer problem: retrying before the next refresh would only
		// load an issuer that is already failing. The mirror Secret, if
		// any, keeps serving the last good key set.
		set(metav1.ConditionFalse, omniav1.ReasonDiscoveryFailed, ks.failure)
		return JWKSRefresh, nil
	}
	want := buildJWKSSecret(a, ks.jwks, d.t.Time)
	d.own(want, nil)
	var err error
	if live.obj == nil {
		err = d.do(write{op: opCreate, obj: want}).err
	} else {
		upd := live.obj.DeepCopy()
		upd.Labels = mergeMap(upd.Labels, want.Labels)
		upd.Annotations = mergeMap(upd.Annotations, want.Annotations)
		upd.OwnerReferences = want.OwnerReferences
		upd.Type, upd.Data, upd.StringData = want.Type, want.Data, nil
		err = d.do(write{op: opUpdate, obj: upd}).err
	}
	if err != nil {
		// The API error names the object and the refusal, not the data.
		set(metav1.ConditionFalse, omniav1.ReasonSecretWriteFailed, fmt.Sprintf("write Secret %s: %v", name, err))
		err = fmt.Errorf("write Secret %s/%s: %w", a.Namespace, name, err)
		if transientAPIError(err) || apierrors.IsAlreadyExists(err) {
			// A retry may well succeed (an overloaded API server, a cache
			// that lagged our own create): backoff, not the 6h timer.
			return 0, err
		}
		d.p.logs = append(d.p.logs, logLine{msg: "cannot mirror the OIDC key set", err: err})
		return JWKSRefresh, nil
	}
	set(metav1.ConditionTrue, omniav1.ReasonJWKSUpdated, fmt.Sprintf("key set of %s mirrored in Secret %s", issuer, name))
	return JWKSRefresh, nil
}
