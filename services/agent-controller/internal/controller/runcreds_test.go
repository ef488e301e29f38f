package controller

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nats-io/jwt/v2"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// testCA stands for the CA bundle the controller hands to every run.
var testCA = []byte("-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n")

func newAuthority(t *testing.T) *natsauth.Authority {
	t.Helper()
	a, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// decodeCreds decodes, and so verifies the signature of, a creds file's
// user JWT.
func decodeCreds(t *testing.T, creds []byte) *jwt.UserClaims {
	t.Helper()
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		t.Fatalf("the creds file holds no JWT: %v", err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatalf("the user JWT does not decode: %v", err)
	}
	return uc
}

func containerOf(job *batchv1.Job, name string) *corev1.Container {
	spec := &job.Spec.Template.Spec
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func envValue(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func TestARunGetsItsOwnNATSCredentialFromASecretItOwns(t *testing.T) {
	ns := env.Namespace(t)
	auth := newAuthority(t)
	startWith(t, ns, startOptions{nats: &NATSCredentials{Issuer: auth.Issuer(), CA: testCA}})
	mkStation(t, ns, "st", nil)
	began := time.Now()
	mkAgent(t, ns, "talk", "st")
	a := waitPhase(t, ns, "talk", agentsv1alpha1.PhaseRunning)
	ctx := context.Background()

	sec, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, runspec.NATSSecretName(string(a.UID)), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the run's NATS Secret: %v", err)
	}
	t.Run("the Secret is controlled by the Agent, immutable and labelled with it", func(t *testing.T) {
		if !metav1.IsControlledBy(sec, a) || !ptr.Deref(sec.OwnerReferences[0].BlockOwnerDeletion, false) {
			t.Errorf("owners %+v", sec.OwnerReferences)
		}
		if !ptr.Deref(sec.Immutable, false) || sec.Labels[agentsv1alpha1.LabelAgent] != "talk" {
			t.Errorf("immutable %v, labels %v", sec.Immutable, sec.Labels)
		}
		if string(sec.Data[runspec.NATSCAKey]) != string(testCA) {
			t.Error("the controller's CA is not in the Secret")
		}
	})
	creds := sec.Data[runspec.NATSCredsKey]
	uc := decodeCreds(t, creds)
	t.Run("the credential is the platform account's and may publish exactly the run's subjects", func(t *testing.T) {
		run := natsauth.Run{Namespace: ns, Agent: "talk", UID: string(a.UID)}
		if uc.IssuerAccount != auth.AccountPublicKey() {
			t.Errorf("issued for account %q, want %q", uc.IssuerAccount, auth.AccountPublicKey())
		}
		pub := slices.Sorted(slices.Values(uc.Pub.Allow))
		if want := slices.Sorted(slices.Values([]string{run.EventSubjects(), run.SinkSubjects()})); !slices.Equal(pub, want) {
			t.Errorf("may publish on %v, want exactly %v", pub, want)
		}
		if want := []string{natsauth.InboxPrefix(string(a.UID)) + ".>"}; !slices.Equal(uc.Sub.Allow, want) {
			t.Errorf("may subscribe to %v, want exactly %v", uc.Sub.Allow, want)
		}
		if len(uc.Pub.Deny) != 0 || len(uc.Sub.Deny) != 0 || uc.Resp != nil {
			t.Errorf("more permissions than the run's: %+v", uc.Permissions)
		}
	})
	t.Run("the credential expires with the Station's 30-minute deadline, plus the margin", func(t *testing.T) {
		exp := time.Unix(uc.Expires, 0)
		earliest := began.Add(30*time.Minute + CredentialMargin - time.Second)
		latest := time.Now().Add(30*time.Minute + CredentialMargin + time.Second)
		if exp.Before(earliest) || exp.After(latest) {
			t.Errorf("expires at %s, want between %s and %s", exp, earliest, latest)
		}
	})
	job, err := env.Kube.BatchV1().Jobs(ns).Get(ctx, a.Status.JobName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the supervisor's containers take it from the Secret, and mount only its CA", func(t *testing.T) {
		vol := slices.IndexFunc(job.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Secret != nil && v.Secret.SecretName == sec.Name
		})
		if vol < 0 {
			t.Fatalf("no volume of Secret %s", sec.Name)
		}
		v := job.Spec.Template.Spec.Volumes[vol]
		if len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != runspec.NATSCAKey {
			t.Errorf("the volume of Secret %s holds %+v, want its CA alone", sec.Name, v.Secret.Items)
		}
		for _, cname := range []string{agentsv1alpha1.AgentContainerName, "init"} {
			c := containerOf(job, cname)
			if c == nil || !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == v.Name && m.MountPath == runspec.NATSMountDir && m.ReadOnly
			}) {
				t.Errorf("container %s does not mount the CA read-only at %s", cname, runspec.NATSMountDir)
				continue
			}
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
				return e.Name == runspec.EnvNATSCreds && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
					e.ValueFrom.SecretKeyRef.Name == sec.Name && e.ValueFrom.SecretKeyRef.Key == runspec.NATSCredsKey
			}) {
				t.Errorf("container %s: %s is not the Secret's %s", cname, runspec.EnvNATSCreds, runspec.NATSCredsKey)
			}
			if got := envValue(c, runspec.EnvNATSCAFile); got != runspec.NATSMountDir+"/"+runspec.NATSCAKey {
				t.Errorf("container %s: %s=%q", cname, runspec.EnvNATSCAFile, got)
			}
		}
	})
	t.Run("neither the JWT nor the seed is in the Job spec", func(t *testing.T) {
		raw, err := json.Marshal(job)
		if err != nil {
			t.Fatal(err)
		}
		token, _ := jwt.ParseDecoratedJWT(creds)
		kp, err := jwt.ParseDecoratedUserNKey(creds)
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		if strings.Contains(string(raw), token) || strings.Contains(string(raw), string(seed)) {
			t.Error("the credential is readable from the Job spec")
		}
	})
}

