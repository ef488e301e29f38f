// Package leader runs the agent controller under leader election on a
// coordination.k8s.io/v1 Lease. The holder renews every RetryPeriod; a
// standby takes over a Lease unrenewed for LeaseDuration as judged on its
// own clock (from when it saw the Lease last change, so clock skew between
// replicas cannot cause an early takeover); every write carries the Lease's
// resourceVersion, so two standbys cannot both win and a leader's renew
// fails once anyone else has written the Lease.
//
// A leader steps down at its first failed renew: refused by the API server,
// lost to another holder's write, or not done within RenewDeadline of the
// previous renew. It first reports itself a standby (State, the
// controller_is_leader metric), then cancels its reconcile loop and waits
// for it to return, and only then contends again. client-go's
// leaderelection is not used because it keeps retrying a failed renew until
// RenewDeadline while the loop goes on reconciling, and reports the step
// down only after cancelling the loop.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

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
	// Client reads and writes the Lease.
	Client kubernetes.Interface
	// Namespace and Name name the Lease; Identity is this replica's name
	// in it (the pod's).
	Namespace, Name, Identity string
	// LeaseDuration is how long a standby waits, from when it saw the
	// Lease last change, before it takes over an unrenewed Lease.
	LeaseDuration time.Duration
	// RenewDeadline is the longest a leader goes without a successful
	// renew: a renew still pending then has failed.
	RenewDeadline time.Duration
	// RetryPeriod is how often the leader renews and a standby contends.
	RetryPeriod time.Duration
	// Log receives leadership changes and failed renews.
	Log *slog.Logger
	// OnLeading runs while this replica leads; its context ends when the
	// lease is lost, after State and the metric already say so. When it
	// returns on its own, the Lease is released.
	OnLeading func(ctx context.Context)
	// State and Metrics (controller_is_leader) report whether this
	// replica leads.
	State   *State
	Metrics *metrics.Metrics
}

func (cfg Config) check() error {
	if cfg.RetryPeriod <= 0 || cfg.RetryPeriod >= cfg.RenewDeadline || cfg.RenewDeadline >= cfg.LeaseDuration {
		return fmt.Errorf("leader election needs 0 < retry period < renew deadline < lease duration, got %s, %s, %s",
			cfg.RetryPeriod, cfg.RenewDeadline, cfg.LeaseDuration)
	}
	if cfg.Name == "" || cfg.Identity == "" {
		return errors.New("leader election needs a Lease name and an identity")
	}
	return nil
}

// Run contends for the Lease until ctx ends, running OnLeading each time
// this replica wins it. When ctx ends while leading, OnLeading returns
// before the Lease is released, so the next leader never overlaps it.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.check(); err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	e := &elector{cfg: cfg, leases: cfg.Client.CoordinationV1().Leases(cfg.Namespace)}
	for ctx.Err() == nil {
		if e.tryAcquire(ctx) {
			e.lead(ctx)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait.Jitter(cfg.RetryPeriod, 0.2)):
		}
	}
	return nil
}

// RunWithoutElection runs OnLeading once, as the only replica there is
// (--leader-elect=false): no Lease is read or written, and State and
// controller_is_leader report this replica leading while OnLeading runs,
// as they do for an elected leader.
func RunWithoutElection(ctx context.Context, cfg Config) {
	cfg.State.SetLeader(true)
	cfg.Metrics.IsLeader.Set(1)
	defer func() {
		cfg.State.SetLeader(false)
		cfg.Metrics.IsLeader.Set(0)
	}()
	cfg.OnLeading(ctx)
}

// elector is one replica's view of the Lease.
type elector struct {
	cfg    Config
	leases coordinationv1client.LeaseInterface
	// lease is the Lease as this replica last read or wrote it; its
	// resourceVersion guards the next write.
	lease *coordinationv1.Lease
	// observedRV and observedAt are the Lease version last seen and when,
	// on this replica's clock: a standby times the holder's lease from it.
	observedRV string
	observedAt time.Time
	// renewed is when the last successful write of this replica's own
	// lease was sent.
	renewed time.Time
	// holder is the holder last seen, for the standby's log.
	holder string
}

