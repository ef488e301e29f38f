package install

import (
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"

	"github.com/agentplane/agentplane/tools/helmchart"
)

const (
	releaseName = "agentplane"
	releaseNS   = "agentplane-system"
	// helmTimeout bounds an install or upgrade waiting for readiness.
	helmTimeout = 5 * time.Minute
)

// helmClient is what the helm command builds from --kubeconfig and
// --namespace (tools/helmchart, shared with the demo). On failure the
// test logs Helm's last lines and the release's pods.
func helmClient(t *testing.T) *helmchart.Client {
	t.Helper()
	c, err := helmchart.NewClient(kubeconfig, releaseNS, releaseName)
	if err != nil {
		t.Fatal(err)
	}
	c.Timeout = helmTimeout
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("helm's last lines:\n%s", strings.Join(c.LastLines(), "\n"))
			dumpPods(t, releaseNS)
		}
	})
	return c
}

// helmInstall is `helm install agentplane helm/agentplane -n
// agentplane-system --create-namespace --wait -f values`.
func helmInstall(t *testing.T, ch *chart.Chart, values map[string]any) (*release.Release, time.Duration) {
	t.Helper()
	rel, took, err := helmClient(t).Install(ch, values)
	if err != nil {
		t.Fatal(err)
	}
	return rel, took
}

// helmUpgrade is `helm upgrade agentplane helm/agentplane --wait -f values`.
func helmUpgrade(t *testing.T, ch *chart.Chart, values map[string]any) (*release.Release, time.Duration) {
	t.Helper()
	rel, took, err := helmClient(t).Upgrade(ch, values)
	if err != nil {
		t.Fatal(err)
	}
	return rel, took
}

// helmUninstall is `helm uninstall agentplane --wait`.
func helmUninstall(t *testing.T) {
	t.Helper()
	if err := helmClient(t).Uninstall(); err != nil {
		t.Fatal(err)
	}
}
