package agentruntime

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// laggingCache makes the reconciler's reads of an AgentRuntime lag its
// own writes, as an informer does whose watch has not yet delivered them:
// the first read after each write the reconciler makes to the agent
// returns the agent as it was before that write. It also records every
// write the reconciler makes to a Deployment.
type laggingCache struct {
	mu sync.Mutex
	// last is the agent as each read last returned it; stale is the copy
	// the next read returns instead of the cache's.
	last, stale map[types.NamespacedName]*omniav1.AgentRuntime
	// ns is the test's namespace: the manager sees other tests' too, and
	// those pass through.
	ns string
	// lagging is set while the agent's last read was a stale copy;
	// actedOnStale lists the writes made then, before the next read.
	lagging      bool
	actedOnStale []string
	deploymentLog
}

// deploymentLog records every Deployment write the reconciler makes.
type deploymentLog struct {
	wmu    sync.Mutex
	writes []deploymentWrite
}

// record adds a Deployment write that succeeded; other writes are not
// recorded.
func (l *deploymentLog) record(verb string, obj client.Object, err error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || err != nil {
		return
	}
	w := deploymentWrite{verb: verb, name: d.Name, replicas: roReplicas(d)}
	if verb != "delete" {
		w.version = roEnv(d, "OMNIA_PROMPTPACK_VERSION")
	}
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.writes = append(l.writes, w)
}

// list is the writes so far, in order.
func (l *deploymentLog) list() []deploymentWrite {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return append([]deploymentWrite(nil), l.writes...)
}

// deploymentWrite is one Deployment write: its verb, the Deployment, and
// the replicas and pack version it asked for.
type deploymentWrite struct {
	verb, name, version string
	replicas            int32
}

func (w deploymentWrite) String() string {
	return fmt.Sprintf("%s %s replicas=%d version=%s", w.verb, w.name, w.replicas, w.version)
}

func newLaggingCache(ns string) *laggingCache {
	return &laggingCache{ns: ns, last: map[types.NamespacedName]*omniav1.AgentRuntime{}, stale: map[types.NamespacedName]*omniav1.AgentRuntime{}}
}

func (l *laggingCache) funcs() interceptor.Funcs {
	return withWriteHooks(interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			a, ok := obj.(*omniav1.AgentRuntime)
			if !ok || key.Namespace != l.ns {
				return cl.Get(ctx, key, obj, opts...)
			}
			l.mu.Lock()
			defer l.mu.Unlock()
			if old := l.stale[key]; old != nil {
				delete(l.stale, key)
				old.DeepCopyInto(a)
				l.lagging = true
				return nil
			}
			if err := cl.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			l.last[key] = a.DeepCopy()
			l.lagging = false
			return nil
		},
	}, nil, l.wrote)
}

// wrote records a write: one made while the agent read was stale, a
// Deployment's in the log, and for the agent, when the write succeeded,
// the copy the next read returns.
func (l *laggingCache) wrote(verb string, obj client.Object, err error) {
	if obj.GetNamespace() != l.ns {
		return
	}
	l.record(verb, obj, err)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lagging {
		l.actedOnStale = append(l.actedOnStale, fmt.Sprintf("%s %T %s (err %v)", verb, obj, obj.GetName(), err))
	}
	a, ok := obj.(*omniav1.AgentRuntime)
	if !ok || err != nil {
		return
	}
	key := client.ObjectKeyFromObject(a)
	if prev := l.last[key]; prev != nil {
		l.stale[key] = prev
	}
}

