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

// omniaHealthAddr is where an Omnia agent pod's readiness probe looks by
// default: the runtime container's health port (8081,
// services/omnia-controllers internal/agentruntime) on loopback, the pod's
// address on localnode's host network. In a pod network of its own the
// probe comes to the pod's IP: pass --addr=:8081.
const omniaHealthAddr = "127.0.0.1:8081"

// omniaRuntime is the `omnia-runtime` mode: a stand-in for the Omnia
// runtime image, which this repository does not ship. omnia-controllers
// runs it as the runtime container's command (--runtime-command, or the
// chart's runtime.command), and it answers the readiness probe until
// SIGTERM, naming the pack version its pod was given.
func omniaRuntime(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("omnia-runtime", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", omniaHealthAddr, "address of /readyz and /healthz")
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

// serveOmniaRuntime serves the health endpoints on addr until ctx ends.
// Agent pods on a shared host network all bind the one port, so the
// listener sets SO_REUSEPORT: the stable and the candidate Deployment's
// pods may run together, and a probe may be answered by any of them.
func serveOmniaRuntime(ctx context.Context, addr string, log *slog.Logger) error {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("runtime health port: %w", err)
	}
	version := os.Getenv("OMNIA_PROMPTPACK_VERSION")
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintf(w, "ok: pack version %s\n", version) }
	mux.HandleFunc("/readyz", ok)
	mux.HandleFunc("/healthz", ok)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
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
