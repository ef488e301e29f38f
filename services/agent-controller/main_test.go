package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/services/agent-controller/internal/config"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{ControllerManager: true, APIServerArgs: map[string]string{
		// As on OpenShift: an object that blocks its owner's deletion may
		// only be created by who may update the owner's finalizers, so the
		// RBAC rule on agents/finalizers is put to use.
		"enable-admission-plugins": "OwnerReferencesPermissionEnforcement",
	}}))
}

// startRun runs the binary's run loop in-process with the flags args, as
// the pod would, until the returned stop is called or the test ends; stop
// waits for run to return and fails the test on its error.
func startRun(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	cfg, err := config.Parse(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
