package promptpack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/metrics"
)

const wait = 30 * time.Second

// start runs the PromptPack controller, counting its passes.
func start(t *testing.T) *ctrltest.Counter {
	t.Helper()
	v := mustValidator(t)
	counter := &ctrltest.Counter{}
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("promptpack-controller"), Validator: v}
		counter.Inner = r
		return r.SetupWithManager(mgr, counter)
	})
	return counter
}

// createPack creates a ConfigMap-sourced PromptPack version and its ConfigMap (none when content is "").
func createPack(t *testing.T, ns, name, packName, version, content string) {
	t.Helper()
	if content != "" {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-cm", Namespace: ns}, Data: map[string]string{omniav1.PackJSONKey: content}}
		ctrltest.Create(t, env, c)
	}
	p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: omniav1.PromptPackSpec{
		PackName: packName, Version: version,
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: name + "-cm"}}}}
	ctrltest.Create(t, env, p)
}

// getPack reads a PromptPack through the API server.
//
//nolint:contextcheck // test helper: it makes its own context.Background(), the only context the tests here have; callers have nothing cancellable to pass
func getPack(ns, name string) (*omniav1.PromptPack, error) {
	p := &omniav1.PromptPack{}
	return p, env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p)
}

func phaseIs(ns, name string, want omniav1.PromptPackPhase) func() error {
	return func() error {
		p, err := getPack(ns, name)
		if err != nil {
			return err
		}
		if p.Status.Phase != want {
			return fmt.Errorf("%s phase %q, want %q (%+v)", name, p.Status.Phase, want, p.Status.Conditions)
		}
		return nil
	}
}

func condIs(ns, name, typ string, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		p, err := getPack(ns, name)
		if err != nil {
			return err
		}
		if err := ctrltest.ConditionIs(p.Status.Conditions, typ, status, reason); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
}

func eventFor(ns, name, reason, noteSubstr string) func() error {
	return func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, noteSubstr) {
				return nil
			}
		}
		return fmt.Errorf("no Warning %s event on %s containing %q among %d events", reason, name, noteSubstr, len(evs.Items))
	}
}

func TestLiveSourceIsActiveFromSpec(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: ns}, Spec: omniav1.PromptPackSpec{
		PackName: "dev", Version: "0.1.0",
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeLive, Live: &omniav1.LivePromptSource{URL: "http://127.0.0.1:1/pack.json"}}}}
	ctrltest.Create(t, env, p)
	ctrltest.Eventually(t, wait, phaseIs(ns, "live", omniav1.PromptPackPhaseActive))
	ctrltest.Eventually(t, wait, condIs(ns, "live", omniav1.ConditionSourceValid, metav1.ConditionTrue, omniav1.ReasonLiveSource))
	got, _ := getPack(ns, "live")
	if got.Labels[omniav1.LabelPromptPack] != "dev" {
		t.Errorf("pack label = %q", got.Labels[omniav1.LabelPromptPack])
	}
	if got.Status.ActiveVersion == nil || *got.Status.ActiveVersion != "0.1.0" {
		t.Errorf("activeVersion = %v", got.Status.ActiveVersion)
	}
}

// TestSourceFailureThenFix: a missing ConfigMap fails the version with a
// SourceValidationFailed event; creating it makes the version Active.
func TestSourceFailureThenFix(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	createPack(t, ns, "a", "support", "1.0.0", "")
	ctrltest.Eventually(t, wait, phaseIs(ns, "a", omniav1.PromptPackPhaseFailed))
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionSourceValid, metav1.ConditionFalse, omniav1.ReasonSourceValidationFailed))
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionSchemaValid, metav1.ConditionUnknown, omniav1.ReasonSourceInvalid))
	ctrltest.Eventually(t, wait, eventFor(ns, "a", omniav1.EventSourceValidationFailed, `ConfigMap "a-cm" not found`))

	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a-cm", Namespace: ns}, Data: map[string]string{omniav1.PackJSONKey: validPack}}
	ctrltest.Create(t, env, c)
	ctrltest.Eventually(t, wait, phaseIs(ns, "a", omniav1.PromptPackPhaseActive))
	got, _ := getPack(ns, "a")
	if !strings.HasPrefix(got.Status.ContentDigest, "sha256:") {
		t.Errorf("contentDigest = %q", got.Status.ContentDigest)
	}
}

// TestSchemaFailureThenFix: a malformed pack.json fails with the
// validator's message in the event; fixing the ConfigMap recovers.
func TestSchemaFailureThenFix(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	createPack(t, ns, "a", "support", "1.0.0", `{"id":"Not Valid"}`)
	ctrltest.Eventually(t, wait, phaseIs(ns, "a", omniav1.PromptPackPhaseFailed))
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionSchemaValid, metav1.ConditionFalse, omniav1.ReasonSchemaValidationFailed))
	ctrltest.Eventually(t, wait, eventFor(ns, "a", omniav1.EventSchemaValidationFailed, "invalid pack.json: /: missing properties"))

	c := ctrltest.Get[corev1.ConfigMap](t, env, types.NamespacedName{Namespace: ns, Name: "a-cm"})
	c.Data[omniav1.PackJSONKey] = validPack
	if err := env.Client.Update(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, phaseIs(ns, "a", omniav1.PromptPackPhaseActive))
}

