// Command omnia-controllers runs the AgentRuntime, PromptPack, ToolRegistry,
// Provider, Workspace and SkillSource controllers in one controller-runtime
// manager, with leader election on a Lease, Prometheus metrics, health and
// readiness endpoints, JSON logs and a graceful shutdown on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentruntime"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/index"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/promptpack"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/provider"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/skillsource"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/toolregistry"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/workspace"
)

func main() {
	cfg, err := parseConfig(flag.CommandLine, os.Args[1:], envLookup)
	if err != nil {
		fmt.Fprintln(os.Stderr, "omnia-controllers:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	lr := logr.FromSlogHandler(log.Handler())
	ctrl.SetLogger(lr)
	klog.SetLogger(lr)
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error("load kubeconfig", "error", err.Error())
		os.Exit(1)
	}
	if err := run(ctrl.SetupSignalHandler(), cfg, restCfg); err != nil {
		log.Error("exiting", "error", err.Error())
		os.Exit(1)
	}
}

// run builds the manager and blocks until ctx ends (SIGTERM), then lets
// running reconciles finish within the shutdown timeout and releases the
// Lease so a standby takes over at once.
func run(ctx context.Context, cfg config, restCfg *rest.Config) error {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, omniav1.AddToScheme} {
		if err := add(scheme); err != nil {
			return fmt.Errorf("build scheme: %w", err)
		}
	}
	timeout := cfg.ShutdownTimeout
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: cfg.MetricsAddr},
		HealthProbeBindAddress:        cfg.ProbeAddr,
		LeaderElection:                cfg.LeaderElect,
		LeaderElectionID:              cfg.LeaderElectionID,
		LeaderElectionNamespace:       cfg.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &timeout,
		// Controller names are unique per process; tests start the manager
		// more than once in one process.
		Controller: ctrlconfig.Controller{SkipNameValidation: &cfg.repeatedInProcess},
	})
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
		{workspace.ControllerName, func() error {
			return (&workspace.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("workspace-controller")}).SetupWithManager(mgr, nil)
		}},
		{provider.ControllerName, func() error {
			return (&provider.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("provider-controller"), ProbeCredentials: cfg.ProbeCredentials}).SetupWithManager(mgr, nil)
		}},
		{agentruntime.ControllerName, func() error {
			r := &agentruntime.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("agentruntime-controller"),
				Config: agentruntime.Config{RuntimeImage: cfg.RuntimeImage, RuntimeCommand: cfg.RuntimeCommand, ImagePullPolicy: cfg.RuntimePullPolicy}}
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
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("caches", cacheSynced(mgr)); err != nil {
		return fmt.Errorf("add readyz: %w", err)
	}
	ctrl.Log.Info("starting", "leaderElection", cfg.LeaderElect, "runtimeImage", cfg.RuntimeImage)
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("run manager: %w", err)
	}
	ctrl.Log.Info("stopped")
	return nil
}

// cacheSynced reports ready once the informers have synced, so a rollout
// of the operator waits for a replica that can actually answer.
func cacheSynced(mgr manager.Manager) healthz.Checker {
	w := &syncWatcher{mgr: mgr}
	_ = mgr.Add(w)
	return func(_ *http.Request) error {
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
