package containers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/tests/internal/containers"
)

// createOmnia creates the two versions of the pack (each a ConfigMap with
// its pack.json and a PromptPack), a mock Provider, and the AgentRuntime
// pinned to the first version with the rollout steps and no candidate.
// Replica weighting splits the replicas between the stable and the
// candidate Deployment at each setWeight.
func (p *platform) createOmnia(t *testing.T, ns string, steps []omniav1.RolloutStep) {
	t.Helper()
	var objs []client.Object
	for _, v := range []string{omniaFrom, omniaTo} {
		name := omniaPack + "-" + v
		objs = append(objs,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{omniav1.PackJSONKey: omniaPackJSON(v)}},
			&omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: omniav1.PromptPackSpec{
				PackName: omniaPack, Version: v,
				Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: name}}}})
	}
	version, replicas := omniaFrom, int32(omniaReplicas)
	objs = append(objs,
		&omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: omniaProvider, Namespace: ns}, Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeMock}},
		&omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: omniaAgent, Namespace: ns}, Spec: omniav1.AgentRuntimeSpec{
			PromptPackRef: omniav1.PromptPackRef{Name: omniaPack, Version: &version},
			Facades:       []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeWebSocket}},
			Providers:     []omniav1.NamedProviderRef{{Name: "default", ProviderRef: omniav1.ProviderRef{Name: omniaProvider}}},
			Runtime:       &omniav1.RuntimeConfig{Replicas: &replicas},
			Rollout: &omniav1.RolloutConfig{
				TrafficRouting: &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingReplicaWeighted},
				Steps:          steps,
			}}})
	for _, o := range objs {
		if err := p.cl.Create(t.Context(), o); err != nil {
			t.Fatalf("create %T %s/%s: %v", o, ns, o.GetName(), err)
		}
	}
}

// omniaPackJSON is a pack.json of the published PromptPack schema.
func omniaPackJSON(version string) string {
	return `{"id":"` + omniaPack + `","name":"Tides","version":"` + version + `",` +
		`"template_engine":{"version":"v1","syntax":"{{variable}}"},` +
		`"prompts":{"default":{"id":"default","name":"Default","version":"` + version + `","system_template":"You explain the tides."}}}`
}

// setOmniaCandidate starts the rollout: the candidate pins the second version.
func (p *platform) setOmniaCandidate(t *testing.T, ns string) {
	t.Helper()
	a := &omniav1.AgentRuntime{}
	if err := p.cl.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: omniaAgent}, a); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(a.DeepCopy())
	version := omniaTo
	a.Spec.Rollout.Candidate = &omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: omniaPack, Version: &version}}
	if err := p.cl.Patch(t.Context(), a, patch); err != nil {
		t.Fatalf("set the rollout candidate of %s/%s: %v", ns, omniaAgent, err)
	}
}

// killOmniaInStep waits (at most within) until the rollout records kill.step,
// then kill.after into it kills omnia-controllers, and after kill.outage
// starts it again and waits for it to be ready. It records the times in
// kill.
func (p *platform) killOmniaInStep(t *testing.T, omnia *containers.Container, ns string, kill *omniaKill, within time.Duration) {
	t.Helper()
	omniaWait(t, within, fmt.Sprintf("%s/%s at rollout step %d", ns, omniaAgent, kill.step), func(ctx context.Context) error {
		ro, err := p.omniaRolloutStatus(ctx, ns)
		if err != nil {
			return err
		}
		if step := omniaStep(ro); step != kill.step {
			return fmt.Errorf("at step %d", step)
		}
		return nil
	})
	time.Sleep(kill.after)
	ro, err := p.omniaRolloutStatus(t.Context(), ns)
	if err != nil {
		t.Fatal(err)
	}
	if step := omniaStep(ro); step != kill.step || ro.StepStartedAt == nil {
		t.Fatalf("the rollout left step %d before the kill (now at %d): make the pause longer", kill.step, step)
	}
	kill.stepStart = ro.StepStartedAt.Time
	kill.killedAt = time.Now()
	omnia.Kill()
	time.Sleep(kill.outage)
	kill.restartedAt = time.Now()
	omnia.Restart()
	waitOmniaReady(t, omnia)
	kill.readyAt = time.Now()
	t.Logf("omnia-controllers killed %s into step %d, down %s, ready %s after the restart",
		kill.killedAt.Sub(kill.stepStart).Round(100*time.Millisecond), kill.step, kill.outage, kill.readyAt.Sub(kill.restartedAt).Round(100*time.Millisecond))
}