// tryAcquire reads the Lease and takes it when it is free, expired or
// already this replica's. It reports whether this replica now holds it.
func (e *elector) tryAcquire(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	now := time.Now()
	lease, err := e.leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		fresh := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name}, Spec: e.spec(now, now, 0)}
		created, err := e.leases.Create(ctx, fresh, metav1.CreateOptions{})
		if err != nil {
			e.cfg.Log.Debug("creating the Lease failed", "lease", e.key(), "err", err)
			return false
		}
		e.hold(created, now)
		return true
	case err != nil:
		if ctx.Err() == nil {
			e.cfg.Log.Warn("reading the Lease failed", "lease", e.key(), "err", err)
		}
		return false
	}
	if lease.ResourceVersion != e.observedRV {
		e.observedRV, e.observedAt = lease.ResourceVersion, now
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder != e.holder {
		e.holder = holder
		if holder != "" && holder != e.cfg.Identity {
			e.cfg.Log.Info("standing by", "leader", holder)
		}
	}
	duration := time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 0)) * time.Second
	if holder != "" && holder != e.cfg.Identity && now.Before(e.observedAt.Add(duration)) {
		return false
	}
	acquired, transitions := now, ptr.Deref(lease.Spec.LeaseTransitions, 0)
	if holder == e.cfg.Identity && lease.Spec.AcquireTime != nil {
		acquired = lease.Spec.AcquireTime.Time
	} else {
		transitions++
	}
	next := lease.DeepCopy()
	next.Spec = e.spec(acquired, now, transitions)
	updated, err := e.leases.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		// A conflict is another standby winning the same race.
		e.cfg.Log.Debug("taking the Lease failed", "lease", e.key(), "err", err)
		return false
	}
	e.hold(updated, now)
	return true
}

// renew writes a fresh renewTime over the Lease as this replica last wrote
// it. Its resourceVersion makes any write by someone else in between fail
// the renew with a conflict.
func (e *elector) renew(ctx context.Context) error {
	now := time.Now()
	next := e.lease.DeepCopy()
	next.Spec.RenewTime = &metav1.MicroTime{Time: now}
	updated, err := e.leases.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	e.hold(updated, now)
	return nil
}

// release gives the Lease up, so a standby takes over without waiting for
// it to expire.
func (e *elector) release(ctx context.Context) {
	// Releasing happens as the replica stops, often because ctx ended: the
	// write gets its own deadline, not ctx's cancellation.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewDeadline)
	defer cancel()
	now := time.Now()
	next := e.lease.DeepCopy()
	next.Spec.HolderIdentity = ptr.To("")
	next.Spec.LeaseDurationSeconds = ptr.To[int32](1)
	next.Spec.AcquireTime = &metav1.MicroTime{Time: now}
	next.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if _, err := e.leases.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		e.cfg.Log.Warn("releasing the Lease failed; a standby takes over when it expires", "lease", e.key(), "err", err)
	}
}

func (e *elector) hold(lease *coordinationv1.Lease, sent time.Time) {
	e.lease, e.renewed = lease, sent
	e.observedRV, e.observedAt, e.holder = lease.ResourceVersion, sent, e.cfg.Identity
}

func (e *elector) spec(acquired, renewed time.Time, transitions int32) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(e.cfg.Identity),
		LeaseDurationSeconds: ptr.To(max(int32(e.cfg.LeaseDuration/time.Second), 1)),
		AcquireTime:          &metav1.MicroTime{Time: acquired},
		RenewTime:            &metav1.MicroTime{Time: renewed},
		LeaseTransitions:     ptr.To(transitions),
	}
}

func (e *elector) key() string { return e.cfg.Namespace + "/" + e.cfg.Name }

// lead runs OnLeading while this replica holds the Lease, and returns once
// it has stepped down and OnLeading has returned.
func (e *elector) lead(ctx context.Context) {
	cfg := e.cfg
	loopCtx, stop := context.WithCancel(ctx)
	defer stop()
	cfg.Log.Info("became leader", "lease", e.key(), "identity", cfg.Identity)
	cfg.State.SetLeader(true)
	cfg.Metrics.IsLeader.Set(1)
	var loop sync.WaitGroup
	// Added before the goroutine starts, so Wait below always waits for it.
	loop.Add(1)
	go func() {
		defer loop.Done()
		defer stop()
		cfg.OnLeading(loopCtx)
	}()
	err := e.keep(loopCtx)
	// Step down before the loop is told to stop: from here this replica
	// does not count itself leader, whatever the loop still drains.
	cfg.State.SetLeader(false)
	cfg.Metrics.IsLeader.Set(0)
	stop()
	loop.Wait()
	switch {
	case err != nil:
		// Not released: the Lease may be someone else's now.
		cfg.Log.Warn("lost the Lease; stopped reconciling and standing by", "lease", e.key(), "err", err)
	case ctx.Err() == nil:
		e.release(ctx)
		cfg.Log.Warn("the reconcile loop ended while leading; released the Lease", "lease", e.key())
	default:
		e.release(ctx)
		cfg.Log.Info("stopped leading", "identity", cfg.Identity)
	}
}

// keep renews the Lease every RetryPeriod until ctx ends (nil) or a renew
// fails (its error): the first failure ends leading, with no retry.
func (e *elector) keep(ctx context.Context) error {
	tick := time.NewTicker(e.cfg.RetryPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		rctx, cancel := context.WithDeadline(ctx, e.renewed.Add(e.cfg.RenewDeadline))
		err := e.renew(rctx)
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			// Ended while renewing: a shutdown, not a lost Lease.
			return nil
		default:
			return fmt.Errorf("renew: %w", err)
		}
	}
}
