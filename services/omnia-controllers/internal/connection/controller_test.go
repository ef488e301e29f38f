package connection

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

const wait = 30 * time.Second

func start(t *testing.T) {
	t.Helper()
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("connection-controller")}).SetupWithManager(mgr, nil)
	})
}

func newConn(ns, name string, c *omniav1.ConnectionCredential) *omniav1.Connection {
	o := conn(0, c)
	o.Namespace, o.Name = ns, name
	return o
}

// credentials is a Secret the controllers may see: labelled as credentials.
func credentials(ns, name string, data map[string]string) *corev1.Secret {
	s := secret(data)
	s.Namespace, s.Name = ns, name
	s.Labels = map[string]string{omniav1.LabelType: omniav1.LabelTypeCredentials}
	return s
}

func statusIs(ns, name string, phase omniav1.ConnectionPhase, reason string) func() error {
	return ctrltest.ReadyPhase(env.Client, types.NamespacedName{Namespace: ns, Name: name}, phase, reason,
		func(c *omniav1.Connection) (omniav1.ConnectionPhase, int64, []metav1.Condition) {
			return c.Status.Phase, c.Status.ObservedGeneration, c.Status.Conditions
		})
}

// TestSecretWatchDrivesReady: a Connection's Ready follows its Secret
// through the Secret watch, the Connection itself never changing: missing,
// present but not labelled (invisible to the controllers), labelled
// without the key, with the key, deleted.
func TestSecretWatchDrivesReady(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	ctx := context.Background()
	ctrltest.Create(t, env, newConn(ns, "github", cred(nil)))
	ctrltest.Eventually(t, wait, statusIs(ns, "github", omniav1.ConnectionPhaseFailed, omniav1.ReasonSecretNotFound))

	s := credentials(ns, "gh", map[string]string{"token": secretValue})
	s.Labels = nil
	ctrltest.Create(t, env, s)
	ctrltest.Consistently(t, 2*time.Second, statusIs(ns, "github", omniav1.ConnectionPhaseFailed, omniav1.ReasonSecretNotFound))

	steps := []struct {
		name   string
		change func(s *corev1.Secret)
		phase  omniav1.ConnectionPhase
		reason string
	}{
		{"labelled, but without the key: SecretKeyMissing", func(s *corev1.Secret) {
			s.Labels = map[string]string{omniav1.LabelType: omniav1.LabelTypeCredentials}
			s.Data = map[string][]byte{"other": []byte(secretValue)}
		}, omniav1.ConnectionPhaseFailed, omniav1.ReasonSecretKeyMissing},
		{"the key added: Ready, CredentialResolved", func(s *corev1.Secret) {
			s.Data["token"] = []byte(secretValue)
		}, omniav1.ConnectionPhaseReady, omniav1.ReasonCredentialResolved},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			cur := ctrltest.Get[corev1.Secret](t, env, client.ObjectKeyFromObject(s))
			st.change(cur)
			if err := env.Client.Update(ctx, cur); err != nil {
				t.Fatal(err)
			}
			ctrltest.Eventually(t, wait, statusIs(ns, "github", st.phase, st.reason))
		})
	}
	t.Run("the Secret deleted: SecretNotFound", func(t *testing.T) {
		if err := env.Client.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
		ctrltest.Eventually(t, wait, statusIs(ns, "github", omniav1.ConnectionPhaseFailed, omniav1.ReasonSecretNotFound))
	})
}

// TestSecretValueNeverShown: whatever state a Connection is in — resolved,
// the key missing, the Secret unlabelled — the value its Secret holds
// appears in no Connection status and no event of the namespace.
func TestSecretValueNeverShown(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	ctx := context.Background()
	hidden := credentials(ns, "hidden", map[string]string{"token": secretValue})
	hidden.Labels = nil
	ctrltest.Create(t, env, credentials(ns, "gh", map[string]string{"token": secretValue, "pat": secretValue}), hidden,
		newConn(ns, "resolved", cred(nil)), newConn(ns, "wrong-key", cred(new("missing"))))
	asEnv := cred(new("pat"))
	asEnv.InjectAs, asEnv.EnvVar = omniav1.InjectEnv, "GITHUB_TOKEN"
	unlabelled := cred(nil)
	unlabelled.SecretRef.Name = "hidden"
	ctrltest.Create(t, env, newConn(ns, "env", asEnv), newConn(ns, "unlabelled", unlabelled))
	ctrltest.Eventually(t, wait, statusIs(ns, "resolved", omniav1.ConnectionPhaseReady, omniav1.ReasonCredentialResolved))
	ctrltest.Eventually(t, wait, statusIs(ns, "env", omniav1.ConnectionPhaseReady, omniav1.ReasonCredentialResolved))
	ctrltest.Eventually(t, wait, statusIs(ns, "wrong-key", omniav1.ConnectionPhaseFailed, omniav1.ReasonSecretKeyMissing))
	ctrltest.Eventually(t, wait, statusIs(ns, "unlabelled", omniav1.ConnectionPhaseFailed, omniav1.ReasonSecretNotFound))
	var evs eventsv1.EventList
	ctrltest.Eventually(t, wait, func() error {
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(evs.Items) < 2 {
			return fmt.Errorf("%d events; want the two Warning events", len(evs.Items))
		}
		return nil
	})
	var conns omniav1.ConnectionList
	if err := env.Client.List(ctx, &conns, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{conns, evs} {
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), secretValue) {
			t.Fatalf("the secret value is in %T:\n%s", v, out)
		}
	}
}

