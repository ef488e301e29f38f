// Package charts prepares the Helm charts under helm/ for tests the way
// docs/install.md tells users to: `helm dependency build helm/agentplane`
// packs the file:// service charts into the umbrella's charts/ directory.
// It works on a copy, so the working tree is left alone.
package charts

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/downloader"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/releaseutil"
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

// LoadUmbrella is the umbrella chart with its dependencies built (Build,
// then Load), as a user has it after `helm dependency build
// helm/agentplane`; the test fails on error and the copy is removed when
// it ends.
func LoadUmbrella(t testing.TB) *chart.Chart {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := Build(root)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err != nil {
		t.Fatal(err)
	}
	ch, err := Load(dir, Umbrella)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}
