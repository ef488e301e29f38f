package containers

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tests/internal/containers"
)

// The suite's AgentRuntime: omniaReplicas replicas of omniaAgent serving
// pack omniaPack, rolled out from version omniaFrom to omniaTo.
const (
	omniaAgent    = "assistant"
	omniaPack     = "tides"
	omniaFrom     = "1.0.0"
	omniaTo       = "1.1.0"
	omniaProvider = "llm"
	// omniaReplicas is four so each setWeight step (25, 50, 100) moves a
	// different number of replicas to the candidate.
	omniaReplicas = 4
	// omniaPromoted is the status.rollout.message the controller leaves
	// when a rollout ended in the candidate's promotion
	// (docs/omnia-controllers.md, the rollout engine).
	omniaPromoted = "promoted"
	// omniaSettle is how long the watcher goes on after a rollout ended,
	// so a late pod or ReplicaSet would still be counted.
	omniaSettle = 5 * time.Second
	// omniaPauseSlack is how late past its end a pause may advance: the
	// engine's one-second requeue, the status's whole seconds and the
	// test's polling.
	omniaPauseSlack = 5 * time.Second
)

// TestOmniaControllersKilledDuringRollout is the omnia-controllers crash
// suite: an AgentRuntime of four replicas (pods on localnode, running
// mockagent's Omnia runtime stand-in) rolls out a new pack version in
// steps — setWeight 25, a pause, setWeight 50, a pause, setWeight 100,
// then the promotion. The same rollout runs twice in namespaces of their
// own: once untouched, to measure what it creates, and once with
// omnia-controllers killed (SIGKILL) inside its last pause and started
// again after an outage still inside the pause, as the kubelet restarts a
// crashed pod under the same name. The restarted controller must resume
// from the step status.rollout records (docs/omnia-controllers.md): the
// step never goes backwards, each step starts once (its stepStartedAt is
// never rewritten, so the pause is not started over and ends on time),
// the restarted process counts only the steps left, the rollout ends
// promoted, and it creates exactly the pods, ReplicaSets and pod
// templates the untouched rollout did: no extra pod replacement.
func TestOmniaControllersKilledDuringRollout(t *testing.T) {
	p := startPlatform(t, platformOptions{replicas: 1, poll: 5 * time.Second})
	omnia := p.startOmnia(t)
	pause := size(20*time.Second, 45*time.Second)
	steps := omniaSteps(pause)
	k := omniaLastPause(steps)
	// The kill comes killAfter into the pause and the restart before the
	// pause ends, so it is the restarted process that ends the pause.
	const killAfter = 2 * time.Second
	outage := size(10*time.Second, 30*time.Second)

	runs := []struct {
		ns   string
		kill *omniaKill
	}{
		{ns: "omnia-baseline"},
		{ns: "omnia-killed", kill: &omniaKill{step: k, after: killAfter, outage: outage}},
	}
	got := make([]*omniaRun, len(runs))
	for i, r := range runs {
		got[i] = p.omniaRollout(t, omnia, r.ns, steps, r.kill)
		if t.Failed() {
			return
		}
	}
	base, killed := got[0], got[1]

	// Counted by the restarted process, whose counters start at zero: only
	// the steps it advanced past the one it found recorded.
	counted := metric(t, omnia, "omnia_rollout_steps_total")
	finished := metric(t, omnia, "omnia_rollouts_finished_total")
	if want := float64(int32(len(steps)) - k); counted != want {
		t.Errorf("the restarted omnia-controllers counted %v rollout steps, want %v (from step %d to the promotion at %d): it did not resume from the recorded step",
			counted, want, k, len(steps))
	}
	if finished != 1 {
		t.Errorf("the restarted omnia-controllers counted %v finished rollouts, want 1 (the killed one, promoted)", finished)
	}

	for _, r := range got {
		r.check(t)
	}
	kr := killed.kill
	if first := killed.firstStepAfter(kr.restartedAt); first < k {
		t.Errorf("the first step seen after the restart is %d, want at least %d, the step recorded at the kill", first, k)
	}
	if starts := killed.starts[k]; len(starts) != 1 || !starts[kr.stepStart.Unix()] {
		t.Errorf("step %d was recorded as started at %v; at the kill it had started at %s: the pause was started over",
			k, omniaTimes(starts), kr.stepStart.UTC().Format(time.RFC3339))
	}
	// The pause ends when it would have without the kill, or as soon as the
	// restarted controller can act if that is later.
	if next := killed.nextStart(k); next.IsZero() {
		t.Errorf("no step after %d was recorded", k)
	} else if latest := laterOf(kr.stepStart.Add(pause), kr.readyAt).Add(omniaPauseSlack); next.After(latest) {
		t.Errorf("the pause of step %d ended at %s, after %s (its end without the kill, or the restarted controller's readiness, plus %s)",
			k, next.UTC().Format(time.RFC3339), latest.UTC().Format(time.RFC3339), omniaPauseSlack)
	}
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"pods", len(killed.pods), len(base.pods)},
		{"ReplicaSets", len(killed.replicaSets), len(base.replicaSets)},
		{"pod templates", killed.templateCount(), base.templateCount()},
	} {
		if c.got != c.want {
			t.Errorf("the killed rollout created %d %s, the untouched one %d: the restart replaced pods", c.got, c.what, c.want)
			t.Logf("pods of the killed rollout:\n%s\npods of the untouched one:\n%s", killed.podList(), base.podList())
		}
	}
	if base.templateCount() != len(base.replicaSets) {
		t.Errorf("the untouched rollout had %d pod templates and %d ReplicaSets, want one ReplicaSet each", base.templateCount(), len(base.replicaSets))
	}
	// Each ReplicaSet starts its replicas once: the stable one of the old
	// version, the candidate, and the stable one of the promoted version.
	// More pods means a Deployment was scaled back up without any fault.
	if want := omniaReplicas * len(base.replicaSets); len(base.pods) != want {
		t.Errorf("the untouched rollout created %d pods for %d ReplicaSets of %d replicas, want %d: pods were replaced without a fault",
			len(base.pods), len(base.replicaSets), omniaReplicas, want)
		t.Logf("pods of the untouched rollout:\n%s", base.podList())
	}

	// The step's recorded start has whole seconds: the kill came up to a
	// second later into it than killAfter says.
	testenv.BenchReport(t, fmt.Sprintf("omnia-controllers killed %s into rollout step %d (a pause of %s; %d replicas, %d steps), down %s, ready again %s after the restart: steps seen %v (untouched %v); the pause of step %d lasted %s (untouched %s); the restarted process counted %v steps; pods created %d, ReplicaSets %d, pod templates %d (untouched %d, %d, %d); rollout took %s (untouched %s)",
		kr.killedAt.Sub(kr.stepStart).Round(100*time.Millisecond), k, pause, omniaReplicas, len(steps), outage, kr.readyAt.Sub(kr.restartedAt).Round(100*time.Millisecond),
		killed.stepsSeen(), base.stepsSeen(), k, killed.stepLength(k), base.stepLength(k), counted,
		len(killed.pods), len(killed.replicaSets), killed.templateCount(), len(base.pods), len(base.replicaSets), base.templateCount(),
		killed.took.Round(100*time.Millisecond), base.took.Round(100*time.Millisecond)))
}