// omniaRolloutStatus reads the AgentRuntime's status.rollout; nil when none is
// recorded.
func (p *platform) omniaRolloutStatus(ctx context.Context, ns string) (*omniav1.RolloutStatus, error) {
	a := &omniav1.AgentRuntime{}
	if err := p.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: omniaAgent}, a); err != nil {
		return nil, err
	}
	return a.Status.Rollout, nil
}

// omniaStep is status.rollout.currentStep, -1 when none is recorded.
func omniaStep(ro *omniav1.RolloutStatus) int32 {
	if ro == nil || ro.CurrentStep == nil {
		return -1
	}
	return *ro.CurrentStep
}

// omniaServing is nil once the AgentRuntime is Running on version with
// every replica of its stable Deployment ready on the current template.
func (p *platform) omniaServing(ctx context.Context, ns, version string) error {
	a := &omniav1.AgentRuntime{}
	if err := p.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: omniaAgent}, a); err != nil {
		return err
	}
	if a.Status.Phase != omniav1.AgentRuntimePhaseRunning {
		return fmt.Errorf("phase %q", a.Status.Phase)
	}
	d := &appsv1.Deployment{}
	if err := p.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: omniaAgent}, d); err != nil {
		return err
	}
	if v := omniaPackVersion(d); v != version {
		return fmt.Errorf("stable Deployment on pack %q", v)
	}
	s := d.Status
	if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != omniaReplicas || s.ReadyReplicas != omniaReplicas || s.Replicas != omniaReplicas {
		return fmt.Errorf("stable Deployment: %d replicas, %d updated, %d ready, want %d", s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, omniaReplicas)
	}
	return nil
}

// omniaPromoted is nil once the rollout has ended as the controller
// records a promotion: status.rollout inactive with the outcome
// "promoted", RolloutActive False, the spec pinning the candidate's
// version with the candidate cleared, the candidate Deployment gone and
// every stable replica ready on the new version.
func (p *platform) omniaPromoted(ctx context.Context, ns string) error {
	a := &omniav1.AgentRuntime{}
	if err := p.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: omniaAgent}, a); err != nil {
		return err
	}
	ro := a.Status.Rollout
	switch {
	case ro == nil:
		return errors.New("no status.rollout")
	case ro.Active || ro.Promoting || ro.Message != omniaPromoted:
		return fmt.Errorf("status.rollout: step %d, active %t, promoting %t: %s", omniaStep(ro), ro.Active, ro.Promoting, ro.Message)
	case a.Spec.PromptPackRef.Version == nil || *a.Spec.PromptPackRef.Version != omniaTo:
		return errors.New("the spec does not pin " + omniaTo)
	case a.Spec.Rollout == nil || a.Spec.Rollout.Candidate != nil:
		return errors.New("the promoted candidate is not cleared")
	}
	if c := meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionRolloutActive); c == nil || c.Status != metav1.ConditionFalse || c.Reason != omniav1.ReasonNoActiveRollout {
		return fmt.Errorf("condition %s is %+v", omniav1.ConditionRolloutActive, c)
	}
	err := p.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: omniaAgent + "-canary"}, &appsv1.Deployment{})
	if err == nil {
		return errors.New("the candidate Deployment is still there")
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	return p.omniaServing(ctx, ns, omniaTo)
}