// forgedSecret is a Secret a namespace user creates under the name the
// run's Secret will have, before the controller does.
func forgedSecret(ns, name string, owner *metav1.OwnerReference, immutable bool, data map[string][]byte) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
	if owner != nil {
		s.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	if immutable {
		s.Immutable = ptr.To(true)
	}
	return s
}

// controllerRef is a controller owner reference to a, as the controller
// writes it, which anyone may also write.
func controllerRef(a *agentsv1alpha1.Agent) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "Agent", Name: a.Name, UID: a.UID, Controller: ptr.To(true)}
}

// wantSecretTaken waits for the Agent to fail because the Secret name is
// taken, and checks that no Job was ever created for it.
func wantSecretTaken(t *testing.T, ns, agent, secret, why string) {
	t.Helper()
	a := waitPhase(t, ns, agent, agentsv1alpha1.PhaseFailed)
	if !strings.Contains(a.Status.FailureReason, "Secret "+secret+" already exists and "+why) {
		t.Errorf("failureReason %q, want it to name the Secret and say it %s", a.Status.FailureReason, why)
	}
	if c := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionResolved); c == nil || c.Reason != decision.ReasonSecretNameTaken {
		t.Errorf("Resolved condition %+v", c)
	}
	jobs, err := env.Kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 0 || a.Status.JobName != "" {
		t.Errorf("a Job was created with the forged Secret: %d Jobs, jobName %q", len(jobs.Items), a.Status.JobName)
	}
}

