package connection

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

var t0 = metav1.NewTime(proptest.Epoch)

// secretValue stands for a credential; no status, event or error may
// carry it.
const secretValue = "ghp_s3cr3t-value-never-shown"

func conn(gen int64, cred *omniav1.ConnectionCredential) *omniav1.Connection {
	return &omniav1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: "ns", Generation: gen},
		Spec: omniav1.ConnectionSpec{URL: "https://api.github.com", Credential: cred}}
}

func cred(key *string) *omniav1.ConnectionCredential {
	return &omniav1.ConnectionCredential{SecretRef: omniav1.SecretKeyRef{Name: "gh", Key: key}, InjectAs: omniav1.InjectHeader, Header: "Authorization"}
}

func secret(data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gh", Namespace: "ns"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// TestDecide has one case per rule of the Connection controller.
func TestDecide(t *testing.T) {
	env := cred(new("pat"))
	env.InjectAs, env.EnvVar = omniav1.InjectEnv, "GITHUB_TOKEN"
	failed := conn(2, cred(nil))
	failed.Status = Decide(Snapshot{Connection: conn(1, cred(nil)), Now: t0}).Status
	cases := []struct {
		name   string
		snap   Snapshot
		phase  omniav1.ConnectionPhase
		reason string
		msg    string
		events []string
		retry  bool
	}{
		{name: "no credential: Ready, anonymous",
			snap:  Snapshot{Connection: conn(1, nil)},
			phase: omniav1.ConnectionPhaseReady, reason: omniav1.ReasonNoCredential, msg: "anonymous: no credential is added to the traffic of https://api.github.com"},
		{name: "the Secret holds the default key token: Ready, CredentialResolved naming key, Secret and header",
			snap:  Snapshot{Connection: conn(1, cred(nil)), Secret: secret(map[string]string{"token": secretValue})},
			phase: omniav1.ConnectionPhaseReady, reason: omniav1.ReasonCredentialResolved, msg: `key "token" of Secret "gh", added by the egress proxy as header Authorization`},
		{name: "the Secret holds the named key for an env credential: Ready, naming the variable",
			snap:  Snapshot{Connection: conn(1, env), Secret: secret(map[string]string{"pat": secretValue})},
			phase: omniav1.ConnectionPhaseReady, reason: omniav1.ReasonCredentialResolved, msg: `key "pat" of Secret "gh", handed to the sandboxed process as $GITHUB_TOKEN`},
		{name: "the Secret is missing or not labelled: Failed, SecretNotFound naming the label, a Warning event, retried with backoff",
			snap:  Snapshot{Connection: conn(1, cred(nil))},
			phase: omniav1.ConnectionPhaseFailed, reason: omniav1.ReasonSecretNotFound,
			msg:    `Secret "gh" not found; the controllers see only Secrets labelled omnia.altairalabs.ai/type=credentials`,
			events: []string{omniav1.ReasonSecretNotFound}, retry: true},
		{name: "the Secret lacks the key: Failed, SecretKeyMissing, a Warning event, no retry (the Secret watch brings the fix)",
			snap:  Snapshot{Connection: conn(1, cred(new("pat"))), Secret: secret(map[string]string{"token": secretValue})},
			phase: omniav1.ConnectionPhaseFailed, reason: omniav1.ReasonSecretKeyMissing, msg: `Secret "gh" has no value under key "pat"`,
			events: []string{omniav1.ReasonSecretKeyMissing}},
		{name: "an empty value is no credential: SecretKeyMissing",
			snap:  Snapshot{Connection: conn(1, cred(nil)), Secret: secret(map[string]string{"token": ""})},
			phase: omniav1.ConnectionPhaseFailed, reason: omniav1.ReasonSecretKeyMissing, msg: `no value under key "token"`,
			events: []string{omniav1.ReasonSecretKeyMissing}},
		{name: "a fault already recorded emits no second event, and is still retried",
			snap:  Snapshot{Connection: failed},
			phase: omniav1.ConnectionPhaseFailed, reason: omniav1.ReasonSecretNotFound, msg: "not found", retry: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.snap.Now = t0
			d := Decide(tc.snap)
			st := d.Status
			proptest.ReadyWant[omniav1.ConnectionPhase]{Gen: tc.snap.Connection.Generation, Phase: tc.phase, ReadyPhase: omniav1.ConnectionPhaseReady,
				Reason: tc.reason, Msg: tc.msg}.Check(t, st.Phase, st.ObservedGeneration, st.Conditions)
			var got []string
			for _, e := range d.Events {
				got = append(got, e.Reason)
				if strings.Contains(e.Message, secretValue) {
					t.Fatalf("event %q carries the secret value", e.Message)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.events, ",") {
				t.Fatalf("events %v; want %v", got, tc.events)
			}
			if (d.Retry != nil) != tc.retry {
				t.Fatalf("retry %v; want %v", d.Retry, tc.retry)
			}
			for _, c := range st.Conditions {
				if strings.Contains(c.Message, secretValue) {
					t.Fatalf("%s message %q carries the secret value", c.Type, c.Message)
				}
			}
		})
	}
}

// TestURLCredentialsNeverShown: a URL written with credentials in it
// (user:token@, ?token=) is named in the status without them.
func TestURLCredentialsNeverShown(t *testing.T) {
	c := conn(1, nil)
	c.Spec.URL = "https://bot:" + secretValue + "@api.github.com/v3?token=" + secretValue
	d := Decide(Snapshot{Connection: c, Now: t0})
	out := fmt.Sprintf("%+v %+v", d.Status, d.Events)
	if strings.Contains(out, secretValue) {
		t.Fatalf("the decision shows the credential: %s", out)
	}
	if !strings.Contains(out, "https://api.github.com/v3") {
		t.Fatalf("the decision does not name the endpoint: %s", out)
	}
}