// TestSiblingsConvergeOutOfOrder: versions created newest first converge to
// one Active and the rest Superseded, through the phase-change re-enqueue.
func TestSiblingsConvergeOutOfOrder(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	for _, v := range []string{"3", "1", "2"} {
		createPack(t, ns, "v"+v, "support", v+".0.0", validPack)
	}
	ctrltest.Eventually(t, wait, phaseIs(ns, "v3", omniav1.PromptPackPhaseActive))
	ctrltest.Eventually(t, wait, phaseIs(ns, "v2", omniav1.PromptPackPhaseSuperseded))
	ctrltest.Eventually(t, wait, phaseIs(ns, "v1", omniav1.PromptPackPhaseSuperseded))
	ctrltest.Eventually(t, wait, condIs(ns, "v1", omniav1.ConditionSuperseded, metav1.ConditionTrue, omniav1.ReasonNewerVersionPublished))
	old, _ := getPack(ns, "v1")
	if old.Status.ActiveVersion != nil {
		t.Errorf("superseded activeVersion = %v", *old.Status.ActiveVersion)
	}
}

// TestNewerValidVersionSupersedesOlder: the older version stays Active
// until the newer one validates, then flips to Superseded.
func TestNewerValidVersionSupersedesOlder(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	createPack(t, ns, "old", "support", "1.0.0", validPack)
	ctrltest.Eventually(t, wait, phaseIs(ns, "old", omniav1.PromptPackPhaseActive))
	createPack(t, ns, "new", "support", "1.1.0", validPack)
	ctrltest.Eventually(t, wait, phaseIs(ns, "new", omniav1.PromptPackPhaseActive))
	ctrltest.Eventually(t, wait, phaseIs(ns, "old", omniav1.PromptPackPhaseSuperseded))
}

// TestUnvalidatedNewerCannotSupersede: publishing a broken newer version
// leaves the running version Active.
func TestUnvalidatedNewerCannotSupersede(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	createPack(t, ns, "good", "support", "1.0.0", validPack)
	ctrltest.Eventually(t, wait, phaseIs(ns, "good", omniav1.PromptPackPhaseActive))
	createPack(t, ns, "broken", "support", "2.0.0", `{"id":"x"}`)
	ctrltest.Eventually(t, wait, phaseIs(ns, "broken", omniav1.PromptPackPhaseFailed))
	ctrltest.Consistently(t, 2*time.Second, phaseIs(ns, "good", omniav1.PromptPackPhaseActive))
}

// TestDuplicateVersion: equal precedence (build metadata only): the later
// created serves, the other reports DuplicateVersion.
func TestDuplicateVersion(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	createPack(t, ns, "first", "support", "1.0.0+build.1", validPack)
	ctrltest.Eventually(t, wait, phaseIs(ns, "first", omniav1.PromptPackPhaseActive))
	time.Sleep(1100 * time.Millisecond) // creationTimestamp has one-second resolution
	createPack(t, ns, "second", "support", "1.0.0+build.2", validPack)
	ctrltest.Eventually(t, wait, phaseIs(ns, "second", omniav1.PromptPackPhaseActive))
	ctrltest.Eventually(t, wait, phaseIs(ns, "first", omniav1.PromptPackPhaseSuperseded))
	ctrltest.Eventually(t, wait, condIs(ns, "first", omniav1.ConditionSuperseded, metav1.ConditionTrue, omniav1.ReasonDuplicateVersion))
	ctrltest.Eventually(t, wait, eventFor(ns, "first", omniav1.EventDuplicateVersion, "second"))
}

// TestAgentsNotifiedCounts: the count follows AgentRuntimes as they come,
// and the controller only counts them, never pushes anything to them:
// the counted AgentRuntime is never written by the PromptPack controller
// (no other controller runs here, so any write would be its).
func TestAgentsNotifiedCounts(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	createPack(t, ns, "a", "support", "1.0.0", validPack)
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionAgentsNotified, metav1.ConditionTrue, omniav1.ReasonNoAgentsToNotify))
	ar := ctrltest.Agent(ns, "agent", "support")
	ctrltest.Create(t, env, ar)
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionAgentsNotified, metav1.ConditionTrue, omniav1.ReasonAgentsNotified))
	// A second version makes the controller rank (and count) again.
	createPack(t, ns, "b", "support", "1.1.0", validPack)
	ctrltest.Eventually(t, wait, phaseIs(ns, "a", omniav1.PromptPackPhaseSuperseded))
	got := ctrltest.Get[omniav1.AgentRuntime](t, env, types.NamespacedName{Namespace: ns, Name: "agent"})
	if got.ResourceVersion != ar.ResourceVersion {
		t.Fatalf("the PromptPack controller wrote the AgentRuntime (resourceVersion %s -> %s): %+v", ar.ResourceVersion, got.ResourceVersion, got)
	}
}