// TestRolloutActsOnlyOnWhatItLastWrote: a pass that reads the agent from a
// cache which has not yet seen the controller's last write to it waits
// for the cache instead of acting on the older agent. Acting on it
// undoes the rollout's progress: a step already taken is taken again
// (the candidate scaled back up after the promotion scaled it down, a
// Deployment recreated after it was removed), and each such write makes
// the ReplicaSets replace pods.
func TestRolloutActsOnlyOnWhatItLastWrote(t *testing.T) {
	ns := env.Namespace(t)
	lag := newLaggingCache(ns)
	clock := &rolloutClock{}
	startStack(t, func(_ ctrl.Manager, r *Reconciler) reconcile.Reconciler {
		r.Client = ctrltest.Intercept(r.Client, lag.funcs())
		r.Now = clock.Now
		return nil
	})
	rolloutAgent(t, ns, func(a *omniav1.AgentRuntime) {
		a.Spec.Runtime.Replicas = ptr(int32(4))
		a.Spec.Rollout = &omniav1.RolloutConfig{
			Steps: []omniav1.RolloutStep{
				{SetWeight: ptr(int32(25))},
				{Pause: &omniav1.RolloutPause{Duration: &metav1.Duration{Duration: time.Hour}}},
				{SetWeight: ptr(int32(50))},
				{Pause: &omniav1.RolloutPause{Duration: &metav1.Duration{Duration: time.Hour}}},
				{SetWeight: ptr(int32(100))},
			},
			TrafficRouting: &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingReplicaWeighted},
		}
	})
	roStableOnly(t, ns)

	roSetCandidate(t, ns, roToV110())
	// Each weight is followed by a pause, which starts at the clock's time
	// when the controller takes it: the clock moves only once the status
	// shows the pause, or the pause would start at the moved time and hold.
	for _, want := range []struct {
		stable, candidate, pause int32
	}{{3, 1, 1}, {2, 2, 3}} {
		ctrltest.Eventually(t, wait, func() error {
			if err := roReadyAll(ns); err != nil {
				return err
			}
			if err := roReplicasAre(ns, want.stable, want.candidate)(); err != nil {
				return err
			}
			return rolloutIs(ns, func(a *omniav1.AgentRuntime) error { return roAtStep(a, want.pause, "paused") })()
		})
		clock.advance(time.Hour)
		roPoke(t, ns)
	}
	ctrltest.Eventually(t, 2*wait, roPromoted(ns, func(*omniav1.AgentRuntime) error { return roNoCandidate(ns) }))
	// Late passes would still act on a stale read.
	ctrltest.Consistently(t, 2*time.Second, func() error { return roReadyAll(ns) })

	lag.mu.Lock()
	acted := lag.actedOnStale
	lag.mu.Unlock()
	if len(acted) > 0 {
		t.Errorf("%d writes were made by passes that read the agent as it was before their controller's last write: %v", len(acted), acted)
	}
	writes := lag.list()
	t.Logf("Deployment writes: %v", writes)
	if err := rolloutWritesForward(writes); err != nil {
		t.Errorf("%v; the writes: %v", err, writes)
	}
	var ps corev1.PodList
	if err := env.Client.List(context.Background(), &ps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pods remain", len(ps.Items))
}

// rolloutWritesForward checks that a rollout's Deployment writes only
// ever moved it forward: the candidate's replicas never went down before
// its removal nor was it written again after; the stable Deployment never
// went back to the version it was promoted from, nor back up to more
// replicas before the promotion.
func rolloutWritesForward(writes []deploymentWrite) error {
	var candReplicas, stableReplicas int32 = -1, -1
	candRemoved, promoted := false, false
	for i, w := range writes {
		switch w.name {
		case "agent" + CandidateSuffix:
			switch {
			case candRemoved:
				return fmt.Errorf("write %d (%v) comes after the candidate's removal", i, w)
			case w.verb == "delete":
				candRemoved = true
			case w.replicas < candReplicas:
				return fmt.Errorf("write %d (%v) scales the candidate down from %d before its removal", i, w, candReplicas)
			default:
				candReplicas = w.replicas
			}
		case "agent":
			switch {
			case w.version == "1.1.0":
				promoted = true
			case promoted:
				return fmt.Errorf("write %d (%v) takes the stable Deployment back to the version it was promoted from", i, w)
			case stableReplicas >= 0 && w.replicas > stableReplicas:
				return fmt.Errorf("write %d (%v) scales the stable Deployment back up from %d during the rollout", i, w, stableReplicas)
			}
			if w.version != "1.1.0" {
				stableReplicas = w.replicas
			}
		}
	}
	if !candRemoved || !promoted {
		return fmt.Errorf("the rollout did not end: candidate removed %v, stable promoted %v", candRemoved, promoted)
	}
	return nil
}
