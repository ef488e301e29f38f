// Package helmchart prepares and installs the Helm charts under helm/ the
// way docs/install.md tells users to: `helm dependency build
// helm/agentplane` packs the file:// service charts into the umbrella's
// charts/ directory, then `helm install` or `helm upgrade` through Helm's
// Go SDK. Build works on a copy, so the working tree is left alone. The
// demo (tools/demo) and the chart tests (tests/internal/charts) share it.
package helmchart

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/downloader"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// Umbrella is the umbrella chart's directory name under helm/.
const Umbrella = "agentplane"

// Build copies root/helm into a new temporary directory, builds the
// umbrella chart's dependencies there and returns the directory; the caller
// removes it.
func Build(root string) (string, error) {
	dir, err := os.MkdirTemp("", "agentplane-helm-")
	if err != nil {
		return "", err
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "helm"))); err != nil {
		return dir, err
	}
	// What an earlier `helm dependency build` in the working tree left
	// (both ignored by git) must not stand in for the charts as they are.
	for _, stale := range []string{"charts", "Chart.lock"} {
		if err := os.RemoveAll(filepath.Join(dir, Umbrella, stale)); err != nil {
			return dir, err
		}
	}
	settings := cli.New()
	settings.RepositoryConfig = filepath.Join(dir, ".helm", "repositories.yaml")
	settings.RepositoryCache = filepath.Join(dir, ".helm", "cache")
	var out bytes.Buffer
	m := &downloader.Manager{
		Out:              &out,
		ChartPath:        filepath.Join(dir, Umbrella),
		Getters:          getter.All(settings),
		RepositoryConfig: settings.RepositoryConfig,
		RepositoryCache:  settings.RepositoryCache,
		SkipUpdate:       true,
	}
	if err := m.Build(); err != nil {
		return dir, fmt.Errorf("helm dependency build %s: %w\n%s", Umbrella, err, out.String())
	}
	return dir, nil
}

// Load loads the chart name from a directory Build returned.
func Load(dir, name string) (*chart.Chart, error) {
	ch, err := loader.Load(filepath.Join(dir, name))
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", name, err)
	}
	return ch, nil
}

// LoadUmbrella is the umbrella chart of the repository at root with its
// dependencies built (Build, then Load), as a user has it after `helm
// dependency build helm/agentplane`; the copy is removed before it returns.
func LoadUmbrella(root string) (*chart.Chart, error) {
	dir, err := Build(root)
	defer func() { _ = os.RemoveAll(dir) }()
	if err != nil {
		return nil, err
	}
	return Load(dir, Umbrella)
}

// Render installs ch client-side (`helm install --dry-run`) as release in
// namespace, for Kubernetes kubeVersion (e.g. "v1.36.3"), with values, a
// YAML document as in `helm install -f`, the values schema applied; it
// returns the rendered manifests, one YAML document each.
func Render(ch *chart.Chart, release, namespace, kubeVersion, values string) ([]string, error) {
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	in := action.NewInstall(&action.Configuration{})
	in.ClientOnly, in.DryRun, in.DryRunOption = true, true, "client"
	in.ReleaseName, in.Namespace = release, namespace
	in.KubeVersion = kv
	in.DisableHooks = true
	rel, err := in.Run(ch, vals.AsMap())
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", ch.Name(), err)
	}
	var docs []string
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		docs = append(docs, doc)
	}
	return docs, nil
}

// Client runs Helm's install, upgrade and uninstall for one release in
// one namespace, as the helm command does with --kubeconfig and
// --namespace, its releases stored in Secrets (Helm's default).
type Client struct {
	cfg         *action.Configuration
	release, ns string
	// Wait makes install and upgrade wait for the release's resources to
	// be ready (--wait); on by default.
	Wait bool
	// Timeout bounds an action waiting for readiness (--wait --timeout).
	Timeout time.Duration

	mu    sync.Mutex
	lines []string
}

// keptLines is how many of Helm's last log lines a Client keeps: Helm
// logs every readiness poll, and only the last say why a wait failed.
const keptLines = 20

// NewClient is a Client of release in namespace ns on the cluster of the
// kubeconfig file.
func NewClient(kubeconfig, ns, release string) (*Client, error) {
	settings := cli.New()
	settings.KubeConfig = kubeconfig
	settings.SetNamespace(ns)
	c := &Client{cfg: new(action.Configuration), release: release, ns: ns, Wait: true, Timeout: 5 * time.Minute}
	if err := c.cfg.Init(settings.RESTClientGetter(), ns, "secret", c.logf); err != nil {
		return nil, err
	}
	return c, nil
}

// logf keeps Helm's last lines. Helm calls it from concurrent goroutines
// (it deletes resources in parallel), so lines is guarded.
func (c *Client) logf(format string, v ...any) {
	line := fmt.Sprintf(format, v...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lines = append(c.lines, line); len(c.lines) > keptLines {
		c.lines = c.lines[1:]
	}
}

// LastLines are Helm's last log lines, for a failure's diagnosis.
func (c *Client) LastLines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// Install is `helm install RELEASE CHART -n NS --create-namespace --wait
// -f values`; it returns the release and how long it took.
func (c *Client) Install(ch *chart.Chart, values map[string]any) (*release.Release, time.Duration, error) {
	in := action.NewInstall(c.cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = c.release, c.ns, true
	in.Wait, in.Timeout = c.Wait, c.Timeout
	start := time.Now()
	rel, err := in.Run(ch, values)
	if err != nil {
		return nil, time.Since(start), fmt.Errorf("helm install %s: %w", c.release, err)
	}
	return rel, time.Since(start), nil
}

// Upgrade is `helm upgrade RELEASE CHART -n NS --wait -f values`.
func (c *Client) Upgrade(ch *chart.Chart, values map[string]any) (*release.Release, time.Duration, error) {
	up := action.NewUpgrade(c.cfg)
	up.Namespace, up.Wait, up.Timeout = c.ns, c.Wait, c.Timeout
	start := time.Now()
	rel, err := up.Run(c.release, ch, values)
	if err != nil {
		return nil, time.Since(start), fmt.Errorf("helm upgrade %s: %w", c.release, err)
	}
	return rel, time.Since(start), nil
}

// InstallOrUpgrade is `helm upgrade --install`: an upgrade when the
// release exists, else an install.
func (c *Client) InstallOrUpgrade(ch *chart.Chart, values map[string]any) (*release.Release, time.Duration, error) {
	if _, err := action.NewHistory(c.cfg).Run(c.release); errors.Is(err, driver.ErrReleaseNotFound) {
		return c.Install(ch, values)
	}
	return c.Upgrade(ch, values)
}

// Uninstall is `helm uninstall RELEASE --wait`.
func (c *Client) Uninstall() error {
	un := action.NewUninstall(c.cfg)
	un.Wait, un.Timeout = true, c.Timeout
	if _, err := un.Run(c.release); err != nil {
		return fmt.Errorf("helm uninstall %s: %w", c.release, err)
	}
	return nil
}
