package service

import (
	"fmt"
	"os"
	"time"
)

// Options are the settings the skeleton itself reads. A service embeds the
// groups it uses by calling the matching Add method on its FlagSet.
type Options struct {
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// MetricsBindAddress serves /metrics; "0" turns it off.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" turns it
	// off. When it equals MetricsBindAddress one listener serves all three.
	HealthProbeBindAddress string
	// ShutdownTimeout bounds graceful shutdown after SIGTERM.
	ShutdownTimeout time.Duration
	// Kube configures the Kubernetes client, when the service has one.
	Kube KubeOptions
	// LeaderElection configures leader election, when the service has it.
	LeaderElection LeaderElectionOptions
	// Pod is the pod the process runs in (downward API), when known.
	Pod PodOptions
	// GRPCBindAddress is the gRPC server's address, when it has one.
	GRPCBindAddress string
}

// KubeOptions configures the client of the Kubernetes API.
type KubeOptions struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster config.
	Kubeconfig string
	// QPS and Burst are client-go's client-side rate limit.
	QPS   float64
	Burst int
}

// LeaderElectionOptions configures leader election on a
// coordination.k8s.io/v1 Lease.
type LeaderElectionOptions struct {
	// Enabled makes replicas contend for the Lease; only its holder works.
	Enabled bool
	// ID is the Lease's name.
	ID string
	// Namespace is the Lease's namespace; empty means the pod's namespace.
	Namespace string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's
	// leaderelection timings and must nest: retry < renew < lease.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// PodOptions names the pod the process runs in, from the downward API.
type PodOptions struct {
	// Name is the pod's name; it is the leader-election identity.
	Name string
	// Namespace is the pod's namespace.
	Namespace string
}

// ServingDefaults are a service's default listen addresses.
type ServingDefaults struct {
	// Metrics and Health are the default metrics and probe addresses.
	Metrics, Health string
	// ShutdownTimeout is the default graceful shutdown bound.
	ShutdownTimeout time.Duration
}

// AddServing registers --log-level, --metrics-bind-address,
// --health-probe-bind-address and --shutdown-timeout.
func (f *FlagSet) AddServing(o *Options, d ServingDefaults) {
	if d.Metrics == "" {
		d.Metrics = ":8080"
	}
	if d.Health == "" {
		d.Health = ":8081"
	}
	if d.ShutdownTimeout == 0 {
		d.ShutdownTimeout = 30 * time.Second
	}
	f.inGroup("serving", func() {
		f.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
		f.StringVar(&o.MetricsBindAddress, "metrics-bind-address", d.Metrics, "listen address of /metrics; 0 turns it off")
		f.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", d.Health, "listen address of /healthz and /readyz; 0 turns them off")
		f.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", d.ShutdownTimeout, "how long in-flight work may finish after SIGTERM")
	})
	f.Check(func() error {
		if _, err := ParseLevel(o.LogLevel); err != nil {
			return fmt.Errorf("--log-level / LOG_LEVEL: %w", err)
		}
		if o.ShutdownTimeout < 0 {
			return fmt.Errorf("--shutdown-timeout / SHUTDOWN_TIMEOUT must not be negative, got %s", o.ShutdownTimeout)
		}
		return nil
	})
}

// AddKube registers --kubeconfig, --kube-api-qps and --kube-api-burst with
// the service's default rate limit.
func (f *FlagSet) AddKube(o *KubeOptions, qps float64, burst int) {
	f.inGroup("kube", func() {
		f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
		f.Float64Var(&o.QPS, "kube-api-qps", qps, "client-side limit of requests per second to the Kubernetes API")
		f.IntVar(&o.Burst, "kube-api-burst", burst, "client-side burst of requests to the Kubernetes API")
	})
	f.Check(func() error {
		if o.QPS <= 0 || o.Burst < 1 {
			return fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %g and %d", o.QPS, o.Burst)
		}
		return nil
	})
}

// AddPod registers --pod-name and --pod-namespace, which a Deployment
// fills from the downward API (env POD_NAME and POD_NAMESPACE). The pod
// name defaults to the host name, the namespace to "default". The host name
// is filled in after parsing rather than as the flag's default, so the
// generated docs do not depend on the machine that generated them.
func (f *FlagSet) AddPod(o *PodOptions) {
	f.inGroup("pod", func() {
		f.StringVar(&o.Name, "pod-name", "", "name of this pod; the leader-election identity (the host name when empty)")
		f.StringVar(&o.Namespace, "pod-namespace", "default", "namespace of this pod")
	})
	f.Check(func() error {
		if o.Name == "" {
			o.Name, _ = os.Hostname()
		}
		return nil
	})
}

// AddLeaderElection registers --leader-elect and its Lease settings, with
// the service's default Lease name.
func (f *FlagSet) AddLeaderElection(o *LeaderElectionOptions, defaultID string) {
	f.inGroup("leader-election", func() {
		f.BoolVar(&o.Enabled, "leader-elect", true, "contend for a Lease so that only one replica works at a time")
		f.StringVar(&o.ID, "leader-election-id", defaultID, "name of the leader-election Lease")
		f.StringVar(&o.Namespace, "leader-election-namespace", "", "namespace of the Lease; the pod's namespace when empty")
		f.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a Lease stays valid without renewal")
		f.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before it steps down")
		f.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often the Lease is renewed or contended")
	})
	f.Check(func() error {
		if !o.Enabled {
			return nil
		}
		if o.ID == "" {
			return fmt.Errorf("--leader-election-id / LEADER_ELECTION_ID must not be empty")
		}
		if o.RetryPeriod <= 0 || o.RetryPeriod >= o.RenewDeadline || o.RenewDeadline >= o.LeaseDuration {
			return fmt.Errorf("leader election needs 0 < --leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration, got %s, %s, %s",
				o.RetryPeriod, o.RenewDeadline, o.LeaseDuration)
		}
		return nil
	})
}

// AddGRPC registers --grpc-bind-address with the service's default.
func (f *FlagSet) AddGRPC(addr *string, def string) {
	f.inGroup("grpc", func() {
		f.StringVar(addr, "grpc-bind-address", def, "listen address of the gRPC server (with gRPC health and reflection)")
	})
	f.Check(func() error {
		if *addr == "" {
			return fmt.Errorf("--grpc-bind-address / GRPC_BIND_ADDRESS must not be empty")
		}
		return nil
	})
}

// LeaseNamespace is the Lease's namespace: the one set, else the pod's.
func (o Options) LeaseNamespace() string {
	if o.LeaderElection.Namespace != "" {
		return o.LeaderElection.Namespace
	}
	return o.Pod.Namespace
}