// startOmnia starts omnia-controllers against the control plane, its agent
// pods running mockagent's Omnia runtime stand-in from the mockagent
// image, as the demo does (tools/demo). On localnode's host network the
// stand-in's default address, the loopback, is the pod's. Leader election
// is on under a fixed pod name, so a restarted container takes its own
// Lease back at once.
func (p *platform) startOmnia(t *testing.T) *containers.Container {
	t.Helper()
	c := p.net.Start(containers.Spec{
		Alias: "omnia-controllers", Image: images["omnia-controllers"],
		Cmd: []string{
			"--kubeconfig=/pki/kubeconfig", "--pod-name=omnia-controllers", "--pod-namespace=default", "--leader-elect=true",
			"--metrics-bind-address=:8080", "--health-probe-bind-address=:8081",
			"--runtime-image=" + images["mockagent"], "--runtime-command=/usr/local/bin/mockagent,omnia-runtime",
			"--facade-image=" + images["mockagent"], "--facade-command=/usr/local/bin/mockagent,omnia-facade",
			"--runtime-image-pull-policy=Never",
			// The Provider is a mock: there is no vendor key to probe.
			"--provider-credential-probe=false",
		},
		Files: p.kube.PKIFiles, Ports: []string{"8080/tcp", "8081/tcp"},
	})
	waitOmniaReady(t, c)
	return c
}

