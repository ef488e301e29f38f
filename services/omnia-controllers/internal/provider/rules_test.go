package provider

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestTransientAPIFailureIsReturned: when a call to the API server fails,
// the reconciler returns the error, for the Secret read and the status
// write of a Provider pass; and a Provider with nothing unreachable asks
// for no timer (the 30 s recheck exists only while an endpoint is
// unreachable).
func TestTransientAPIFailureIsReturned(t *testing.T) {
	ns, ctx, c := ctrltest.ByHand(t, env) // cache only
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: ns, Labels: map[string]string{omniav1.LabelType: omniav1.LabelTypeCredentials}}, Data: map[string][]byte{"api-key": []byte("k")}}
	ctrltest.Create(t, env, sec)
	cases := []ctrltest.Failure{
		{Name: "reading the credential Secret fails", Fail: ctrltest.Call("get", &corev1.Secret{})},
		{Name: "writing the status fails", Fail: ctrltest.Call("status", &omniav1.Provider{})},
		{Name: "nothing fails: success is not requeued"},
	}
	newR := func(c client.Client) reconcile.Reconciler { return &Reconciler{Client: c} }
	ctrltest.CheckFailuresReturned(t, c, newR, cases, func(t *testing.T, i int) reconcile.Request {
		p := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: ns},
			Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeMock, Credential: &omniav1.CredentialConfig{SecretRef: &omniav1.SecretKeyRef{Name: "key"}}}}
		ctrltest.Create(t, env, p)
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: p.Name}}
		ctrltest.Eventually(t, wait, func() error {
			if err := c.Get(ctx, req.NamespacedName, &omniav1.Provider{}); err != nil {
				return err
			}
			return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "key"}, &corev1.Secret{})
		})
		return req
	}, func(t *testing.T, req reconcile.Request) {
		res, err := newR(c).Reconcile(ctx, req)
		if err != nil || res != (reconcile.Result{}) {
			t.Fatalf("result %+v err %v; want success with no timer", res, err)
		}
		got := &omniav1.Provider{}
		if err := env.Client.Get(ctx, req.NamespacedName, got); err != nil || got.Status.Phase != omniav1.ProviderPhaseReady {
			t.Fatalf("after the retry: phase %q %v (%+v)", got.Status.Phase, err, got.Status.Conditions)
		}
	})
}
