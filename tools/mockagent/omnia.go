package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// omniaRuntimeAddr is where the runtime stand-in listens by default: the
// runtime port the controller gives it (OMNIA_RUNTIME_PORT, 9000 by
// services/omnia-controllers internal/agentruntime pod.go) on loopback,
// the pod's address on localnode's host network, where the facade and the
// readiness probe reach it. In a pod network of its own the probe comes to
// the pod's IP: pass --addr=:9000.
func omniaRuntimeAddr() string {
	port := os.Getenv("OMNIA_RUNTIME_PORT")
	if port == "" {
		port = "9000"
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// omniaRuntime is the `omnia-runtime` mode: a stand-in for the Omnia
// runtime image, which this repository does not ship. omnia-controllers
// runs it as the runtime container's command (--runtime-command, or the
// chart's runtime.command), and it answers on the runtime port (the
// readiness probe and the facade, omnia_facade.go) until SIGTERM, naming
// the pack version its pod was given; it echoes what the facade forwards
// of an invocation (POST /invoke).
func omniaRuntime(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("omnia-runtime", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", omniaRuntimeAddr(), "address of the runtime port: /readyz, /healthz and /invoke")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serveOmniaRuntime(ctx, *addr, slog.New(slog.NewTextHandler(stderr, nil))); err != nil {
		fmt.Fprintf(stderr, "mockagent: %v\n", err)
		return 1
	}
	return 0
}

// serveOmniaRuntime serves the health endpoints and /invoke on addr until
// ctx ends.
// Agent pods on a shared host network all bind the one port, so the
// listener sets SO_REUSEPORT: the stable and the candidate Deployment's
// pods may run together, and a probe may be answered by any of them.
func serveOmniaRuntime(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := listenReusePort(ctx, addr)
	if err != nil {
		return fmt.Errorf("runtime port: %w", err)
	}
	version := os.Getenv("OMNIA_PROMPTPACK_VERSION")
	srv := &http.Server{Handler: omniaRuntimeMux(version), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("omnia runtime stand-in serving", "addr", ln.Addr().String(), "pack_version", version, "variant", os.Getenv("OMNIA_VARIANT"))
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// omniaRuntimeMux answers the probes with the pack version and echoes
// invocations (runtime_invoke.go).
func omniaRuntimeMux(version string) *http.ServeMux {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintf(w, "ok: pack version %s\n", version) }
	mux.HandleFunc("/readyz", ok)
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("POST "+invokePath, runtimeEcho(version))
	return mux
}

// listenReusePort listens on addr with SO_REUSEPORT, so the agent pods
// sharing localnode's host network can all bind the one port.
func listenReusePort(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(ctx, "tcp", addr)
}
