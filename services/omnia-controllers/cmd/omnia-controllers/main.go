// Command omnia-controllers runs the AgentRuntime, PromptPack, ToolRegistry,
// Provider, Workspace, SkillSource, ToolPolicy, SandboxClass, Connection,
// MemoryPolicy, SessionRetentionPolicy and ScheduledFunction controllers in one controller-runtime manager, with leader election on a Lease, Prometheus metrics, health and
// readiness endpoints, JSON logs and a graceful shutdown on SIGTERM.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	// Profiles for the benchmarks; empty outside -tags benchprofile builds.
	_ "github.com/agentplane/agentplane/libs/benchprofile"
	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/activator"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentruntime"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/connection"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/memorypolicy"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/metrics"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/promptpack"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/provider"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/sandboxclass"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/scheduledfunction"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/sessionretention"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/skillsource"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/toolpolicy"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/toolregistry"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/workspace"
)

// gcPercent is the collector's target unless GOGC is set: the live heap
// is small (about 14 MB with 1,000 PromptPacks cached) and grows with the
// objects cached, not with traffic, so collecting at 25 % growth instead
// of Go's 100 % keeps the peak resident set 10-12 MiB lower for no CPU
// the benchmark can tell from its noise (docs/benchmarks.md).
const gcPercent = 25

func main() {
	fs, cfg := newFlagSet(os.Getenv)
	fs.ParseOrExit(os.Args[1:])
	log, err := service.NewLogger(name, cfg.LogLevel, os.Stderr)
	if err != nil {
		// The flag check has refused a bad level already.
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	service.LimitMemory(log)
	service.DefaultGCPercent(gcPercent)
	restCfg, err := service.RESTConfig(name, cfg.Kube)
	if err != nil {
		log.Error("load kubeconfig", "err", err.Error())
		os.Exit(1)
	}
	if err := runUntilSignal(cfg, restCfg); err != nil {
		log.Error("exiting", "err", err.Error())
		os.Exit(1)
	}
}

// runUntilSignal calls run with a context that ends at SIGTERM or SIGINT,
// and releases the signal handler before it returns, so main's os.Exit
// skips no deferred call.
func runUntilSignal(cfg *config, restCfg *rest.Config) error {
	ctx, stop := service.SignalContext()
	defer stop()
	return run(ctx, cfg, restCfg)
}

// run builds the manager and blocks until ctx ends (SIGTERM), then lets
// running reconciles finish within the shutdown timeout and releases the
// Lease so a standby takes over at once. /metrics, /healthz and /readyz are
// served by the skeleton's HTTP server, like every agentplane binary's, from
// controller-runtime's registry, with the omnia metrics of the metrics
// package; the manager serves nothing itself.
func run(ctx context.Context, cfg *config, restCfg *rest.Config) error {
	log := slog.Default()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, omniav1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fmt.Errorf("build scheme: %w", err)
		}
	}
	le := cfg.LeaderElection
	lock, err := leaseLock(cfg, restCfg)
	if err != nil {
		return err
	}
	timeout := cfg.ShutdownTimeout
	opts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          le.Enabled,
		LeaderElectionID:        le.ID,
		LeaderElectionNamespace: cfg.LeaseNamespace(),
		// The manager still takes the timings below with its own lock.
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       &le.LeaseDuration,
		RenewDeadline:                       &le.RenewDeadline,
		RetryPeriod:                         &le.RetryPeriod,
		LeaderElectionReleaseOnCancel:       true,
		GracefulShutdownTimeout:             &timeout,
		// Controller names are unique per process; tests start the manager
		// more than once in one process.
		Controller: ctrlconfig.Controller{SkipNameValidation: &cfg.repeatedInProcess},
	}
	kubeutil.ApplyCacheOptions(&opts)
	mgr, err := ctrl.NewManager(restCfg, opts)
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := index.Setup(ctx, mgr); err != nil {
		return err
	}
	validator, err := promptpack.NewSchemaValidator()
	if err != nil {
		return err
	}
	setups := []struct {
		name  string
		setup func() error
	}{
		{promptpack.ControllerName, func() error {
			return (&promptpack.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("promptpack-controller"), Validator: validator}).SetupWithManager(mgr, nil)
		}},
		{skillsource.ControllerName, func() error {
			return (&skillsource.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, nil)
		}},
		{toolregistry.ControllerName, func() error {
			return (&toolregistry.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, nil)
		}},
		// What the ToolRegistry's PolicyBound, SandboxesValid and
		// SandboxConnectionsValid conditions are judged against.
		{toolpolicy.ControllerName, func() error {
			return (&toolpolicy.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("toolpolicy-controller")}).SetupWithManager(mgr, nil)
		}},
		{sandboxclass.ControllerName, func() error {
			return (&sandboxclass.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("sandboxclass-controller")}).SetupWithManager(mgr, nil)
		}},
		{connection.ControllerName, func() error {
			return (&connection.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("connection-controller")}).SetupWithManager(mgr, nil)
		}},
		// The policies of an agent's memory and session records, and the
		// schedules that call function agents.
		{memorypolicy.ControllerName, func() error {
			return (&memorypolicy.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("memorypolicy-controller")}).SetupWithManager(mgr, nil)
		}},
		{sessionretention.ControllerName, func() error {
			return (&sessionretention.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("sessionretentionpolicy-controller")}).SetupWithManager(mgr, nil)
		}},
		{scheduledfunction.ControllerName, func() error {
			return (&scheduledfunction.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Invoker: &scheduledfunction.HTTPInvoker{},
				Recorder: mgr.GetEventRecorder("scheduledfunction-controller")}).SetupWithManager(mgr, nil)
		}},
		{workspace.ControllerName, func() error {
			return (&workspace.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("workspace-controller")}).SetupWithManager(mgr, nil)
		}},
		{provider.ControllerName, func() error {
			return (&provider.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("provider-controller"), ProbeCredentials: cfg.ProbeCredentials, ProbeOverHTTP: cfg.ProbeOverHTTP}).SetupWithManager(mgr, nil)
		}},
		{agentruntime.ControllerName, func() error {
			r := &agentruntime.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("agentruntime-controller"),
				Config: agentruntime.Config{RuntimeImage: cfg.RuntimeImage, RuntimeCommand: cfg.RuntimeCommand, ImagePullPolicy: cfg.RuntimePullPolicy,
					PrometheusURL: cfg.PrometheusURL,
					FacadeImage:   cfg.FacadeImage, FacadeCommand: cfg.FacadeCommand,
					ActivatorAddress: cfg.ActivatorAddress, ActivatorPort: int32(cfg.ActivatorPort)}} //nolint:gosec // validate bounds the port
			if cfg.PrometheusURL != "" {
				q, err := agentruntime.NewPrometheusQuerier(cfg.PrometheusURL)
				if err != nil {
					return err
				}
				r.Metrics = q
			}
			return r.SetupWithManager(mgr, nil)
		}},
	}
	for _, s := range setups {
		if err := s.setup(); err != nil {
			return fmt.Errorf("set up %s controller: %w", s.name, err)
		}
	}
	if cfg.ActivatorAddress != "" {
		// Every replica serves: the Runnable needs no lead.
		if err := mgr.Add(&activator.Server{Addr: net.JoinHostPort("", strconv.Itoa(cfg.ActivatorPort)), ShutdownTimeout: timeout,
			Handler: &activator.Handler{Backend: &activator.Kube{Client: mgr.GetClient()}, Timeout: cfg.ActivatorTimeout,
				ClusterDomain: cfg.ClusterDomain, Log: ctrl.Log.WithName("activator")}}); err != nil {
			return fmt.Errorf("add the activator: %w", err)
		}
	}
	// Tests run the manager more than once in one process, on the one
	// controller-runtime registry.
	if err := service.RegisterBuildInfo(ctrlmetrics.Registry, name); err != nil && !errors.As(err, &prometheus.AlreadyRegisteredError{}) {
		return fmt.Errorf("register build info: %w", err)
	}
	if err := metrics.Register(ctrlmetrics.Registry); err != nil {
		return err
	}
	srv := service.NewHTTPServer(log, ctrlmetrics.Registry)
	srv.AddReadyCheck("caches", cacheSynced(mgr))
	if err := srv.Start(cfg.Options); err != nil { //nolint:contextcheck // Start has no context parameter; its Background only undoes its own listeners on a failed bind
		return err
	}
	// The scrape endpoints outlive ctx (it has ended by the time this runs)
	// and close within the shutdown timeout, as the manager does.
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	ctrl.Log.Info("starting", "version", service.Version().Version, "pod", cfg.Pod.Name, "leaderElection", le.Enabled,
		"runtimeImage", cfg.RuntimeImage, "metrics", cfg.MetricsBindAddress, "probes", cfg.HealthProbeBindAddress)
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run manager: %w", err)
	}
	ctrl.Log.Info("stopped")
	return nil
}