// omniaPackVersion is the pack version a Deployment's runtime container is
// given (OMNIA_PROMPTPACK_VERSION).
func omniaPackVersion(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "OMNIA_PROMPTPACK_VERSION" {
				return e.Value
			}
		}
	}
	return ""
}

// omniaWait polls cond every 250 ms until it returns nil, failing the test
// after within with cond's last error.
func omniaWait(t *testing.T, within time.Duration, what string, cond func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		err := cond(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %s: %v", what, within, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// omniaReading is one reading of status.rollout.
type omniaReading struct {
	at time.Time
	// step is currentStep, -1 when none is recorded.
	step int32
}

// omniaWatch is what the watcher recorded of one namespace: every reading
// of the AgentRuntime's rollout step, and every pod, ReplicaSet and pod
// template that ever existed there while it looked.
type omniaWatch struct {
	seen []omniaReading
	// starts are, per step, the distinct status.rollout.stepStartedAt
	// recorded for it, in Unix seconds (the status's precision).
	starts map[int32]map[int64]bool
	// pods are every pod seen, each with what the last reading showed of
	// it (podSeen), for a failure to say which pods came and went.
	pods        map[types.UID]string
	replicaSets map[types.UID]bool
	// templates are, per Deployment, the digests of the pod templates it
	// had.
	templates map[string]map[string]bool
	// errs counts the readings that failed.
	errs int

	done chan struct{}
	quit chan struct{}
}

// watchOmnia starts the watcher of ns; stop ends it and returns what it
// saw. It reads every 250 ms with the admin client.
func (p *platform) watchOmnia(t *testing.T, ns string) *omniaWatch {
	w := &omniaWatch{starts: map[int32]map[int64]bool{}, pods: map[types.UID]string{}, replicaSets: map[types.UID]bool{},
		templates: map[string]map[string]bool{}, done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			if err := p.lookOmnia(t.Context(), ns, w); err != nil {
				w.errs++
			}
			select {
			case <-w.quit:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	// The watcher must not outlive a test that fails before stop.
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			w.stop()
		}
	})
	return w
}

// podSeen says what a reading showed of a pod: its name, its ReplicaSet,
// its phase and reason, when it was created, and whether it was being
// deleted.
func podSeen(p *corev1.Pod) string {
	owner := "no owner"
	if ref := metav1.GetControllerOf(p); ref != nil {
		owner = ref.Kind + " " + ref.Name
	}
	s := fmt.Sprintf("%s (%s) %s %s, created %s", p.Name, owner, p.Status.Phase, p.Status.Reason, p.CreationTimestamp.UTC().Format(time.RFC3339))
	if p.DeletionTimestamp != nil {
		s += ", being deleted since " + p.DeletionTimestamp.UTC().Format(time.RFC3339)
	}
	return s
}

// podList is every pod seen, as podSeen last showed it, sorted.
func (w *omniaWatch) podList() string {
	out := make([]string, 0, len(w.pods))
	for _, s := range w.pods {
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// stop ends the watcher after its last reading.
func (w *omniaWatch) stop() *omniaWatch {
	close(w.quit)
	<-w.done
	return w
}

// lookOmnia takes one reading of ns into w.
func (p *platform) lookOmnia(ctx context.Context, ns string, w *omniaWatch) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := p.cl.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return err
	}
	var rss appsv1.ReplicaSetList
	if err := p.cl.List(ctx, &rss, client.InNamespace(ns)); err != nil {
		return err
	}
	var deps appsv1.DeploymentList
	if err := p.cl.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, o := range pods.Items {
		w.pods[o.UID] = podSeen(&o)
	}
	for _, o := range rss.Items {
		w.replicaSets[o.UID] = true
	}
	for _, d := range deps.Items {
		raw, err := json.Marshal(d.Spec.Template)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		if w.templates[d.Name] == nil {
			w.templates[d.Name] = map[string]bool{}
		}
		w.templates[d.Name][hex.EncodeToString(sum[:8])] = true
	}
	a := &omniav1.AgentRuntime{}
	err := p.cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: omniaAgent}, a)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ro := a.Status.Rollout
	step := omniaStep(ro)
	w.seen = append(w.seen, omniaReading{at: time.Now(), step: step})
	if step >= 0 && ro.StepStartedAt != nil {
		if w.starts[step] == nil {
			w.starts[step] = map[int64]bool{}
		}
		w.starts[step][ro.StepStartedAt.Unix()] = true
	}
	return nil
}

