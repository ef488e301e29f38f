package workspace

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

const wait = 30 * time.Second

// start runs the Workspace controller and returns the manager's cached
// client, for direct Reconcile calls next to the running controller.
func start(t *testing.T) client.Client {
	t.Helper()
	return ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("workspace-controller")}).SetupWithManager(mgr, nil)
	})
}

// newWorkspace creates a Workspace (cluster-scoped) naming namespace ns
// and deletes it when the test ends. Namespaces it creates are left: no
// namespace controller runs here to finish deleting them.
func newWorkspace(t *testing.T, name, ns string) {
	t.Helper()
	ws := &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: ns}}}
	ctrltest.Create(t, env, ws)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ws) })
}

func phaseIs(name string, phase omniav1.WorkspacePhase, reason string) func() error {
	return ctrltest.ObjectIs(env.Client, types.NamespacedName{Name: name}, func(ws *omniav1.Workspace) error {
		c := meta.FindStatusCondition(ws.Status.Conditions, omniav1.ConditionNamespaceReady)
		if ws.Status.Phase != phase || c == nil || c.Reason != reason || ws.Status.ObservedGeneration != ws.Generation {
			return fmt.Errorf("phase %q NamespaceReady %+v; want %q %s", ws.Status.Phase, c, phase, reason)
		}
		return nil
	})
}

func labelIs(ns, want string) func() error {
	return ctrltest.ObjectIs(env.Client, types.NamespacedName{Name: ns}, func(n *corev1.Namespace) error {
		if got, ok := n.Labels[omniav1.LabelWorkspace]; got != want || (want == "") == ok {
			return fmt.Errorf("namespace %s label %q (set %v), want %q", ns, got, ok, want)
		}
		return nil
	})
}

func setLabel(t *testing.T, ns, value string) {
	t.Helper()
	ctrltest.Eventually(t, wait, func() error {
		n := &corev1.Namespace{}
		if err := env.Client.Get(context.Background(), types.NamespacedName{Name: ns}, n); err != nil {
			return err
		}
		if value == "" {
			delete(n.Labels, omniav1.LabelWorkspace)
		} else {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[omniav1.LabelWorkspace] = value
		}
		return env.Client.Update(context.Background(), n)
	})
}

// notRequeued checks that success is not requeued (and a refusal is not an
// error): one more pass through the reconciler returns an empty result.
func notRequeued(t *testing.T, c client.Client, name string) {
	t.Helper()
	res, err := (&Reconciler{Client: c}).Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil || res != (reconcile.Result{}) {
		t.Fatalf("result %+v err %v; want no error and no requeue", res, err)
	}
}

// TestNamespaceCreatedLabelledAndRepaired: a Workspace's missing namespace
// is created with the label; a removed label is put back through the
// Namespace watch; success asks for no requeue.
func TestNamespaceCreatedLabelledAndRepaired(t *testing.T) {
	base := env.Namespace(t)
	c := start(t)
	name, ns := base, base+"-team"
	newWorkspace(t, name, ns)
	ctrltest.Eventually(t, wait, labelIs(ns, name))
	ctrltest.Eventually(t, wait, phaseIs(name, omniav1.WorkspacePhaseReady, omniav1.ReasonNamespaceOwned))
	notRequeued(t, c, name)

	setLabel(t, ns, "")
	ctrltest.Eventually(t, wait, labelIs(ns, name))
	setLabel(t, ns, "someone-else") // a label naming no Workspace is a stale claim
	ctrltest.Eventually(t, wait, labelIs(ns, name))
	ctrltest.Eventually(t, wait, phaseIs(name, omniav1.WorkspacePhaseReady, omniav1.ReasonNamespaceOwned))
}

// TestExistingNamespaceIsLabelled: an existing namespace is adopted, not
// recreated.
func TestExistingNamespaceIsLabelled(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	before := ctrltest.Get[corev1.Namespace](t, env, types.NamespacedName{Name: ns})
	newWorkspace(t, ns, ns)
	ctrltest.Eventually(t, wait, labelIs(ns, ns))
	after := ctrltest.Get[corev1.Namespace](t, env, types.NamespacedName{Name: ns})
	if after.UID != before.UID {
		t.Fatal("the existing namespace was replaced")
	}
}

