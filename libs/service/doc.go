// Package service is the process skeleton every agentplane binary is built
// on, so that a platform engineer configures, probes and scrapes each
// service the same way:
//
//   - flags with one naming scheme (controller-runtime's: --metrics-bind-address,
//     --health-probe-bind-address, --leader-elect, --log-level, ...), each with
//     an environment fallback derived by one rule (EnvName), and booleans parsed
//     with strconv.ParseBool;
//   - structured JSON logging through log/slog, with client-go's klog and
//     controller-runtime's logr routed to the same logger, and an invalid
//     --log-level refused rather than defaulted;
//   - a context cancelled on SIGTERM or SIGINT, for graceful shutdown;
//   - the Kubernetes client configuration (kubeconfig or in-cluster) with
//     --kube-api-qps and --kube-api-burst;
//   - one HTTP server for /metrics, /healthz and /readyz;
//   - a gRPC server with health, reflection, and logging and metrics
//     interceptors (package grpcserver, linked only by the services that
//     serve gRPC);
//   - build information: --version and the agentplane_build_info metric.
//
// docs/configuration.md describes the scheme; each service's flag table in
// docs/ is generated from its flag definitions (see Markdown).
package service
