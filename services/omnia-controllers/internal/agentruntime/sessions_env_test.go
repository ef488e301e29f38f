package agentruntime

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// applyReport applies one pod's entry of status.facadeReports as its
// facade does (tools/mockagent activity.go): a server-side apply of the
// status subresource holding only that entry, forced, with the pod's own
// field manager.
func applyReport(c client.Client, ns, agent, pod string, sessions int32, at time.Time) error {
	body := fmt.Sprintf(`{"apiVersion":%q,"kind":"AgentRuntime","metadata":{"name":%q,"namespace":%q},`+
		`"status":{"facadeReports":[{"pod":%q,"activeSessions":%d,"lastActivityTime":%q}]}}`,
		omniav1.GroupVersion.String(), agent, ns, pod, sessions, at.UTC().Format(time.RFC3339))
	a := &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agent}}
	return c.Status().Patch(context.Background(), a, client.RawPatch(types.ApplyPatchType, []byte(body)),
		client.FieldOwner(FacadeFieldManager(pod)), client.ForceOwnership)
}

// livePods are the names of the agent's pods not being deleted, sorted.
func livePods(t *testing.T, ns, agent string) []string {
	t.Helper()
	var out []string
	for _, p := range pods(t, ns, agent) {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// livePod waits for a pod of the agent and returns the first name.
func livePod(t *testing.T, ns, agent string) string {
	t.Helper()
	var names []string
	ctrltest.Eventually(t, wait, func() error {
		if names = livePods(t, ns, agent); len(names) == 0 {
			return fmt.Errorf("no pod of %s yet", agent)
		}
		return nil
	})
	return names[0]
}

// agentPods waits until the agent has n pods not being deleted and
// returns their names.
func agentPods(t *testing.T, ns, agent string, n int) []string {
	t.Helper()
	var names []string
	ctrltest.Eventually(t, wait, func() error {
		if names = livePods(t, ns, agent); len(names) != n {
			return fmt.Errorf("pods %v; want %d", names, n)
		}
		return nil
	})
	return names
}

// reportsAre is a condition for ctrltest.Eventually: the agent's status
// holds the entries of exactly these pods, and activeSessions is sum.
func reportsAre(ns, name string, sum int32, pods ...string) func() error {
	return func() error {
		a, err := getAgent(ns, name)
		if err != nil {
			return err
		}
		var got []string
		for _, r := range a.Status.FacadeReports {
			got = append(got, r.Pod)
		}
		slices.Sort(got)
		slices.Sort(pods)
		if !slices.Equal(got, pods) || a.Status.ActiveSessions == nil || *a.Status.ActiveSessions != sum {
			return fmt.Errorf("reports of %v with activeSessions %v; want %v with %d", got, deref(a.Status.ActiveSessions), pods, sum)
		}
		return nil
	}
}

// TestSessionsOfEveryPodCount: with two pods, each facade reports its
// own sessions and neither report overwrites the other's; the agent stays
// up while either holds a session, and is reaped only once both are idle
// past the deadline or the busy pod is gone.
func TestSessionsOfEveryPodCount(t *testing.T) {
	ns, clock, res := startIdle(t, func(a *omniav1.AgentRuntime) {
		a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(2))}
	})
	ps := agentPods(t, ns, "agent", 2)
	podA, podB := ps[0], ps[1]
	fc := facadeClient(t, ns, "agent")

	t.Run("a busy pod keeps the agent up whatever the other reports after it", func(t *testing.T) {
		ctrltest.Eventually(t, wait, func() error { return applyReport(fc, ns, "agent", podA, 2, clock.Now()) })
		clock.Set(clock.Now().Add(time.Minute))
		if err := applyReport(fc, ns, "agent", podB, 0, clock.Now()); err != nil {
			t.Fatal(err)
		}
		ctrltest.Eventually(t, wait, reportsAre(ns, "agent", 2, podA, podB))
		clock.Set(clock.Now().Add(24 * time.Hour))
		res.pokeAndWait(t, ns, "agent")
		ctrltest.Eventually(t, wait, idleIs(ns, "agent", metav1.ConditionFalse, omniav1.ReasonActive))
		ctrltest.Holds(t, replicasAre(ns, "agent", 2), reportsAre(ns, "agent", 2, podA, podB), res.requeueIs(ns, "agent", 0))
	})
	t.Run("both pods idle past the deadline, the agent is reaped", func(t *testing.T) {
		if err := applyReport(fc, ns, "agent", podA, 0, clock.Now()); err != nil {
			t.Fatal(err)
		}
		ctrltest.Eventually(t, wait, reportsAre(ns, "agent", 0, podA, podB))
		reapedAtDeadline(t, ns, clock, res, 2)
	})
	t.Run("the entries of pods that are gone are removed", func(t *testing.T) {
		ctrltest.Eventually(t, wait, func() error {
			if names := livePods(t, ns, "agent"); len(names) != 0 {
				return fmt.Errorf("pods %v left", names)
			}
			return nil
		})
		ctrltest.Eventually(t, wait, reportsAre(ns, "agent", 0))
	})
}

// TestSessionsOfADeletedPodDoNotCount: a pod deleted with sessions open
// (it crashed, or was evicted before its last report) keeps the agent up
// no longer: its entry is removed when the pod goes, and the deadline
// counts from its last report.
func TestSessionsOfADeletedPodDoNotCount(t *testing.T) {
	ns, clock, res := startIdle(t, func(a *omniav1.AgentRuntime) {
		a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(2))}
	})
	ps := agentPods(t, ns, "agent", 2)
	busy, idle := ps[0], ps[1]
	ctrltest.Eventually(t, wait, func() error { return applyReport(env.Client, ns, "agent", idle, 0, clock.Now()) })
	clock.Set(clock.Now().Add(time.Minute))
	ctrltest.Eventually(t, wait, func() error { return applyReport(env.Client, ns, "agent", busy, 3, clock.Now()) })
	ctrltest.Eventually(t, wait, reportsAre(ns, "agent", 3, busy, idle))

	// No kubelet runs here: a pod bound to no node is deleted at once.
	if err := env.Client.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: busy}}); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, reportsAre(ns, "agent", 0, idle))
	// The deadline counts from the busy pod's last report, a minute after
	// the idle one's.
	reapedAtDeadline(t, ns, clock, res, 2, res.requeueIs(ns, "agent", time.Minute))
}

// TestAPodGoingBringsAPass: the deletion of an agent pod alone, with no
// other change (a bare pod no ReplicaSet counts, so no Deployment status
// moves), brings the pass that drops its report: an agent whose only
// busy pod is gone is not kept up until some other event.
func TestAPodGoingBringsAPass(t *testing.T) {
	ns, clock, res := startIdle(t, nil)
	ctx := context.Background()
	stable := livePod(t, ns, "agent")
	labels := objectLabels("agent")
	labels[omniav1.LabelTrack] = omniav1.TrackCanary
	bare := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-bare", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "facade", Image: "facade:1"}}},
	}
	ctrltest.Create(t, env, bare)
	ctrltest.Eventually(t, wait, func() error { return applyReport(env.Client, ns, "agent", bare.Name, 2, clock.Now()) })
	ctrltest.Eventually(t, wait, reportsAre(ns, "agent", 2, stable, bare.Name))
	ctrltest.Eventually(t, wait, res.requeueIs(ns, "agent", 0))

	if err := env.Client.Delete(ctx, bare); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, reportsAre(ns, "agent", 0, stable))
	ctrltest.Eventually(t, wait, res.requeueIs(ns, "agent", 10*time.Minute))
}