// TestIdleAfterConvergence: once Active, further passes write nothing, so
// the controller's own writes do not keep it busy.
func TestIdleAfterConvergence(t *testing.T) {
	ns := env.Namespace(t)
	counter := start(t)
	createPack(t, ns, "a", "support", "1.0.0", validPack)
	ctrltest.Eventually(t, wait, phaseIs(ns, "a", omniav1.PromptPackPhaseActive))
	key := types.NamespacedName{Namespace: ns, Name: "a"}
	time.Sleep(time.Second)
	settled := counter.Count(key)
	p, _ := getPack(ns, "a")
	rv := p.ResourceVersion
	time.Sleep(2 * time.Second)
	if n := counter.Count(key); n != settled {
		t.Errorf("reconciles went on after convergence: %d -> %d", settled, n)
	}
	p, _ = getPack(ns, "a")
	if p.ResourceVersion != rv {
		t.Errorf("object rewritten after convergence")
	}
	if settled > 4 {
		t.Errorf("%d reconciles to converge one version; want at most 4 (create, label, status, own-write echo)", settled)
	}
}

// TestRequeueSplit calls Reconcile directly: a missing ConfigMap returns an
// error (controller-runtime retries with backoff), a schema failure returns
// nil (the ConfigMap watch brings the next pass).
func TestRequeueSplit(t *testing.T) {
	ns := env.Namespace(t)
	c := ctrltest.StartManager(t, env) // cache and indexes only, no controller
	r := &Reconciler{Client: c, Validator: mustValidator(t)}
	createPack(t, ns, "missing", "support", "1.0.0", "")
	createPack(t, ns, "bad", "support", "2.0.0", `{}`)
	ctx := context.Background()
	reconcileOnce := func(name string) (reconcile.Result, error) {
		// The cache may lag the create by a moment.
		var res reconcile.Result
		var err error
		ctrltest.Eventually(t, wait, func() error {
			if _, gerr := getCached(c, ns, name); gerr != nil {
				return gerr
			}
			res, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
			return nil
		})
		return res, err
	}
	if res, err := reconcileOnce("missing"); err == nil || res.RequeueAfter != 0 {
		t.Errorf("missing ConfigMap: result %+v err %v, want an error", res, err)
	}
	if res, err := reconcileOnce("bad"); err != nil || res.RequeueAfter != 0 {
		t.Errorf("schema failure: result %+v err %v, want neither", res, err)
	}
	ctrltest.Eventually(t, wait, phaseIs(ns, "bad", omniav1.PromptPackPhaseFailed))
}

// getCached reads a PromptPack through c, a manager's cached client.
//
//nolint:contextcheck // test helper: it makes its own context.Background(), the only context the tests here have; callers have nothing cancellable to pass
func getCached(c client.Client, ns, name string) (*omniav1.PromptPack, error) {
	p := &omniav1.PromptPack{}
	return p, c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p)
}

// TestValidMetricFollowsThePack: omnia_promptpack_valid is 1 for a live
// version and for a ConfigMap version whose pack.json passes the schema, 0
// while it fails it, and a deleted version's series is gone.
func TestValidMetricFollowsThePack(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	start(t)
	live := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: ns}, Spec: omniav1.PromptPackSpec{
		PackName: "dev", Version: "0.1.0",
		Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeLive, Live: &omniav1.LivePromptSource{URL: "http://127.0.0.1:1/pack.json"}}}}
	ctrltest.Create(t, env, live)
	createPack(t, ns, "a", "support", "1.0.0", `{"id":"Not Valid"}`)
	series := func(name string) prometheus.Labels { return prometheus.Labels{"namespace": ns, "promptpack": name} }
	ctrltest.Eventually(t, wait, ctrltest.MetricIs(metrics.PromptPackValid, series("live"), 1))
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionSchemaValid, metav1.ConditionFalse, omniav1.ReasonSchemaValidationFailed))
	ctrltest.Eventually(t, wait, ctrltest.MetricIs(metrics.PromptPackValid, series("a"), 0))

	c := ctrltest.Get[corev1.ConfigMap](t, env, types.NamespacedName{Namespace: ns, Name: "a-cm"})
	c.Data[omniav1.PackJSONKey] = validPack
	if err := env.Client.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, ctrltest.MetricIs(metrics.PromptPackValid, series("a"), 1))

	for _, name := range []string{"live", "a"} {
		p, err := getPack(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		ctrltest.Eventually(t, wait, ctrltest.MetricGone(metrics.PromptPackValid, series(name)))
	}
}
