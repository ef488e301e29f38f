// Package install installs agentplane the way a platform engineer does and
// proves the result runs: the umbrella Helm chart (helm/agentplane),
// installed through Helm's Go SDK onto a real control plane (kube-apiserver,
// etcd, kube-controller-manager) whose node, localnode, runs every service
// as a pod from its OCI image (`make images`), in a network namespace of its
// own, with its projected ServiceAccount token — so the RBAC the chart
// grants is the RBAC the services really run with. Through the installed
// system a Job run, a batch run (fakevendor, itself a pod from its image)
// and a realtime prompt succeed; `helm upgrade` with a changed value rolls
// the Deployments and runs keep working; `helm uninstall` leaves nothing
// but the CRDs.
//
// The images must exist first: `make test` builds them (`make images`).
package install

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tools/localnode/node"
)

var (
	env *testenv.Env
	// kubeconfig is a system:masters kubeconfig file, as the installing
	// engineer has.
	kubeconfig string
	// version is the images' and charts' version (the VERSION file).
	version string
)

// images are those the install runs: the charts' services, the run pod's
// supervisor and mock CLIs, and fakevendor.
var images = []string{"agent-controller", "batch-poller", "realtime-gateway", "omnia-controllers", "supervisor", "mockagent", "fakevendor"}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "install tests need root: localnode runs pods in their own mount and network namespaces")
		return 1
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	raw, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	version = strings.TrimSpace(string(raw))
	imagesDir := filepath.Join(cacheDir(), "images")
	for _, n := range images {
		if _, err := os.Stat(filepath.Join(imagesDir, n+"-"+version+".tar")); err != nil {
			fmt.Fprintf(os.Stderr, "install: image agentplane/%s:%s is not in %s: run `make images` first\n", n, version, imagesDir)
			return 1
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	work, err := os.MkdirTemp("", "agentplane-install-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(work) }()
	// The chart installs the CRDs, so the control plane starts without.
	noCRDs := filepath.Join(work, "no-crds")
	if err := os.MkdirAll(noCRDs, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// envtest turns the ServiceAccount admission plugin off; a cluster has
	// it on, and it is what mounts each pod's projected token.
	// OwnerReferencesPermissionEnforcement is on as in OpenShift: a chart
	// whose RBAC misses an owner's finalizers cannot create owned objects.
	e, err := testenv.Start(ctx, testenv.Options{ControllerManager: true, CRDDir: noCRDs,
		APIServerArgs: map[string]string{"disable-admission-plugins": "", "enable-admission-plugins": "OwnerReferencesPermissionEnforcement"}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "install: %v\n", err)
		return 1
	}
	env = e
	defer func() { _ = e.Stop() }()
	kc, err := e.KubeconfigFor("platform-engineer")
	if err != nil {
		fmt.Fprintf(os.Stderr, "install: %v\n", err)
		return 1
	}
	kubeconfig = filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	ln, err := node.Start(ctx, node.Config{
		RESTConfig: e.Config, Name: "localnode", StateDir: filepath.Join(work, "node"),
		ImageDirs:     []string{imagesDir},
		ImageCacheDir: filepath.Join(cacheDir(), "localnode", "rootfs"),
		Network:       &node.NetworkConfig{},
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "install: start localnode: %v\n", err)
		return 1
	}
	defer ln.Stop()
	return m.Run()
}

// cacheDir is where make keeps what it builds ($AGENTPLANE_CACHE).
func cacheDir() string {
	if d := os.Getenv("AGENTPLANE_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "agentplane")
}
