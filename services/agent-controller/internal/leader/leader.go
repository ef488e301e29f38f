// Package leader runs the agent controller under leader election on a
// coordination.k8s.io/v1 Lease, with client-go's leaderelection: the holder
// renews every RetryPeriod, a standby takes over a Lease unrenewed for
// LeaseDuration as judged on its own clock (so clock skew between replicas
// cannot cause an early takeover), and every write carries the Lease's
// resourceVersion, so two standbys cannot both win. A leader that cannot
// renew steps down at once and its reconcile loop is cancelled; it then
// contends again as a standby.
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// Controller is what readiness asks of the running reconcile loop.
type Controller interface {
	Synced() bool
	Healthy() bool
}

// State is this replica's leadership and its controller, for /readyz.
type State struct {
	mu     sync.Mutex
	leader bool
	ctl    Controller
}

// SetLeader records whether this replica leads.
func (s *State) SetLeader(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader = v
}

// Leader reports whether this replica leads.
func (s *State) Leader() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leader
}

// SetController records the running controller (nil when none).
func (s *State) SetController(c Controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctl = c
}

// Ready reports readiness and, when not ready, why. A standby is ready: it
// is healthy and waiting. A leader is ready once its cache has synced and
// while its poll succeeds.
func (s *State) Ready() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.leader {
		return true, ""
	}
	if s.ctl == nil || !s.ctl.Synced() {
		return false, "leader: Agent cache not synced yet"
	}
	if !s.ctl.Healthy() {
		return false, "leader: the Agent poll keeps failing"
	}
	return true, ""
}

// Config configures Run.
type Config struct {
	Client                                    kubernetes.Interface
	Namespace, Name, Identity                 string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Log                                       *slog.Logger
	// OnLeading runs while this replica leads; its context ends when the
	// lease is lost.
	OnLeading func(ctx context.Context)
	State     *State
	Metrics   *metrics.Metrics
}

// Run contends for the Lease until ctx ends, running OnLeading each time
// this replica wins it.
func Run(ctx context.Context, cfg Config) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	for ctx.Err() == nil {
		// client-go starts OnStartedLeading in a goroutine and does not wait
		// for it; wait here, so a stepped-down loop has fully stopped before
		// this replica contends again.
		var leading sync.WaitGroup
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            cfg.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					cfg.Log.Info("became leader", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
					cfg.State.SetLeader(true)
					cfg.Metrics.IsLeader.Set(1)
					leading.Add(1)
					defer leading.Done()
					cfg.OnLeading(ctx)
				},
				OnStoppedLeading: func() {
					cfg.State.SetLeader(false)
					cfg.Metrics.IsLeader.Set(0)
					cfg.Log.Info("stopped leading; standing by", "identity", cfg.Identity)
				},
				OnNewLeader: func(id string) {
					if id != cfg.Identity {
						cfg.Log.Info("standing by", "leader", id)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		// Run returns when leadership is lost or ctx ends; loop to stand by.
		le.Run(ctx)
		leading.Wait()
	}
	return nil
}