// leaseLock is the Lease the manager contends for, held under the pod's
// name (--pod-name) like every agentplane controller's, rather than
// controller-runtime's host name and random suffix, so the Lease names the
// pod that leads. Nil without leader election.
func leaseLock(cfg *config, restCfg *rest.Config) (resourcelock.Interface, error) {
	le := cfg.LeaderElection
	if !le.Enabled {
		return nil, nil
	}
	rc := rest.AddUserAgent(rest.CopyConfig(restCfg), "leader-election")
	// A hung request must not outlast the renew deadline and cost the
	// Lease; controller-runtime bounds it the same way.
	rc.Timeout = max(le.RenewDeadline/2, time.Second)
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("leader-election client: %w", err)
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, cfg.LeaseNamespace(), le.ID, kube.CoreV1(), kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: cfg.Pod.Name})
}

// cacheSynced reports ready once the informers have synced, so a rollout
// of the operator waits for a replica that can actually answer.
func cacheSynced(mgr manager.Manager) service.Check {
	w := &syncWatcher{mgr: mgr}
	_ = mgr.Add(w)
	return func() error {
		if !w.synced.Load() {
			return errors.New("informer caches not synced yet")
		}
		return nil
	}
}

// syncWatcher records when the caches have synced. It runs on every
// replica, leader or not, so a standby reports ready too.
type syncWatcher struct {
	mgr    manager.Manager
	synced atomic.Bool
}

// Start waits for the caches, then for the end of ctx.
func (w *syncWatcher) Start(ctx context.Context) error {
	if w.mgr.GetCache().WaitForCacheSync(ctx) {
		w.synced.Store(true)
	}
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: readiness is not leadership.
func (w *syncWatcher) NeedLeaderElection() bool { return false }
