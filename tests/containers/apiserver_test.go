package containers

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
)

// TestAPIServerRestartedAndEtcdPaused is the control-plane outage suite:
// Agents run (pods on localnode, events to NATS) while kube-apiserver is
// killed and started again, then etcd is frozen (docker pause) and let
// go. Short runs end during the outages, long ones after. Once the API
// answers again, every Agent must follow its Job within two of the
// controller's poll periods (no Agent stuck), every Agent must end
// Succeeded with exactly one Job, and the controller must count the
// watch it had to open again.
func TestAPIServerRestartedAndEtcdPaused(t *testing.T) {
	const poll = 5 * time.Second
	p := startPlatform(t, platformOptions{replicas: 1, poll: poll})
	ns := p.namespace(t, "outage")
	perStation := size(4, 50)
	delay := 250 * time.Millisecond
	outage := size(10*time.Second, 20*time.Second)
	// Short runs end inside the outages, long ones after them.
	short, long := int((outage/2)/delay)+40, int((3*outage)/delay)+40
	p.station(t, ns, "short", short, delay)
	p.station(t, ns, "long", long, delay)
	var names []string
	for i := range perStation {
		p.launch(t, ns, "short", fmt.Sprintf("short-%d", i))
		p.launch(t, ns, "long", fmt.Sprintf("long-%d", i))
		names = append(names, fmt.Sprintf("short-%d", i), fmt.Sprintf("long-%d", i))
	}
	n := len(names)
	p.waitAll(t, ns, n, 5*time.Minute, "running in a pod", func(s *snapshot, a agentsv1alpha1.Agent) bool {
		pods := s.pods[a.Name]
		return a.Status.Phase == agentsv1alpha1.PhaseRunning && len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning
	})

	// The watcher records, from the test's side, when each Agent was first
	// seen terminal and the last Jobs seen; errors while the API is away
	// are expected and skipped.
	seen := map[string]time.Time{}
	jobsSeen := map[string]map[string]bool{}
	var last *snapshot
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			s, err := p.look(t.Context(), ns)
			if err != nil {
				continue
			}
			last = s
			for name, a := range s.agents {
				if a.Status.Phase.IsTerminal() && seen[name].IsZero() {
					seen[name] = s.at
				}
			}
			for name, js := range s.jobs {
				if jobsSeen[name] == nil {
					jobsSeen[name] = map[string]bool{}
				}
				for _, j := range js {
					jobsSeen[name][string(j.UID)] = true
				}
			}
		}
	}()

	reconnectsBefore := metric(t, p.controllers[0], "controller_watch_reconnects_total")
	began := time.Now()
	p.kube.APIServer.Kill()
	time.Sleep(outage)
	p.kube.APIServer.Restart()
	p.kube.WaitReady(t, 2*time.Minute)
	apiBack := time.Since(began)
	p.kube.Etcd.Pause()
	time.Sleep(outage)
	p.kube.Etcd.Unpause()
	p.kube.WaitReady(t, 2*time.Minute)
	recovered := time.Now()

	p.waitAll(t, ns, n, 5*time.Minute, "terminal", func(_ *snapshot, a agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() })
	// One more look so the watcher has seen every end.
	time.Sleep(time.Second)
	close(stop)
	<-done

	var maxLag time.Duration
	endedInOutage, stuck := 0, 0
	for _, name := range names {
		a := last.agents[name]
		if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
			t.Errorf("Agent %s ended %s (%s), want Succeeded", name, a.Status.Phase, a.Status.FailureReason)
		}
		if k := len(jobsSeen[name]); k != 1 {
			t.Errorf("Agent %s had %d Jobs, want 1", name, k)
		}
		js := last.jobs[name]
		if len(js) != 1 {
			continue
		}
		ended := jobEnded(&js[0])
		if ended.IsZero() {
			t.Errorf("Agent %s is terminal while its Job %s still runs", name, js[0].Name)
			continue
		}
		// The Job's condition is written once the API is back; the run's
		// own end is its container's, as the node saw it.
		if finished := runFinished(last.pods[name]); !finished.IsZero() && finished.Before(recovered) {
			endedInOutage++
		}
		// The Job's condition carries whole seconds: allow one.
		from := ended
		if from.Before(recovered) {
			from = recovered
		}
		if seen[name].IsZero() {
			t.Errorf("the test never saw Agent %s terminal", name)
			continue
		}
		lag := seen[name].Sub(from) - time.Second
		maxLag = max(maxLag, lag)
		if lag > 2*poll {
			stuck++
			t.Errorf("Agent %s followed its Job %s after it ended (or after the API came back): stuck longer than two poll periods (%s)", name, lag.Round(100*time.Millisecond), 2*poll)
		}
	}
	if endedInOutage == 0 {
		t.Errorf("no run ended before the API came back: the outages missed the runs")
	}
	reconnects := metric(t, p.controllers[0], "controller_watch_reconnects_total") - reconnectsBefore
	if reconnects < 1 {
		t.Errorf("controller_watch_reconnects_total grew by %v across an apiserver restart, want at least 1", reconnects)
	}
	testenv.BenchReport(t, fmt.Sprintf("apiserver killed for %s (ready again after %s), then etcd paused for %s: %d Agents (%d runs ended during the outages), %d stuck; slowest Agent followed its Job %s after it ended or the API came back (bound: two polls, %s); watch reconnects counted %v",
		outage, apiBack.Round(100*time.Millisecond), outage, n, endedInOutage, stuck, maxLag.Round(100*time.Millisecond), 2*poll, reconnects))
}

// runFinished is when the agent container of a run's pod exited; zero
// when it has not.
func runFinished(pods []corev1.Pod) time.Time {
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == agentsv1alpha1.AgentContainerName && cs.State.Terminated != nil {
				return cs.State.Terminated.FinishedAt.Time
			}
		}
	}
	return time.Time{}
}
