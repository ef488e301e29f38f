// Package stack brings up what the end-to-end suites run against on one
// machine: a real kube-apiserver, etcd and kube-controller-manager;
// localnode running pods as processes; an embedded NATS server with
// JetStream, secured as an install's is (nats.go); and the binaries they
// test, built from this tree. It also runs those binaries as processes
// with their logs in files.
package stack

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tools/localnode/node"
)

// Options say what a suite needs of the stack.
type Options struct {
	// Suite names the suite in errors and in its work directory.
	Suite string
	// RootReason says why the suite needs root: localnode runs its pods
	// in private mount namespaces.
	RootReason string
	// Packages, relative to the repository's module path, are built into
	// BinDir; a tools/mockagent among them also lays out the supervisor
	// bundle (BinDir/bundle).
	Packages []string
	// KubeUser is the user of the kubeconfig written for the binaries.
	KubeUser string
}

// Stack is a running stack. Stop ends it and removes Work and BinDir.
type Stack struct {
	// Env is the control plane.
	Env *testenv.Env
	// Work is the suite's scratch directory; BinDir the built binaries
	// (beside Work, not in it). Stop removes both.
	Work, BinDir string
	// NATSURL is the embedded NATS server's client URL; the server admits
	// only the users NATS describes.
	NATSURL string
	// NATS is the embedded server's credentials: the service credential
	// of the suites' own clients, and the signing key agent-controller
	// mints each run's credential with.
	NATS *NATS
	// Kubeconfig is the path of the kubeconfig of Options.KubeUser.
	Kubeconfig string

	stops []func()
}

// Main is a suite's TestMain: it starts the stack, calls run with it
// (the suite's own processes, then m.Run), stops the stack and exits with
// run's code. A stack that does not start fails the suite.
func Main(o Options, run func(ctx context.Context, s *Stack) int) {
	os.Exit(runStack(o, run))
}

// runStack is Main without the exit, so that its deferred calls run.
func runStack(o Options, run func(ctx context.Context, s *Stack) int) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Start(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Stop()
	return run(ctx, s)
}

// Start brings the stack up. On error it stops what it had started; the
// error starts with the suite's name.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%s tests need root: %s", o.Suite, o.RootReason)
	}
	s := &Stack{}
	if err := s.start(ctx, o); err != nil {
		s.Stop()
		return nil, fmt.Errorf("%s: %w", o.Suite, err)
	}
	return s, nil
}

// start is Start after the root check; on error s holds what to stop.
func (s *Stack) start(ctx context.Context, o Options) (err error) {
	if s.Work, err = os.MkdirTemp("", "agentplane-"+o.Suite+"-"); err != nil {
		return err
	}
	work := s.Work
	s.stops = append(s.stops, func() { _ = os.RemoveAll(work) })
	// A run pod's init step runs BinDir's supervisor on the host as the
	// agent's user, uid 1000 (the run pod meets Pod Security "restricted",
	// docs/agent-controller.md), so BinDir lives outside Work, which stays
	// the owner's alone: others may pass through it, not list it.
	if s.BinDir, err = os.MkdirTemp("", "agentplane-"+o.Suite+"-bin-"); err != nil {
		return err
	}
	bin := s.BinDir
	s.stops = append(s.stops, func() { _ = os.RemoveAll(bin) })
	if err := os.Chmod(bin, 0o711); err != nil {
		return err
	}
	if err := BuildBinaries(s.BinDir, o.Packages...); err != nil {
		return err
	}
	if s.Env, err = testenv.Start(ctx, testenv.Options{ControllerManager: true}); err != nil {
		return err
	}
	env := s.Env
	s.stops = append(s.stops, func() { _ = env.Stop() })
	ln, err := node.Start(ctx, node.Config{RESTConfig: s.Env.Config, Name: "localnode", StateDir: filepath.Join(s.Work, "node"),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		return fmt.Errorf("start localnode: %w", err)
	}
	s.stops = append(s.stops, ln.Stop)
	n, ns, err := startNATS(s.Work)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, ns.Shutdown)
	s.NATS, s.NATSURL = n, n.URL
	kc, err := s.Env.KubeconfigFor(o.KubeUser)
	if err != nil {
		return err
	}
	s.Kubeconfig = filepath.Join(s.Work, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, kc, 0o600); err != nil {
		return err
	}
	return nil
}

// Stop ends what Start started, last first.
func (s *Stack) Stop() {
	for _, stop := range slices.Backward(s.stops) {
		stop()
	}
	s.stops = nil
}

// modulePath is the repository's module path, the prefix of the
// packages BuildBinaries builds.
const modulePath = "github.com/agentplane/agentplane"

// BuildBinaries builds pkgs (relative to modulePath) into dir. When tools/mockagent
// is among them it installs the mock CLIs as the supervisor bundle in
// dir/bundle, which `supervisor init` copies into the run's /agent/bin.
func BuildBinaries(dir string, pkgs ...string) error {
	for _, pkg := range pkgs {
		pkg = modulePath + "/" + pkg
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w\n%s", pkg, err, out)
		}
	}
	if !slices.Contains(pkgs, "tools/mockagent") {
		return nil
	}
	out, err := exec.Command(filepath.Join(dir, "mockagent"), "install", filepath.Join(dir, "bundle")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("install mock CLIs: %w\n%s", err, out)
	}
	return nil
}
