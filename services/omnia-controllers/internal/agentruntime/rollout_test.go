package agentruntime

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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

// rolloutClock is the Reconciler's clock in rollout tests: real time plus an
// offset the test moves forward, so a long pause ends without a long
// sleep.
type rolloutClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *rolloutClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *rolloutClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// startRollout runs the controllers as startAll does, with a Prometheus
// querier (nil for none) and the test's clock.
func startRollout(t *testing.T, metrics MetricsQuerier, clock *rolloutClock) {
	t.Helper()
	startStack(t, func(_ ctrl.Manager, r *Reconciler) reconcile.Reconciler {
		r.Metrics, r.Now = metrics, clock.Now
		return nil
	})
}

// roPrometheus speaks the Prometheus HTTP API's instant query endpoint:
// every query returns one sample of the current value.
type roPrometheus struct {
	mu      sync.Mutex
	value   string
	queries []string
}

func (p *roPrometheus) set(v string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.value = v
}

func (p *roPrometheus) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.queries...)
}

func (p *roPrometheus) start(t *testing.T) MetricsQuerier {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		p.mu.Lock()
		p.queries = append(p.queries, r.FormValue("query"))
		v := p.value
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"agent":"agent"},"value":[%d,%q]}]}}`, time.Now().Unix(), v)
	}))
	t.Cleanup(srv.Close)
	q, err := NewPrometheusQuerier(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// rolloutAgent is "agent" pinned to pack version 1.0.0 with two replicas,
// over packs 1.0.0 and 1.1.0 and a mock Provider.
func rolloutAgent(t *testing.T, ns string, mut func(*omniav1.AgentRuntime)) {
	t.Helper()
	cm1, p1 := packObjects(ns, "support-v1", "1.0.0", validPack)
	cm2, p2 := packObjects(ns, "support-v2", "1.1.0", validPack)
	ctrltest.Create(t, env, cm1, p1, cm2, p2, mockProvider(ns, "llm"), newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.PromptPackRef.Version = ptr("1.0.0")
		a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(2))}
		if mut != nil {
			mut(a)
		}
	}))
}

// startRolloutAgent runs the controllers without Prometheus on a fixed
// clock and creates a rolloutAgent with spec.rollout ro in a fresh
// namespace, which it returns.
func startRolloutAgent(t *testing.T, ro *omniav1.RolloutConfig) string {
	t.Helper()
	ns := env.Namespace(t)
	startRollout(t, nil, &rolloutClock{})
	rolloutAgent(t, ns, func(a *omniav1.AgentRuntime) { a.Spec.Rollout = ro })
	return ns
}

// roDeployments reads the stable and the candidate Deployment of "agent".
func roDeployments(ns string) (stable, candidate *appsv1.Deployment, err error) {
	if candidate, err = roDeployment(ns, "agent"+CandidateSuffix); err != nil {
		return nil, nil, err
	}
	stable, err = roDeployment(ns, "agent")
	return stable, candidate, err
}

// roReplicasAre holds while the stable and the candidate Deployment of
// "agent" ask for the given replicas.
func roReplicasAre(ns string, stable, candidate int32) func() error {
	return func() error {
		s, c, err := roDeployments(ns)
		if err != nil {
			return err
		}
		if roReplicas(s) != stable || roReplicas(c) != candidate {
			return fmt.Errorf("replicas stable %d candidate %d, want %d and %d", roReplicas(s), roReplicas(c), stable, candidate)
		}
		return nil
	}
}

// roNoCandidate fails while the candidate Deployment of "agent" can still
// be read.
func roNoCandidate(ns string) error {
	if _, err := roDeployment(ns, "agent"+CandidateSuffix); err == nil {
		return fmt.Errorf("candidate Deployment still exists")
	}
	return nil
}

func roToV110() *omniav1.CandidateOverrides {
	return &omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: ptr("1.1.0")}}
}

// roHeld is a rollout to 1.1.0 that sets the candidate's weight and then
// holds it there with an indefinite pause, its traffic routed by mode (no
// traffic routing when mode is ""): the rollout the tests of a candidate
// that stays up start from.
func roHeld(weight int32, mode omniav1.TrafficRoutingMode) *omniav1.RolloutConfig {
	ro := &omniav1.RolloutConfig{Candidate: roToV110(), Steps: []omniav1.RolloutStep{{SetWeight: ptr(weight)}, {Pause: &omniav1.RolloutPause{}}}}
	if mode != "" {
		ro.TrafficRouting = &omniav1.TrafficRoutingConfig{Mode: mode}
	}
	return ro
}

// roEnded is an Eventually condition: the rollout has ended (no candidate
// Deployment is left) and the stable Deployment passes check.
func roEnded(ns string, check func(stable *appsv1.Deployment) error) func() error {
	return func() error {
		if err := roNoCandidate(ns); err != nil {
			return err
		}
		s, err := roDeployment(ns, "agent")
		if err != nil {
			return err
		}
		return check(s)
	}
}

func roDeployment(ns, name string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d)
}

func roEnv(d *appsv1.Deployment, name string) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func roReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}

// rolloutEvent finds an event of the given type and reason on the agent.
func rolloutEvent(ns, typ, reason string) func() error {
	return func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(context.Background(), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "agent" && e.Type == typ && e.Reason == reason {
				return nil
			}
		}
		return fmt.Errorf("no %s %s event among %d", typ, reason, len(evs.Items))
	}
}

// roReadyAll plays the kubelet for every agent pod that exists now, as
// markPodsReady does, without failing on a pod that is already gone.
func roReadyAll(ns string) error {
	var ps corev1.PodList
	if err := env.Client.List(context.Background(), &ps, client.InNamespace(ns), client.MatchingLabels{LabelInstance: "agent"}); err != nil {
		return err
	}
	now := metav1.Now()
	for i := range ps.Items {
		p := &ps.Items[i]
		if roPodReady(p) {
			continue
		}
		setPodReady(p, now)
		if err := env.Client.Status().Update(context.Background(), p); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

func roPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// roPoke changes an annotation: a watch event, so the agent reconciles now
// rather than when its timer fires.
func roPoke(t *testing.T, ns string) {
	t.Helper()
	ctrltest.Eventually(t, wait, func() error {
		a, err := getAgent(ns, "agent")
		if err != nil {
			return err
		}
		if a.Annotations == nil {
			a.Annotations = map[string]string{}
		}
		a.Annotations["test/poke"] = time.Now().Format(time.RFC3339Nano)
		return env.Client.Update(context.Background(), a)
	})
}

// roSetCandidate starts a rollout on a running agent.
func roSetCandidate(t *testing.T, ns string, c *omniav1.CandidateOverrides) {
	t.Helper()
	ctrltest.Eventually(t, wait, func() error {
		a, err := getAgent(ns, "agent")
		if err != nil {
			return err
		}
		a.Spec.Rollout.Candidate = c
		return env.Client.Update(context.Background(), a)
	})
}

// roStableOnly waits for the agent's stable Deployment, its pods ready,
// and RolloutActive=False: no rollout yet.
func roStableOnly(t *testing.T, ns string) {
	t.Helper()
	ctrltest.Eventually(t, wait, func() error { _, err := roDeployment(ns, "agent"); return err })
	ctrltest.Eventually(t, wait, func() error { return roReadyAll(ns) })
	ctrltest.Eventually(t, wait, rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		return roCondition(a, omniav1.ConditionRolloutActive, metav1.ConditionFalse, omniav1.ReasonNoActiveRollout)
	}))
}

// roPromoted plays the kubelet (roReadyAll) until the agent's rollout is
// over with the message "promoted", and then holds the agent to more, if
// set.
func roPromoted(ns string, more func(*omniav1.AgentRuntime) error) func() error {
	return func() error {
		if err := roReadyAll(ns); err != nil {
			return err
		}
		a, err := getAgent(ns, "agent")
		if err != nil {
			return err
		}
		if ro := a.Status.Rollout; ro == nil || ro.Active || ro.Message != "promoted" {
			return fmt.Errorf("status.rollout %+v", ro)
		}
		if more == nil {
			return nil
		}
		return more(a)
	}
}

func rolloutIs(ns string, check func(*omniav1.AgentRuntime) error) func() error {
	return func() error {
		a, err := getAgent(ns, "agent")
		if err != nil {
			return err
		}
		return check(a)
	}
}

func roCondition(a *omniav1.AgentRuntime, typ string, status metav1.ConditionStatus, reason string) error {
	return ctrltest.ConditionIs(a.Status.Conditions, typ, status, reason)
}

// roAtStep checks that a's rollout is at step with a message containing
// msgHas.
func roAtStep(a *omniav1.AgentRuntime, step int32, msgHas string) error {
	ro := a.Status.Rollout
	if ro == nil || ro.CurrentStep == nil || *ro.CurrentStep != step || !strings.Contains(ro.Message, msgHas) {
		return fmt.Errorf("status.rollout %+v, want step %d with a message containing %q", ro, step, msgHas)
	}
	return nil
}

// roActiveAt is a condition on the agent of ns: its rollout at step
// (roAtStep) and RolloutActive True with reason.
func roActiveAt(ns string, step int32, msgHas, reason string) func() error {
	return rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		if err := roAtStep(a, step, msgHas); err != nil {
			return err
		}
		return roCondition(a, omniav1.ConditionRolloutActive, metav1.ConditionTrue, reason)
	})
}

// TestRolloutCanaryPromotes walks a canary: setWeight 50 splits the two
// replicas one and one between the stable Deployment and a candidate
// Deployment <name>-canary (track canary, OMNIA_VARIANT=candidate, owned by
// the agent); the timed pause holds until the clock passes its end; then
// the promotion writes the candidate's pack into the spec, waits for the
// stable Deployment to run it on every replica, and removes the candidate.
func TestRolloutCanaryPromotes(t *testing.T) {
	ns := env.Namespace(t)
	clock := &rolloutClock{}
	startRollout(t, nil, clock)
	rolloutAgent(t, ns, func(a *omniav1.AgentRuntime) {
		a.Spec.Rollout = &omniav1.RolloutConfig{
			Steps: []omniav1.RolloutStep{
				{SetWeight: ptr(int32(50))},
				{Pause: &omniav1.RolloutPause{Duration: &metav1.Duration{Duration: time.Hour}}},
			},
			TrafficRouting: &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingReplicaWeighted},
		}
	})
	roStableOnly(t, ns)

	roSetCandidate(t, ns, roToV110())
	ctrltest.Eventually(t, wait, roReplicasAre(ns, 1, 1))
	c, _ := roDeployment(ns, "agent"+CandidateSuffix)
	s, _ := roDeployment(ns, "agent")
	if !metav1.IsControlledBy(c, mustAgent(t, ns, "agent")) {
		t.Fatal("candidate Deployment not controlled by the agent")
	}
	if c.Spec.Selector.MatchLabels[omniav1.LabelTrack] != omniav1.TrackCanary || c.Spec.Template.Labels[omniav1.LabelTrack] != omniav1.TrackCanary ||
		c.Spec.Template.Labels[LabelInstance] != "agent" {
		t.Fatalf("candidate selector %v, template labels %v", c.Spec.Selector.MatchLabels, c.Spec.Template.Labels)
	}
	if roEnv(c, EnvVariant) != VariantCandidate || roEnv(c, "OMNIA_PROMPTPACK_VERSION") != "1.1.0" {
		t.Fatalf("candidate variant %q, version %q", roEnv(c, EnvVariant), roEnv(c, "OMNIA_PROMPTPACK_VERSION"))
	}
	if s.Spec.Selector.MatchLabels[omniav1.LabelTrack] != omniav1.TrackStable || s.Spec.Template.Labels[omniav1.LabelTrack] != omniav1.TrackStable ||
		roEnv(s, EnvVariant) != VariantStable || roEnv(s, "OMNIA_PROMPTPACK_VERSION") != "1.0.0" {
		t.Fatalf("stable selector %v, labels %v, variant %q", s.Spec.Selector.MatchLabels, s.Spec.Template.Labels, roEnv(s, EnvVariant))
	}

	// The pause holds: the rollout stays on step 1 at 50%.
	holding := rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		ro := a.Status.Rollout
		if ro == nil || !ro.Active || ro.CurrentStep == nil || *ro.CurrentStep != 1 || ro.CurrentWeight == nil || *ro.CurrentWeight != 50 ||
			ro.StableVersion != "1.0.0" || ro.CandidateVersion != "1.1.0" || ro.StepStartedAt == nil ||
			ro.TrafficRoutingMode != omniav1.TrafficRoutingReplicaWeighted || ro.TrafficWeightEnforced || !strings.Contains(ro.Message, "paused") {
			return fmt.Errorf("status.rollout %+v", ro)
		}
		if *a.Spec.PromptPackRef.Version != "1.0.0" {
			return fmt.Errorf("promoted during the pause")
		}
		return roCondition(a, omniav1.ConditionRolloutActive, metav1.ConditionTrue, omniav1.ReasonRolloutInProgress)
	})
	ctrltest.Eventually(t, wait, holding)
	ctrltest.Eventually(t, wait, rolloutEvent(ns, corev1.EventTypeNormal, omniav1.EventRolloutStep))
	roPoke(t, ns)
	ctrltest.Consistently(t, 2*time.Second, holding)

	// The pause ends; the candidate is promoted.
	clock.advance(time.Hour)
	roPoke(t, ns)
	ctrltest.Eventually(t, wait, rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		if *a.Spec.PromptPackRef.Version != "1.1.0" {
			return fmt.Errorf("spec.promptPackRef %+v", a.Spec.PromptPackRef)
		}
		return nil
	}))
	ctrltest.Eventually(t, wait, rolloutEvent(ns, corev1.EventTypeNormal, omniav1.EventRolloutPromoting))
	ctrltest.Eventually(t, 2*wait, roPromoted(ns, func(a *omniav1.AgentRuntime) error {
		if a.Spec.Rollout.Candidate != nil {
			return fmt.Errorf("candidate %+v", a.Spec.Rollout.Candidate)
		}
		return roCondition(a, omniav1.ConditionRolloutActive, metav1.ConditionFalse, omniav1.ReasonNoActiveRollout)
	}))
	ctrltest.Eventually(t, wait, rolloutEvent(ns, corev1.EventTypeNormal, omniav1.EventRolloutPromoted))
	ctrltest.Eventually(t, wait, roEnded(ns, func(s *appsv1.Deployment) error {
		if roReplicas(s) != 2 || roEnv(s, "OMNIA_PROMPTPACK_VERSION") != "1.1.0" {
			return fmt.Errorf("stable replicas %d version %q", roReplicas(s), roEnv(s, "OMNIA_PROMPTPACK_VERSION"))
		}
		return nil
	}))
}

// roAnalysisAgent is rolloutAgent with a candidate and the steps setWeight
// 20, the success-rate analysis, and an indefinite pause.
func roAnalysisAgent(t *testing.T, ns string, mode omniav1.RollbackMode) {
	t.Helper()
	ctrltest.Create(t, env, &omniav1.RolloutAnalysis{ObjectMeta: metav1.ObjectMeta{Name: "success-rate", Namespace: ns}, Spec: omniav1.RolloutAnalysisSpec{
		Args:             []omniav1.RolloutAnalysisArg{{Name: "agent"}, {Name: "window", Value: ptr("5m")}},
		Query:            `sum(rate(omnia_requests_ok{agent="{{args.agent}}",variant="candidate"}[{{ args.window }}]))`,
		SuccessCondition: "result[0] >= 0.95",
	}})
	rolloutAgent(t, ns, func(a *omniav1.AgentRuntime) {
		a.Spec.Rollout = &omniav1.RolloutConfig{
			Candidate: roToV110(),
			Steps: []omniav1.RolloutStep{
				{SetWeight: ptr(int32(20))},
				{Analysis: &omniav1.RolloutAnalysisStep{TemplateName: "success-rate", Args: []omniav1.AnalysisArg{{Name: "agent", Value: "agent"}}}},
				{Pause: &omniav1.RolloutPause{}},
			},
			Rollback: &omniav1.RollbackConfig{Mode: mode},
		}
	})
}

// TestRolloutAnalysisPassAndFail: the analysis queries Prometheus (over
// HTTP, through the Prometheus client) with its arguments filled in; a
// result below the success condition holds the step with
// RolloutActive=True/AnalysisFailed and a Warning event under manual
// rollback; once the metric meets it the step passes and the rollout moves
// on to the pause.
func TestRolloutAnalysisPassAndFail(t *testing.T) {
	ns := env.Namespace(t)
	prom := &roPrometheus{value: "0.5"}
	startRollout(t, prom.start(t), &rolloutClock{})
	roAnalysisAgent(t, ns, omniav1.RollbackManual)

	ctrltest.Eventually(t, wait, roActiveAt(ns, 1, "failed", omniav1.ReasonAnalysisFailed))
	ctrltest.Eventually(t, wait, rolloutEvent(ns, corev1.EventTypeWarning, omniav1.EventRolloutAnalysisFailed))
	want := `sum(rate(omnia_requests_ok{agent="agent",variant="candidate"}[5m]))`
	if q := prom.seen(); len(q) == 0 || q[0] != want {
		t.Fatalf("queries %q, want %q", q, want)
	}
	if _, err := roDeployment(ns, "agent"+CandidateSuffix); err != nil {
		t.Fatalf("candidate Deployment removed on a manual-rollback failure: %v", err)
	}

	prom.set("0.99")
	roPoke(t, ns)
	ctrltest.Eventually(t, wait, roActiveAt(ns, 2, "paused", omniav1.ReasonRolloutInProgress))
	ctrltest.Eventually(t, wait, rolloutEvent(ns, corev1.EventTypeNormal, omniav1.EventRolloutAnalysisPassed))
}

// TestRolloutAnalysisFailureRollsBack: with rollback automatic a failed
// analysis rolls back: the candidate's version is recorded in the
// last-rolled-back annotation, the candidate gets the spec's references
// back (so no rollout is active), its Deployment is removed and a Warning
// RolloutRolledBack is emitted. The rollback is counted once in
// omnia_rollouts_finished_total{result="rolled_back"}, after the one step
// (setWeight 20) the rollout took.
func TestRolloutAnalysisFailureRollsBack(t *testing.T) {
	ns := env.Namespace(t)
	prom := &roPrometheus{value: "0.1"}
	startRollout(t, prom.start(t), &rolloutClock{})
	rolledBack := finished(metrics.ResultRolledBack)
	roAnalysisAgent(t, ns, omniav1.RollbackAutomatic)

	ctrltest.Eventually(t, wait, rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		if a.Annotations[omniav1.AnnotationLastRolledBackVersion] != "1.1.0" {
			return fmt.Errorf("annotations %v", a.Annotations)
		}
		c := a.Spec.Rollout.Candidate
		if c == nil || c.PromptPackRef == nil || *c.PromptPackRef.Version != "1.0.0" || *a.Spec.PromptPackRef.Version != "1.0.0" {
			return fmt.Errorf("candidate %+v, spec ref %+v", c, a.Spec.PromptPackRef)
		}
		ro := a.Status.Rollout
		if ro == nil || ro.Active || !strings.Contains(ro.Message, "auto-rollback") {
			return fmt.Errorf("status.rollout %+v", ro)
		}
		return roCondition(a, omniav1.ConditionRolloutActive, metav1.ConditionFalse, omniav1.ReasonNoActiveRollout)
	}))
	ctrltest.Eventually(t, wait, rolloutEvent(ns, corev1.EventTypeWarning, omniav1.EventRolloutRolledBack))
	ctrltest.Eventually(t, wait, roEnded(ns, func(s *appsv1.Deployment) error {
		if roReplicas(s) != 2 {
			return fmt.Errorf("stable replicas %d, want 2 again", roReplicas(s))
		}
		return nil
	}))
	rolledBackOnce := func() error {
		if got := finished(metrics.ResultRolledBack) - rolledBack; got != 1 {
			return fmt.Errorf("rolled_back rose by %v, want 1", got)
		}
		return nil
	}
	ctrltest.Eventually(t, wait, rolledBackOnce)
	ctrltest.Eventually(t, wait, ctrltest.MetricIs(metrics.RolloutInProgress, agentSeries(ns), 0))
	ctrltest.Holds(t, ctrltest.MetricIs(metrics.RolloutSteps, agentSeries(ns), 1))
	roPoke(t, ns)
	ctrltest.Consistently(t, 2*time.Second, rolledBackOnce)
}

// TestRolloutVersionTrigger: an agent pinned to 1.0.0 with a stable-channel
// trigger gets candidate 1.1.0 once that version is published and becomes
// Active, with a RolloutTriggered event; without trafficRouting both
// Deployments run the full replica count.
func TestRolloutVersionTrigger(t *testing.T) {
	ns := env.Namespace(t)
	startRollout(t, nil, &rolloutClock{})
	cm1, p1 := packObjects(ns, "support-v1", "1.0.0", validPack)
	ctrltest.Create(t, env, cm1, p1, mockProvider(ns, "llm"), newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.PromptPackRef.Version = ptr("1.0.0")
		a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(2))}
		a.Spec.Rollout = &omniav1.RolloutConfig{
			Steps:   []omniav1.RolloutStep{{Pause: &omniav1.RolloutPause{}}},
			Trigger: &omniav1.RolloutTrigger{PromptPackChannel: omniav1.ChannelStable},
		}
	}))
	ctrltest.Eventually(t, wait, rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		if a.Status.ActiveVersion == nil || *a.Status.ActiveVersion != "1.0.0" {
			return fmt.Errorf("activeVersion %v", a.Status.ActiveVersion)
		}
		return nil
	}))
	if a := mustAgent(t, ns, "agent"); a.Spec.Rollout.Candidate != nil {
		t.Fatalf("first deploy set a candidate: %+v", a.Spec.Rollout.Candidate)
	}

	cm2, p2 := packObjects(ns, "support-v2", "1.1.0", validPack)
	ctrltest.Create(t, env, cm2, p2)
	ctrltest.Eventually(t, wait, rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		c := a.Spec.Rollout.Candidate
		if c == nil || c.PromptPackRef == nil || c.PromptPackRef.Version == nil || *c.PromptPackRef.Version != "1.1.0" {
			return fmt.Errorf("candidate %+v", c)
		}
		return nil
	}))
	ctrltest.Eventually(t, wait, rolloutEvent(ns, corev1.EventTypeNormal, omniav1.EventRolloutTriggered))
	ctrltest.Eventually(t, wait, func() error {
		s, c, err := roDeployments(ns)
		if err != nil {
			return err
		}
		if roReplicas(c) != 2 || roReplicas(s) != 2 || roEnv(c, "OMNIA_PROMPTPACK_VERSION") != "1.1.0" {
			return fmt.Errorf("replicas stable %d candidate %d, candidate version %q", roReplicas(s), roReplicas(c), roEnv(c, "OMNIA_PROMPTPACK_VERSION"))
		}
		return nil
	})
	ctrltest.Eventually(t, wait, rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		if ro := a.Status.Rollout; ro == nil || !ro.Active || ro.TrafficRoutingMode != "" || ro.CandidateVersion != "1.1.0" {
			return fmt.Errorf("status.rollout %+v", ro)
		}
		return nil
	}))
}

// TestRolloutMeshDegrades: a mesh request on a platform without a mesh
// runs replica-weighted, reports TrafficRouting=False/Degraded and emits a
// Warning TrafficRoutingDegraded.
func TestRolloutMeshDegrades(t *testing.T) {
	ns := startRolloutAgent(t, roHeld(100, omniav1.TrafficRoutingMesh))
	ctrltest.Eventually(t, wait, rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		ro := a.Status.Rollout
		if ro == nil || ro.TrafficRoutingMode != omniav1.TrafficRoutingReplicaWeighted || ro.TrafficWeightEnforced {
			return fmt.Errorf("status.rollout %+v", ro)
		}
		return roCondition(a, omniav1.ConditionTrafficRouting, metav1.ConditionFalse, omniav1.ReasonDegraded)
	}))
	ctrltest.Eventually(t, wait, rolloutEvent(ns, corev1.EventTypeWarning, omniav1.EventTrafficRoutingDegraded))
	ctrltest.Eventually(t, wait, roReplicasAre(ns, 0, 2)) // weight 100
}

// TestRolloutCandidateMissingPack: a candidate naming a version that does
// not exist builds no candidate Deployment and says why in status.rollout
// and RolloutActive, while the stable Deployment is still applied.
func TestRolloutCandidateMissingPack(t *testing.T) {
	ns := startRolloutAgent(t, &omniav1.RolloutConfig{
		Candidate: &omniav1.CandidateOverrides{PromptPackRef: &omniav1.PromptPackRef{Name: "support", Version: ptr("9.9.9")}},
		Steps:     []omniav1.RolloutStep{{SetWeight: ptr(int32(50))}},
	})
	ctrltest.Eventually(t, wait, rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		ro := a.Status.Rollout
		if ro == nil || !ro.Active || !strings.Contains(ro.Message, "9.9.9") {
			return fmt.Errorf("status.rollout %+v", ro)
		}
		return roCondition(a, omniav1.ConditionRolloutActive, metav1.ConditionTrue, omniav1.ReasonDegraded)
	}))
	if _, err := roDeployment(ns, "agent"); err != nil {
		t.Fatalf("stable Deployment: %v", err)
	}
	ctrltest.Consistently(t, time.Second, func() error {
		if _, err := roDeployment(ns, "agent"+CandidateSuffix); err == nil {
			return fmt.Errorf("a candidate Deployment was built from a missing pack")
		}
		return nil
	})
}

// TestRolloutUnhealthyCandidateRollsBack: with rollback automatic, a
// candidate Deployment whose progress deadline passed
// (Progressing=False/ProgressDeadlineExceeded, written here as the
// Deployment controller would after ten minutes) is rolled back, while a
// candidate that is merely not ready yet was left running.
func TestRolloutUnhealthyCandidateRollsBack(t *testing.T) {
	ro := roHeld(50, "")
	ro.Rollback = &omniav1.RollbackConfig{Mode: omniav1.RollbackAutomatic}
	ns := startRolloutAgent(t, ro)
	ctrltest.Eventually(t, wait, func() error {
		c, err := roDeployment(ns, "agent"+CandidateSuffix)
		if err != nil {
			return err
		}
		if c.Status.ObservedGeneration != c.Generation || c.Status.Replicas != roReplicas(c) || c.Status.ReadyReplicas != 0 {
			return fmt.Errorf("candidate status %+v", c.Status)
		}
		return nil
	})
	ctrltest.Consistently(t, time.Second, rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		if a.Status.Rollout == nil || !a.Status.Rollout.Active {
			return fmt.Errorf("a starting candidate was rolled back: %+v", a.Status.Rollout)
		}
		return nil
	}))

	ctrltest.Eventually(t, wait, func() error {
		c, err := roDeployment(ns, "agent"+CandidateSuffix)
		if err != nil {
			return err
		}
		now := metav1.Now()
		c.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: "stand-in for the Deployment controller", LastUpdateTime: now, LastTransitionTime: now}}
		return env.Client.Status().Update(context.Background(), c)
	})
	ctrltest.Eventually(t, wait, rolloutIs(ns, func(a *omniav1.AgentRuntime) error {
		if a.Annotations[omniav1.AnnotationLastRolledBackVersion] != "1.1.0" {
			return fmt.Errorf("annotations %v", a.Annotations)
		}
		if ro := a.Status.Rollout; ro == nil || ro.Active || !strings.Contains(ro.Message, "progress deadline") {
			return fmt.Errorf("status.rollout %+v", ro)
		}
		return nil
	}))
	ctrltest.Eventually(t, wait, rolloutEvent(ns, corev1.EventTypeWarning, omniav1.EventRolloutRolledBack))
	ctrltest.Eventually(t, wait, func() error {
		if err := roNoCandidate(ns); err != nil {
			return err
		}
		return nil
	})
}
