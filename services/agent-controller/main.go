// Command agent-controller drives every Agent (agents.re-cinq.com) from
// creation to a terminal phase through a Kubernetes Job, with a watch + poll
// + cache loop, Station concurrency, history pruning, Prometheus metrics and
// leader election on the agent-controller Lease.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	// Profiles for the benchmarks; empty outside -tags benchprofile builds.
	_ "github.com/agentplane/agentplane/libs/benchprofile"
	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/grpcauth"
	"github.com/agentplane/agentplane/libs/service"
	batchpb "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/config"
	"github.com/agentplane/agentplane/services/agent-controller/internal/controller"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/eventpace"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
	"github.com/agentplane/agentplane/services/agent-controller/internal/leader"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
	"github.com/agentplane/agentplane/services/agent-controller/internal/runpolicy"
)

func main() {
	fs, cfg := config.NewFlagSet(os.Getenv)
	fs.ParseOrExit(os.Args[1:])
	log, err := service.NewLogger(config.Name, cfg.LogLevel, os.Stderr)
	if err != nil {
		// The flag check has refused a bad level already.
		fmt.Fprintf(os.Stderr, "%s: %v\n", config.Name, err)
		os.Exit(2)
	}
	// client-go's REST client metrics hook is process-wide and once-only,
	// so it is set here rather than in run, which tests call many times.
	metrics.EnableRESTClientMetrics()
	service.LimitMemory(log)
	ctx, stop := service.SignalContext()
	err = run(ctx, cfg, log)
	stop()
	if err != nil {
		log.Error("agent-controller stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	rc, err := service.RESTConfig(config.Name, cfg.Kube)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := agentsv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.NewWithWatch(rc, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	// Built-in kinds (Jobs, pods, Events, Secrets, Leases) travel as
	// protobuf, cheaper than JSON to encode and decode on both ends. The
	// controller-runtime client does the same for a built-in kind read as
	// its Go type (the Job informer) and keeps JSON for Agents and the
	// other custom kinds, which the API server serves only as JSON.
	kcfg := rest.CopyConfig(rc)
	kcfg.ContentType = runtime.ContentTypeProtobuf
	kcfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	// Each Agent's transitions become Kubernetes Events, written from a
	// bounded queue (eventpace) on a client of their own held to
	// --event-qps. Recording outlives ctx: once the controller has stopped,
	// the Events still queued get eventpace.FlushFor to go out.
	ecfg := rest.CopyConfig(kcfg)
	ecfg.QPS, ecfg.Burst = float32(cfg.EventQPS), cfg.EventBurst
	eventsClient, err := kubernetes.NewForConfig(ecfg)
	if err != nil {
		return fmt.Errorf("events clientset: %w", err)
	}
	m := metrics.New()
	recorder := eventpace.New(eventsClient.EventsV1(), scheme, config.Name, log,
		func(t string) { m.KubeEventsDropped.WithLabelValues(t).Inc() })
	recordCtx, stopRecording := context.WithCancel(context.WithoutCancel(ctx))
	recording := make(chan struct{})
	go func() { defer close(recording); recorder.Run(recordCtx) }()
	defer func() { stopRecording(); <-recording }()
	opts := controller.Options{
		Namespace: cfg.WatchNamespace, Workers: cfg.Workers, PollInterval: cfg.PollInterval, PageSize: cfg.PageSize, Log: log,
		BatchCleanupBackoff: cfg.BatchCleanupBackoff, RealtimeKeyNamespace: cfg.RealtimeKeyNamespace,
		Recorder: recorder,
		Reconcile: decision.Config{
			MaxOutputBytes: cfg.MaxOutputBytes, RealtimeEnabled: cfg.RealtimeEnabled,
			BatchEnabled: cfg.BatchEnabled, BatchPoll: cfg.BatchPoll, BatchTimeoutUnit: cfg.BatchTimeoutUnit,
			Job: jobbuild.Config{SupervisorImage: cfg.SupervisorImage, SupervisorPath: cfg.SupervisorPath, NATSURL: cfg.NATSURL,
				PodSecurityLevel: cfg.PodSecurityLevel, NATSCredentials: cfg.NATSIssuer != nil, NATSCA: len(cfg.NATSCA) > 0},
		},
	}
	if cfg.RunNetworkPolicy {
		opts.RunNetworkPolicy = &runpolicy.Config{GatewayNamespace: cfg.GatewayNamespace, GatewayPodLabels: cfg.GatewayPodLabels}
	}
	if cfg.NATSIssuer != nil {
		opts.NATS = &controller.NATSCredentials{Issuer: cfg.NATSIssuer, TTL: cfg.NATSCredentialTTL, CA: cfg.NATSCA}
	}
	if cfg.NATSIssuer != nil && cfg.NATSURL != "" {
		// A run's credential may not manage streams, so the stream its
		// events go to is the controller's to create.
		go ensureStream(ctx, cfg, log)
	}
	if cfg.BatchEnabled {
		conn, err := grpc.NewClient(cfg.BatchPollerAddress, batchPollerDialOptions(cfg, kube, log)...)
		if err != nil {
			return fmt.Errorf("batch-poller client for %s: %w", cfg.BatchPollerAddress, err)
		}
		defer func() { _ = conn.Close() }()
		opts.Batch = batchpb.NewBatchServiceClient(conn)
	}
	if cfg.BatchEnabled && cfg.NATSURL != "" {
		// Batch runs have no supervisor: the controller publishes their
		// events and hears batch-poller's completion notices.
		// Checked at startup (config): the file was readable then.
		key, err := cfg.NATS.MsgIDKey()
		if err != nil {
			return fmt.Errorf("nats credential: %w", err)
		}
		pub, err := events.NewPublisher(events.PublisherOptions{URL: cfg.NATSURL, Name: "agent-controller " + cfg.Pod.Name, Logger: log,
			ConnectOptions: cfg.NATS.Options(), MsgIDKey: key})
		if err != nil {
			log.Warn("no NATS for batch runs: no stream events, no completion notices", "err", err)
		} else {
			defer func() {
				// ctx has ended by now: closing gets its own deadline.
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
				defer cancel()
				_ = pub.Close(sctx)
			}()
			opts.Events = pub
		}
	}
	if err := service.RegisterBuildInfo(m.Registry, config.Name); err != nil {
		return err
	}
	state := &leader.State{}
	srv := service.NewHTTPServer(log, m.Gatherer())
	// A standby is ready; a leader once its cache has synced and while its
	// poll works. Liveness has no check: an unreachable API server is not
	// cured by a restart.
	srv.AddReadyCheck("leader", func() error {
		if ok, why := state.Ready(); !ok {
			return errors.New(why)
		}
		return nil
	})
	if err := srv.Start(cfg.Options); err != nil {
		return err
	}
	defer srv.ShutdownWithin(cfg.ShutdownTimeout)
	log.Info("agent-controller starting", "version", service.Version().Version, "identity", cfg.Pod.Name, "watchNamespace", cfg.WatchNamespace,
		"leaderElect", cfg.LeaderElection.Enabled, "metrics", cfg.MetricsBindAddress, "probes", cfg.HealthProbeBindAddress)

	lead := func(ctx context.Context) {
		ctl := controller.New(c, kube, m, opts)
		state.SetController(ctl)
		defer state.SetController(nil)
		// While runs wait for a worker, their Events wait too.
		recorder.YieldTo(ctl.WorkWaiting)
		defer recorder.YieldTo(nil)
		if err := ctl.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("controller loop ended", "err", err)
		}
	}
	if !cfg.LeaderElection.Enabled {
		leader.RunWithoutElection(ctx, leader.Config{OnLeading: lead, State: state, Metrics: m})
		return nil
	}
	le := cfg.LeaderElection
	return leader.Run(ctx, leader.Config{
		Client: kube, Namespace: cfg.LeaseNamespace(), Name: le.ID, Identity: cfg.Pod.Name,
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
		Log: log, OnLeading: lead, State: state, Metrics: m,
	})
}

// streamRetry bounds the wait between attempts to create the event
// stream while NATS is unreachable.
const streamRetry = 30 * time.Second

// ensureStream makes sure the run-event stream exists, retrying until it
// does or ctx ends: the runs' own credentials may publish to it but not
// create it (docs/agent-controller.md, "NATS credentials").
func ensureStream(ctx context.Context, cfg *config.Config, log *slog.Logger) {
	opts := append([]nats.Option{nats.Name("agent-controller " + cfg.Pod.Name + " stream setup")}, cfg.NATS.Options()...)
	wait := time.Second
	for {
		err := createStream(ctx, cfg.NATSURL, opts)
		if errors.Is(err, events.ErrStreamSubjects) {
			// An operator's stream, used as it is, as the publishers do.
			log.Warn("using existing stream", "err", err)
			return
		}
		if err == nil {
			log.Debug("run-event stream ready", "stream", events.StreamName)
			return
		}
		log.Warn("cannot make sure the run-event stream exists; retrying", "stream", events.StreamName, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, streamRetry)
	}
}

// createStream connects once and creates the run-event stream when it is
// missing.
func createStream(ctx context.Context, url string, opts []nats.Option) error {
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return events.EnsureStream(cctx, js, events.StreamConfig(0, 0, 0))
}

// batchPollerTokenLifetime is the life of a token requested for
// batch-poller: an hour, as a projected one; it is renewed at 80%.
const batchPollerTokenLifetime = time.Hour

// batchPollerDialOptions are the options of the batch-poller client: a
// plaintext channel (NetworkPolicy keeps it between the two pods,
// docs/security.md) carrying agent-controller's ServiceAccount token on
// every call, from the projected token file in a pod or from the
// TokenRequest API outside one. Without either, batch-poller refuses
// every call, which the log says at start.
func batchPollerDialOptions(cfg *config.Config, kube kubernetes.Interface, log *slog.Logger) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	switch {
	case cfg.BatchPollerTokenFile != "":
		opts = append(opts, grpc.WithPerRPCCredentials(grpcauth.NewFileToken(cfg.BatchPollerTokenFile)))
	case cfg.BatchPollerServiceAccount != "":
		// Checked by the config already.
		ns, name, _ := grpcauth.ParseServiceAccount(cfg.BatchPollerServiceAccount)
		opts = append(opts, grpc.WithPerRPCCredentials(
			grpcauth.NewRequestedToken(kube, ns, name, cfg.BatchPollerTokenAudience, batchPollerTokenLifetime)))
	default:
		log.Warn("no token for batch-poller: it refuses every call (set --batch-poller-token-file or --batch-poller-service-account)")
	}
	return opts
}