// check holds what every rollout must show: the recorded step never went
// backwards, each step that held was recorded as started once, the steps
// went up to the promotion, and the watcher read the AgentRuntime.
func (r *omniaRun) check(t *testing.T) {
	t.Helper()
	prev := int32(-1)
	for _, s := range r.seen {
		if s.step < 0 {
			continue
		}
		if s.step < prev {
			t.Errorf("%s: status.rollout.currentStep went back from %d to %d at %s (steps seen %v)", r.ns, prev, s.step, s.at.Format(time.RFC3339Nano), r.stepsSeen())
		}
		prev = s.step
	}
	if want := int32(len(r.steps)); prev != want {
		t.Errorf("%s: the last step seen is %d, want %d (the promotion)", r.ns, prev, want)
	}
	for step, starts := range r.starts {
		if len(starts) != 1 {
			t.Errorf("%s: step %d was recorded as started at %d times %v, want once", r.ns, step, len(starts), omniaTimes(starts))
		}
	}
	if len(r.seen) == 0 {
		t.Errorf("%s: the watcher never read the AgentRuntime", r.ns)
	}
	if r.errs > 0 {
		// A failed reading is a gap in what the checks see, not a fault.
		t.Logf("%s: %d of the watcher's readings failed", r.ns, r.errs)
	}
}

// stepsSeen are the distinct steps seen, in order.
func (r *omniaRun) stepsSeen() []int32 {
	var out []int32
	for _, s := range r.seen {
		if s.step >= 0 && (len(out) == 0 || out[len(out)-1] != s.step) {
			out = append(out, s.step)
		}
	}
	return out
}

// firstStepAfter is the first step seen after t, -1 when none was.
func (r *omniaRun) firstStepAfter(t time.Time) int32 {
	for _, s := range r.seen {
		if s.at.After(t) && s.step >= 0 {
			return s.step
		}
	}
	return -1
}

// stepStart is when step began as recorded, zero when it never was (or
// was recorded more than once: check reports that).
func (r *omniaRun) stepStart(step int32) time.Time {
	if starts := r.starts[step]; len(starts) == 1 {
		for u := range starts {
			return time.Unix(u, 0)
		}
	}
	return time.Time{}
}

// nextStart is when the first step recorded after step began: when step
// ended. A step that is over within one pass (a setWeight, a pause's end)
// may be recorded only for an instant, so the next one recorded may be
// further on. Zero when none was.
func (r *omniaRun) nextStart(step int32) time.Time {
	next := int32(-1)
	for s := range r.starts {
		if s > step && (next < 0 || s < next) {
			next = s
		}
	}
	if next < 0 {
		return time.Time{}
	}
	return r.stepStart(next)
}

// stepLength is how long step held, from its recorded start to its end
// (nextStart); 0 when either is unknown.
func (r *omniaRun) stepLength(step int32) time.Duration {
	from, to := r.stepStart(step), r.nextStart(step)
	if from.IsZero() || to.IsZero() {
		return 0
	}
	return to.Sub(from)
}

// templateCount is how many pod templates the Deployments had in all.
func (w *omniaWatch) templateCount() int {
	n := 0
	for _, ts := range w.templates {
		n += len(ts)
	}
	return n
}

// omniaTimes lists Unix seconds as times, for messages.
func omniaTimes(set map[int64]bool) []string {
	var out []string
	for u := range set {
		out = append(out, time.Unix(u, 0).UTC().Format(time.RFC3339))
	}
	slices.Sort(out)
	return out
}

// laterOf is the later of a and b.
func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
