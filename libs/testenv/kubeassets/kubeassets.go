// Package kubeassets names the pinned control-plane versions and where
// their binaries are cached. It imports only the standard library, so the
// small program that builds those binaries (tools/kubestack/kubebuild)
// compiles in seconds on a cold machine and the long build starts at once.
package kubeassets

import (
	"fmt"
	"os"
	"path/filepath"
)

// Pinned control-plane versions. kube-apiserver, kube-controller-manager and
// kubectl are built from k8s.io/kubernetes at KubeVersion (its staging modules
// replaced by the published k8s.io/* modules of the same release); etcd is
// built from go.etcd.io/etcd/server/v3 at EtcdVersion.
const (
	KubeVersion = "v1.36.3"
	EtcdVersion = "v3.6.8"
)

// Binary names inside an assets directory. They match what controller-runtime's
// envtest looks for, so the directory works as KUBEBUILDER_ASSETS.
const (
	BinEtcd              = "etcd"
	BinAPIServer         = "kube-apiserver"
	BinControllerManager = "kube-controller-manager"
	BinKubectl           = "kubectl"
)

// Binaries lists every binary an assets directory must hold.
var Binaries = []string{BinEtcd, BinAPIServer, BinControllerManager, BinKubectl}

// CacheRoot is where agentplane caches what it builds: $AGENTPLANE_CACHE, else
// $HOME/.cache/agentplane.
func CacheRoot() string {
	if d := os.Getenv("AGENTPLANE_CACHE"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "agentplane")
}

// DefaultAssetsDir is the versioned cache directory that `kubestack build`
// fills. The key names both versions, so a bump never reuses a stale build.
func DefaultAssetsDir() string {
	return filepath.Join(CacheRoot(), "kube", KubeVersion+"-etcd-"+EtcdVersion)
}

// Dir is where the control-plane binaries are, or are to be built:
// KUBEBUILDER_ASSETS when set, else DefaultAssetsDir, so tests and the
// builder agree on it.
func Dir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return DefaultAssetsDir()
}

// AssetsDir returns Dir once it holds every control-plane binary. It fails
// with a one-line hint when a binary is missing, rather than letting a test
// hang on startup.
func AssetsDir() (string, error) {
	dir := Dir()
	for _, b := range Binaries {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("control-plane binary %s missing in %s: run 'make kube-binaries' (or 'go run ./tools/kubestack/kubebuild')", b, dir)
		}
	}
	return dir, nil
}
