package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// runtimeHealthAddr is where an Omnia agent pod's readiness probe looks:
// the runtime container's health port (8081, services/omnia-controllers
// internal/agentruntime) on the pod's address, which is loopback on
// localnode's host network.
const runtimeHealthAddr = "127.0.0.1:8081"

// serveRuntime is the demo's stand-in for the Omnia runtime image, which
// this repository does not ship: omnia-controllers runs it as the runtime
// container's command (--runtime-command), and it answers the readiness
// probe while it runs, naming the pack version its pod was given. Every
// agent pod shares the host network, so the listener sets SO_REUSEPORT:
// the stable and the candidate Deployment's pods all bind the one port,
// and a probe may be answered by any of them, which the demo accepts.
func serveRuntime(ctx context.Context) error {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(ctx, "tcp", runtimeHealthAddr)
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
	slog.Info("demo runtime serving", "addr", runtimeHealthAddr, "pack_version", version, "variant", os.Getenv("OMNIA_VARIANT"))
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