// TestClaimedNamespaceIsRefused: a namespace another Workspace owns is
// refused — Failed, NamespaceClaimed, no error and no requeue, the owner's
// label untouched — until the owner is deleted, when the waiting
// Workspace takes it over.
func TestClaimedNamespaceIsRefused(t *testing.T) {
	base := env.Namespace(t)
	c := start(t)
	owner, second, ns := base+"-owner", base+"-second", base+"-shared"
	newWorkspace(t, owner, ns)
	ctrltest.Eventually(t, wait, phaseIs(owner, omniav1.WorkspacePhaseReady, omniav1.ReasonNamespaceOwned))
	newWorkspace(t, second, ns)
	ctrltest.Eventually(t, wait, phaseIs(second, omniav1.WorkspacePhaseFailed, omniav1.ReasonNamespaceClaimed))
	notRequeued(t, c, second)
	if err := labelIs(ns, owner)(); err != nil {
		t.Fatal(err)
	}

	if err := env.Client.Delete(context.Background(), &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: owner}}); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, labelIs(ns, second))
	ctrltest.Eventually(t, wait, phaseIs(second, omniav1.WorkspacePhaseReady, omniav1.ReasonNamespaceOwned))
}

// TestMovedWorkspaceReleasesItsOldNamespace: changing spec.namespace.name
// claims the new namespace and takes the label off the old one, which is
// kept.
func TestMovedWorkspaceReleasesItsOldNamespace(t *testing.T) {
	base := env.Namespace(t)
	start(t)
	name, first, next := base, base+"-one", base+"-two"
	newWorkspace(t, name, first)
	ctrltest.Eventually(t, wait, labelIs(first, name))
	ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, types.NamespacedName{Name: name}, func(ws *omniav1.Workspace) error {
		ws.Spec.Namespace.Name = next
		return env.Client.Update(context.Background(), ws)
	}))
	ctrltest.Eventually(t, wait, labelIs(next, name))
	ctrltest.Eventually(t, wait, labelIs(first, ""))
	ctrltest.Eventually(t, wait, phaseIs(name, omniav1.WorkspacePhaseReady, omniav1.ReasonNamespaceOwned))
}

// TestTransientAPIFailureIsReturned: a failing API call is returned, so
// controller-runtime retries with backoff, and does not mark the Workspace
// Failed; once it clears, the same pass succeeds without a requeue.
func TestTransientAPIFailureIsReturned(t *testing.T) {
	base := env.Namespace(t)
	c := ctrltest.StartManager(t, env) // cache and indexes only: the test drives the passes
	cases := []struct {
		name string
		fail string
	}{
		{"reading the namespace fails", ctrltest.Call("get", &corev1.Namespace{})},
		{"listing the labelled namespaces fails", ctrltest.Call("list", &corev1.NamespaceList{})},
		{"creating the namespace fails", ctrltest.Call("create", &corev1.Namespace{})},
		{"writing the status fails", ctrltest.Call("status", &omniav1.Workspace{})},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("%s-%d", base, i)
			newWorkspace(t, name, name)
			req := reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
			ctrltest.Eventually(t, wait, func() error { return c.Get(context.Background(), req.NamespacedName, &omniav1.Workspace{}) })
			ctrltest.ReturnsInjected(t, context.Background(), &Reconciler{Client: ctrltest.FailingOn(c, tc.fail)}, req)
			ws := ctrltest.Get[omniav1.Workspace](t, env, req.NamespacedName)
			if ws.Status.Phase == omniav1.WorkspacePhaseFailed {
				t.Fatal("a 503 marked the Workspace Failed")
			}
			r := &Reconciler{Client: c}
			ctrltest.Eventually(t, wait, func() error {
				res, err := r.Reconcile(context.Background(), req)
				if err != nil && !apierrors.IsAlreadyExists(err) { // the cache may lag a create of the failed pass
					return err
				}
				if res != (reconcile.Result{}) {
					t.Fatalf("a pass asked for %+v; success is never requeued", res)
				}
				if err != nil {
					return err
				}
				return phaseIs(name, omniav1.WorkspacePhaseReady, omniav1.ReasonNamespaceOwned)()
			})
		})
	}
}