// waitOmniaReady waits until omnia-controllers answers /readyz (its
// informer caches have synced), failing the test after two minutes.
func waitOmniaReady(t *testing.T, c *containers.Container) {
	t.Helper()
	addr := c.HostAddr("8081/tcp")
	hc := &http.Client{Timeout: 2 * time.Second}
	omniaWait(t, 2*time.Minute, "omnia-controllers ready", func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
}

// omniaSteps is the suite's rollout: a quarter of the replicas to the
// candidate, a pause, half, a pause, all of them; the promotion follows
// the last step. A setWeight step is done in the pass that takes it, so
// the status records the step after it, and only for an instant the
// setWeight that follows a pause.
func omniaSteps(pause time.Duration) []omniav1.RolloutStep {
	var steps []omniav1.RolloutStep
	for i, w := range []int32{25, 50, 100} {
		if i > 0 {
			steps = append(steps, omniav1.RolloutStep{Pause: &omniav1.RolloutPause{Duration: &metav1.Duration{Duration: pause}}})
		}
		steps = append(steps, omniav1.RolloutStep{SetWeight: &w})
	}
	return steps
}

// omniaLastPause is the index of the last pause step.
func omniaLastPause(steps []omniav1.RolloutStep) int32 {
	k := int32(-1)
	for i, s := range steps {
		if s.Pause != nil {
			k = int32(i)
		}
	}
	return k
}

// omniaKill is when omnia-controllers is killed during a rollout.
type omniaKill struct {
	// step is the pause step the kill waits for.
	step int32
	// after is how long into that step the kill comes; outage how long the
	// container stays down.
	after, outage time.Duration

	// stepStart is status.rollout.stepStartedAt as recorded at the kill.
	stepStart time.Time
	// killedAt, restartedAt and readyAt are when the container was killed,
	// started again, and answered /readyz again.
	killedAt, restartedAt, readyAt time.Time
}

// omniaRun is what one rollout went through, as the test saw it.
type omniaRun struct {
	ns    string
	steps []omniav1.RolloutStep
	*omniaWatch
	// took is from the candidate's write to the rollout found promoted.
	took time.Duration
	// kill is the fault, nil for the untouched rollout.
	kill *omniaKill
}

// omniaRollout creates the AgentRuntime and its inputs in a new namespace
// ns, waits for its replicas to be ready, starts the rollout by setting
// the candidate, kills omnia-controllers in it as kill says (none when
// nil), and waits for the rollout to end promoted. A watcher records
// everything from the namespace's creation to a little after the end.
func (p *platform) omniaRollout(t *testing.T, omnia *containers.Container, ns string, steps []omniav1.RolloutStep, kill *omniaKill) *omniaRun {
	t.Helper()
	p.namespace(t, ns)
	w := p.watchOmnia(t, ns)
	p.createOmnia(t, ns, steps)
	omniaWait(t, 3*time.Minute, ns+"/"+omniaAgent+" running on "+omniaFrom, func(ctx context.Context) error {
		return p.omniaServing(ctx, ns, omniaFrom)
	})

	r := &omniaRun{ns: ns, steps: steps, kill: kill}
	began := time.Now()
	p.setOmniaCandidate(t, ns)
	// Every pause, a promotion's wait for the new pods, and the outage.
	within := 3*time.Minute + time.Duration(len(steps))*omniaStepsPause(steps)
	if kill != nil {
		p.killOmniaInStep(t, omnia, ns, kill, within)
	}
	if kill != nil {
		within += kill.outage
	}
	omniaWait(t, within, ns+"/"+omniaAgent+" rolled out to "+omniaTo, func(ctx context.Context) error {
		return p.omniaPromoted(ctx, ns)
	})
	r.took = time.Since(began)
	time.Sleep(omniaSettle)
	r.omniaWatch = w.stop()
	return r
}

// omniaStepsPause is the longest pause of steps.
func omniaStepsPause(steps []omniav1.RolloutStep) time.Duration {
	var d time.Duration
	for _, s := range steps {
		if s.Pause != nil && s.Pause.Duration != nil {
			d = max(d, s.Pause.Duration.Duration)
		}
	}
	return d
}
