package sandboxclass

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

const wait = 30 * time.Second

func start(t *testing.T) {
	t.Helper()
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("sandboxclass-controller")}).SetupWithManager(mgr, nil)
	})
}

func statusIs(ns, name string, phase omniav1.SandboxClassPhase, reason string) func() error {
	return ctrltest.ReadyPhase(env.Client, types.NamespacedName{Namespace: ns, Name: name}, phase, reason,
		func(c *omniav1.SandboxClass) (omniav1.SandboxClassPhase, int64, []metav1.Condition) {
			return c.Status.Phase, c.Status.ObservedGeneration, c.Status.Conditions
		})
}

// TestReferencesDriveReady: a SandboxClass is Failed while its RuntimeClass
// or an allowed Connection is missing and Ready once both exist, each step
// brought by the RuntimeClass or Connection watch alone (the class never
// changes); a deleted Connection fails it again, and an edit that requests
// more memory than it limits fails it without any reference missing.
func TestReferencesDriveReady(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	ctx := context.Background()
	rcName := "gvisor-" + ns // RuntimeClasses are cluster-scoped; one per test namespace
	c := class(0, rcName, "github")
	c.Namespace = ns
	ctrltest.Create(t, env, c)
	ctrltest.Eventually(t, wait, statusIs(ns, "gvisor", omniav1.SandboxClassPhaseFailed, omniav1.ReasonRuntimeClassNotFound))

	rc := runtimeClassObj(rcName)
	conn := &omniav1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: ns}, Spec: omniav1.ConnectionSpec{URL: "https://api.github.com"}}
	steps := []struct {
		name   string
		change func() error
		phase  omniav1.SandboxClassPhase
		reason string
	}{
		{"the RuntimeClass created: the missing Connection is next", func() error { return env.Client.Create(ctx, rc) },
			omniav1.SandboxClassPhaseFailed, omniav1.ReasonAllowedConnectionNotFound},
		{"the Connection created: Ready, Valid", func() error { return env.Client.Create(ctx, conn) },
			omniav1.SandboxClassPhaseReady, omniav1.ReasonSandboxClassValid},
		{"the Connection deleted: Failed again", func() error { return env.Client.Delete(ctx, conn) },
			omniav1.SandboxClassPhaseFailed, omniav1.ReasonAllowedConnectionNotFound},
		{"the Connection back and the resources broken by an edit: ResourcesInvalid", func() error {
			conn.ResourceVersion = ""
			if err := env.Client.Create(ctx, conn); err != nil {
				return err
			}
			return edit(ctx, c, func(cur *omniav1.SandboxClass) { cur.Spec.Resources = resources("2Gi", "1Gi") })
		}, omniav1.SandboxClassPhaseFailed, omniav1.ReasonSandboxResourcesInvalid},
		{"the RuntimeClass deleted while the resources are fixed: RuntimeClassNotFound", func() error {
			if err := env.Client.Delete(ctx, rc); err != nil {
				return err
			}
			return edit(ctx, c, func(cur *omniav1.SandboxClass) { cur.Spec.Resources = nil })
		}, omniav1.SandboxClassPhaseFailed, omniav1.ReasonRuntimeClassNotFound},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.change(); err != nil {
				t.Fatal(err)
			}
			ctrltest.Eventually(t, wait, statusIs(ns, "gvisor", st.phase, st.reason))
		})
	}
}

// edit changes the spec of c, read afresh, again when the controller's
// status write got in between.
func edit(ctx context.Context, c *omniav1.SandboxClass, change func(*omniav1.SandboxClass)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, ctrltest.ObjectIs(env.Client, client.ObjectKeyFromObject(c), func(cur *omniav1.SandboxClass) error {
		change(cur)
		return env.Client.Update(ctx, cur)
	}))
}

// TestOneWorker: the SandboxClass controller runs controller-runtime's
// default of one reconcile at a time.
func TestOneWorker(t *testing.T) {
	ctrltest.CheckWorkers(t, env, newReconciler, 300*time.Millisecond, 1, 4, func(ns, name string) client.Object {
		c := class(0, "")
		c.Namespace, c.Name = ns, name
		return c
	})
}

func newReconciler(c client.Client) ctrltest.Wirer { return &Reconciler{Client: c} }

// TestWatchesMapToClasses: with passes that always succeed (so no retry
// can bring one), creating or deleting the RuntimeClass or an allowed
// Connection enqueues the SandboxClass that names it, while a
// Connection's status write or an unrelated Connection does not.
func TestWatchesMapToClasses(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	passes := ctrltest.StartCounting(t, env, newReconciler)
	rcName := "kata-" + ns
	c := class(0, rcName, "github")
	c.Namespace = ns
	ctrltest.Create(t, env, c)
	key := client.ObjectKeyFromObject(c)
	conn := &omniav1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "github", Namespace: ns}, Spec: omniav1.ConnectionSpec{URL: "https://api.github.com"}}
	other := &omniav1.Connection{ObjectMeta: metav1.ObjectMeta{Name: "slack", Namespace: ns}, Spec: omniav1.ConnectionSpec{URL: "https://slack.com"}}
	steps := []ctrltest.WatchStep{
		{Name: "the RuntimeClass created", Change: func() error { return env.Client.Create(ctx, runtimeClassObj(rcName)) }, Enqueue: true},
		{Name: "the allowed Connection created", Change: func() error { return env.Client.Create(ctx, conn) }, Enqueue: true},
		{Name: "the allowed Connection's status written", Change: func() error {
			conn.Status.Phase = omniav1.ConnectionPhaseReady
			return env.Client.Status().Update(ctx, conn)
		}, Enqueue: false},
		{Name: "an unrelated Connection created", Change: func() error { return env.Client.Create(ctx, other) }, Enqueue: false},
		{Name: "the allowed Connection deleted", Change: func() error { return env.Client.Delete(ctx, conn) }, Enqueue: true},
		{Name: "the RuntimeClass deleted", Change: func() error { return env.Client.Delete(ctx, runtimeClassObj(rcName)) }, Enqueue: true},
	}
	ctrltest.CheckEnqueues(t, passes, key, "SandboxClass", steps)
}
