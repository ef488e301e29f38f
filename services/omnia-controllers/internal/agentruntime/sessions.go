package agentruntime

import (
	"context"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"math"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Each pod's facade reports its own sessions in one entry of
// status.facadeReports, by server-side apply with a field manager of its
// own (FacadeFieldManager), so replicas never overwrite each other's
// counts (docs/omnia-controllers.md, "Session activity"). The controller
// folds the entries into status.activeSessions and
// status.lastActivityTime, which the idle rules read, and drops the
// entries of pods that are gone: a pod that crashed or was deleted with
// sessions open can send no last report of zero.

// FacadeFieldManagerPrefix starts the field manager of a facade's report;
// the pod name follows (FacadeFieldManager).
const FacadeFieldManagerPrefix = "omnia-facade/"

// FacadeFieldManager is the field manager a facade's report is applied
// with: one per pod, so each owns its entry of status.facadeReports.
func FacadeFieldManager(pod string) string { return FacadeFieldManagerPrefix + pod }

// foldReports folds the facades' per-pod reports into st, given the
// names of the agent's pods that exist (terminating ones included: they
// may still be draining sessions):
//   - the entry of a pod that no longer exists is removed and its
//     sessions do not count;
//   - activeSessions is the sum of the remaining entries' sessions (set
//     once any entry was seen, left unset before);
//   - lastActivityTime never moves back: it is the latest of its stored
//     value and every entry's time, a removed entry's included (its
//     sessions ended no earlier than that);
//   - no time counts later than now, the pass time: a report dated in the
//     future (a wrong clock, or a token that writes a far-off time to
//     keep its agent up) counts as activity now, so it holds the agent
//     for one idleTimeout, never longer.
//
// It does no I/O.
func foldReports(st *omniav1.AgentRuntimeStatus, pods map[string]bool, now metav1.Time) {
	if len(st.FacadeReports) == 0 && st.ActiveSessions == nil {
		return
	}
	notAfterNow := func(t *metav1.Time) *metav1.Time {
		if t != nil && t.After(now.Time) {
			return now.DeepCopy()
		}
		return t
	}
	last := notAfterNow(st.LastActivityTime)
	var kept []omniav1.FacadeReport
	var sum int64
	for _, r := range st.FacadeReports {
		if t := notAfterNow(r.LastActivityTime); t != nil && (last == nil || t.After(last.Time)) {
			last = t.DeepCopy()
		}
		if !pods[r.Pod] {
			continue
		}
		kept = append(kept, r)
		sum += int64(max(r.ActiveSessions, 0))
	}
	st.FacadeReports = kept
	st.ActiveSessions = ptr(int32(min(sum, math.MaxInt32)))
	st.LastActivityTime = last
}

// sessionReports applies foldReports to the status this pass writes.
func (d *decider) sessionReports() {
	foldReports(d.st, d.s.pods, d.s.now)
}

// agentPods reads the names of the agent's pods, stable and candidate,
// from the one cache of agent pods (kubeutil.ApplyCacheOptions holds only
// agent pods), which the activator reads for their readiness too: a
// metadata-only watch of the same pods would be a second informer.
func (r *Reconciler) agentPods(ctx context.Context, a *omniav1.AgentRuntime) (map[string]bool, error) {
	var l corev1.PodList
	if err := r.Client.List(ctx, &l, client.InNamespace(a.Namespace), client.MatchingLabels(objectLabels(a.Name))); err != nil {
		return nil, fmt.Errorf("list pods of AgentRuntime %s/%s: %w", a.Namespace, a.Name, err)
	}
	out := make(map[string]bool, len(l.Items))
	for i := range l.Items {
		out[l.Items[i].Name] = true
	}
	return out, nil
}