// TestAForeignNATSSecretIsNeverMounted is the attack of a namespace user
// who, knowing the Agent's uid, creates the Secret the run's credential
// will be looked up by before the controller does, holding a credential
// of their choosing: the run must fail, naming the Secret, without a Job
// ever mounting it, whatever owner reference the Secret claims.
func TestAForeignNATSSecretIsNeverMounted(t *testing.T) {
	auth := newAuthority(t)
	other := newAuthority(t)
	cases := []struct {
		rule string
		// forge returns the Secret to plant for Agent a.
		forge func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret
		why   string
	}{
		{"a Secret without an owner", func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret {
			creds, _ := other.Issuer().ServiceCredentials("attacker", time.Time{})
			return forgedSecret(ns, runspec.NATSSecretName(string(a.UID)), nil, true, map[string][]byte{runspec.NATSCredsKey: creds})
		}, "is not controlled by this Agent"},
		{"a Secret controlled by another Agent", func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret {
			mkAgent(t, ns, "decoy", "nowhere")
			d := getAgent(t, ns, "decoy")
			creds, _ := auth.Issuer().RunCredentials(natsauth.Run{Namespace: ns, Agent: "decoy", UID: string(d.UID)}, time.Time{})
			return forgedSecret(ns, runspec.NATSSecretName(string(a.UID)), controllerRef(d), true, map[string][]byte{runspec.NATSCredsKey: creds})
		}, "is not controlled by this Agent (uid "},
		{"a Secret claiming this Agent as controller, with a credential of another issuer", func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret {
			creds, _ := other.Issuer().RunCredentials(natsauth.Run{Namespace: ns, Agent: a.Name, UID: string(a.UID)}, time.Time{})
			return forgedSecret(ns, runspec.NATSSecretName(string(a.UID)), controllerRef(a), true, map[string][]byte{runspec.NATSCredsKey: creds})
		}, "is controlled by this Agent but was not written by the controller: its credential is not signed by the platform's issuer"},
		{"a Secret claiming this Agent as controller, with the platform's credential of another run", func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret {
			creds, _ := auth.Issuer().RunCredentials(natsauth.Run{Namespace: ns, Agent: "other", UID: "other-uid"}, time.Time{})
			return forgedSecret(ns, runspec.NATSSecretName(string(a.UID)), controllerRef(a), true, map[string][]byte{runspec.NATSCredsKey: creds})
		}, "is controlled by this Agent but was not written by the controller: its credential is not this run's"},
		{"a Secret claiming this Agent as controller, left mutable to be changed later", func(t *testing.T, ns string, a *agentsv1alpha1.Agent) *corev1.Secret {
			creds, _ := auth.Issuer().RunCredentials(natsauth.Run{Namespace: ns, Agent: a.Name, UID: string(a.UID)}, time.Time{})
			return forgedSecret(ns, runspec.NATSSecretName(string(a.UID)), controllerRef(a), false, map[string][]byte{runspec.NATSCredsKey: creds})
		}, "is controlled by this Agent but mutable"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := env.Namespace(t)
			mkStation(t, ns, "st", nil)
			// The Agent exists before the controller looks at it: its uid
			// is what the attacker needs.
			mkAgent(t, ns, "victim", "st")
			a := getAgent(t, ns, "victim")
			forged := c.forge(t, ns, a)
			if _, err := env.Kube.CoreV1().Secrets(ns).Create(context.Background(), forged, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			startWith(t, ns, startOptions{nats: &NATSCredentials{Issuer: auth.Issuer()}})
			wantSecretTaken(t, ns, "victim", forged.Name, c.why)
		})
	}
}

// TestARunReusesTheCredentialSecretAnEarlierPassWrote: a Secret the
// controller wrote for the run in a pass whose Job was never created (a
// crash, a refused create) is the run's, and its Job mounts it unchanged.
func TestARunReusesTheCredentialSecretAnEarlierPassWrote(t *testing.T) {
	ns := env.Namespace(t)
	auth := newAuthority(t)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "again", "st")
	a := getAgent(t, ns, "again")
	creds, err := auth.Issuer().RunCredentials(natsauth.Run{Namespace: ns, Agent: a.Name, UID: string(a.UID)}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	earlier := runSecret(a, runspec.NATSSecretName(string(a.UID)), map[string][]byte{runspec.NATSCredsKey: creds})
	earlier, err = env.Kube.CoreV1().Secrets(ns).Create(context.Background(), earlier, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startWith(t, ns, startOptions{nats: &NATSCredentials{Issuer: auth.Issuer()}})
	a = waitPhase(t, ns, "again", agentsv1alpha1.PhaseRunning)
	now, err := env.Kube.CoreV1().Secrets(ns).Get(context.Background(), earlier.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != earlier.UID || string(now.Data[runspec.NATSCredsKey]) != string(creds) {
		t.Error("the earlier pass's Secret was replaced")
	}
	if a.Status.JobName == "" {
		t.Error("the run has no Job")
	}
}