// TestTransientAPIFailureIsReturned: a failed read of the Secret or a
// failed status write is returned, for controller-runtime's backoff; a
// successful pass asks for no timer; a pass reads only the Connection and
// its Secret.
func TestTransientAPIFailureIsReturned(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env) // cache and indexes only
	ctrltest.Create(t, env, credentials(ns, "gh", map[string]string{"token": secretValue}))
	for i, fail := range []string{ctrltest.Call("get", &corev1.Secret{}), ctrltest.Call("status", &omniav1.Connection{}), ""} {
		name := fmt.Sprintf("conn-%d", i)
		t.Run(fmt.Sprintf("fail %q", fail), func(t *testing.T) {
			ctrltest.Create(t, env, newConn(ns, name, cred(nil)))
			req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
			ctrltest.Eventually(t, wait, func() error { return c.Get(ctx, req.NamespacedName, &omniav1.Connection{}) })
			if fail != "" {
				ctrltest.ReturnsInjected(t, ctx, &Reconciler{Client: ctrltest.FailingOn(c, fail)}, req)
			}
			f := &ctrltest.Failing{Client: c}
			if res, err := (&Reconciler{Client: f}).Reconcile(ctx, req); err != nil || res != (reconcile.Result{}) {
				t.Fatalf("result %+v err %v; want success with no timer", res, err)
			}
			allowed := map[string]bool{ctrltest.Call("get", &omniav1.Connection{}): true, ctrltest.Call("get", &corev1.Secret{}): true,
				ctrltest.Call("status", &omniav1.Connection{}): true}
			for _, call := range f.Calls() {
				if !allowed[call] {
					t.Errorf("a pass made %q", call)
				}
			}
			ctrltest.Holds(t, statusIs(ns, name, omniav1.ConnectionPhaseReady, omniav1.ReasonCredentialResolved))
		})
	}
}

// TestOneWorker: the Connection controller runs controller-runtime's
// default of one reconcile at a time.
func TestOneWorker(t *testing.T) {
	ctrltest.CheckWorkers(t, env, newReconciler, 300*time.Millisecond, 1, 4, func(ns, name string) client.Object { return newConn(ns, name, nil) })
}

func newReconciler(c client.Client) ctrltest.Wirer { return &Reconciler{Client: c} }

// TestSecretWatchMapsToConnections: with passes that always succeed (so
// no retry can bring one), creating, editing and deleting the labelled
// Secret a Connection names enqueues that Connection; another Secret does
// not.
func TestSecretWatchMapsToConnections(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	passes := ctrltest.StartCounting(t, env, newReconciler)
	c := newConn(ns, "github", cred(nil))
	ctrltest.Create(t, env, c)
	key := client.ObjectKeyFromObject(c)
	s := credentials(ns, "gh", map[string]string{"token": secretValue})
	steps := []ctrltest.WatchStep{
		{Name: "the Secret created", Change: func() error { return env.Client.Create(ctx, s) }, Enqueue: true},
		{Name: "the Secret edited", Change: func() error {
			s.Data["token"] = []byte("rotated-" + secretValue)
			return env.Client.Update(ctx, s)
		}, Enqueue: true},
		{Name: "another Secret created", Change: func() error { return env.Client.Create(ctx, credentials(ns, "other", map[string]string{"token": "x"})) }, Enqueue: false},
		{Name: "the Secret deleted", Change: func() error { return env.Client.Delete(ctx, s) }, Enqueue: true},
	}
	ctrltest.CheckEnqueues(t, passes, key, "Connection", steps)
}
