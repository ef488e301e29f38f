package install

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/release"
)

const (
	releaseName = "agentplane"
	releaseNS   = "agentplane-system"
	// helmTimeout bounds an install or upgrade waiting for readiness.
	helmTimeout = 5 * time.Minute
)

// helmConfig is what the helm command builds from --kubeconfig and
// --namespace, with releases stored in Secrets (Helm's default).
func helmConfig(t *testing.T) *action.Configuration {
	t.Helper()
	settings := cli.New()
	settings.KubeConfig = kubeconfig
	settings.SetNamespace(releaseNS)
	cfg := new(action.Configuration)
	// Helm logs every readiness poll; keep only the last lines, for a
	// failure's diagnosis. Helm calls the log function from concurrent
	// goroutines (it deletes resources in parallel), so lines is guarded.
	var (
		mu    sync.Mutex
		lines []string
	)
	logf := func(format string, v ...any) {
		line := fmt.Sprintf(format, v...)
		mu.Lock()
		defer mu.Unlock()
		if lines = append(lines, line); len(lines) > 20 {
			lines = lines[1:]
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			last := strings.Join(lines, "\n")
			mu.Unlock()
			t.Logf("helm's last lines:\n%s", last)
			dumpPods(t, releaseNS)
		}
	})
	if err := cfg.Init(settings.RESTClientGetter(), releaseNS, "secret", logf); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// helmInstall is `helm install agentplane helm/agentplane -n
// agentplane-system --create-namespace --wait -f values`.
func helmInstall(t *testing.T, ch *chart.Chart, values map[string]any) (*release.Release, time.Duration) {
	t.Helper()
	in := action.NewInstall(helmConfig(t))
	in.ReleaseName, in.Namespace, in.CreateNamespace = releaseName, releaseNS, true
	in.Wait, in.Timeout = true, helmTimeout
	start := time.Now()
	rel, err := in.Run(ch, values)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	return rel, time.Since(start)
}

// helmUpgrade is `helm upgrade agentplane helm/agentplane --wait -f values`.
func helmUpgrade(t *testing.T, ch *chart.Chart, values map[string]any) (*release.Release, time.Duration) {
	t.Helper()
	up := action.NewUpgrade(helmConfig(t))
	up.Namespace, up.Wait, up.Timeout = releaseNS, true, helmTimeout
	start := time.Now()
	rel, err := up.Run(releaseName, ch, values)
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	return rel, time.Since(start)
}

// helmUninstall is `helm uninstall agentplane --wait`.
func helmUninstall(t *testing.T) {
	t.Helper()
	un := action.NewUninstall(helmConfig(t))
	un.Wait, un.Timeout = true, helmTimeout
	if _, err := un.Run(releaseName); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
}
