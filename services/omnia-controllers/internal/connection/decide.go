// Package connection is the Connection controller: it checks that the
// credential a Connection adds to its traffic resolves — the Secret exists
// (and is visible to the controllers: labelled as credentials) and holds a
// value under the key — and reports it in phase and the Ready condition,
// from which a ToolRegistry judges SandboxConnectionsValid. The value is
// never read beyond its length, and never written anywhere. Decide is
// pure; Reconciler reads the Secret through the manager's cache and writes.
package connection

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/safeurl"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// DefaultKey is the Secret key read when credential.secretRef sets none.
const DefaultKey = "token"

// Snapshot is everything one decision reads.
type Snapshot struct {
	// Connection is the object being reconciled.
	Connection *omniav1.Connection
	// Secret is the Secret of credential.secretRef; nil when none is named
	// or the cache has none of that name (missing, or not labelled
	// omnia.altairalabs.ai/type=credentials).
	Secret *corev1.Secret
	// Now stamps condition transitions.
	Now metav1.Time
}

// Decision is what the reconciler writes, emits and returns: Warning
// events, one per transition into a fault, and Retry when the Secret is
// missing — a reference to a missing object is retried with backoff on
// top of the Secret watch; a missing key waits for the watch alone.
type Decision = kubeutil.Outcome[omniav1.ConnectionStatus]

// Decide computes a Connection's status.
func Decide(s Snapshot) Decision {
	c := s.Connection
	st := c.Status.DeepCopy()
	st.ObservedGeneration = c.Generation
	j := kubeutil.Judgement{Conditions: &st.Conditions, Generation: c.Generation, Now: s.Now}
	var retry error
	fail := func(reason, msg string) {
		st.Phase = omniav1.ConnectionPhaseFailed
		j.WarnOn(j.Set(omniav1.ConditionReady, metav1.ConditionFalse, reason, msg), reason, msg)
	}

	cred := c.Spec.Credential
	switch {
	case cred == nil:
		st.Phase = omniav1.ConnectionPhaseReady
		j.Set(omniav1.ConditionReady, metav1.ConditionTrue, omniav1.ReasonNoCredential, "anonymous: no credential is added to the traffic of "+safeurl.Parse(c.Spec.URL))
	case s.Secret == nil:
		msg := fmt.Sprintf("Secret %q not found; the controllers see only Secrets labelled %s=%s",
			cred.SecretRef.Name, omniav1.LabelType, omniav1.LabelTypeCredentials)
		fail(omniav1.ReasonSecretNotFound, msg)
		retry = fmt.Errorf("check Connection %s/%s: %s", c.Namespace, c.Name, msg)
	case len(s.Secret.Data[Key(cred)]) == 0:
		fail(omniav1.ReasonSecretKeyMissing, fmt.Sprintf("Secret %q has no value under key %q", cred.SecretRef.Name, Key(cred)))
	default:
		st.Phase = omniav1.ConnectionPhaseReady
		j.Set(omniav1.ConditionReady, metav1.ConditionTrue, omniav1.ReasonCredentialResolved,
			fmt.Sprintf("key %q of Secret %q, %s", Key(cred), cred.SecretRef.Name, injection(cred)))
	}
	return kubeutil.Decided(c.Status, *st, j.Events, retry)
}

// Key is the Secret key the credential is read from.
func Key(cred *omniav1.ConnectionCredential) string { return cred.SecretRef.KeyOr(DefaultKey) }

// injection says where the credential goes, with the defaults admission
// fills in for a Connection stored before they existed.
func injection(cred *omniav1.ConnectionCredential) string {
	if cred.InjectAs == omniav1.InjectEnv {
		return "handed to the sandboxed process as $" + cred.EnvVar
	}
	h := cred.Header
	if h == "" {
		h = "Authorization"
	}
	return "added by the egress proxy as header " + h
}
