// Package charts prepares the Helm charts under helm/ for tests the way
// docs/install.md tells users to, through tools/helmchart (which the demo
// uses too): `helm dependency build helm/agentplane` on a copy, so the
// working tree is left alone.
package charts

import (
	"os"
	"testing"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/tools/helmchart"
)

// Umbrella is the umbrella chart's directory name under helm/.
const Umbrella = helmchart.Umbrella

// Build copies root/helm into a new temporary directory, builds the
// umbrella chart's dependencies there and returns the directory; the caller
// removes it.
func Build(root string) (string, error) { return helmchart.Build(root) }

// Load loads the chart name from a directory Build returned.
func Load(dir, name string) (*chart.Chart, error) { return helmchart.Load(dir, name) }

// Render installs ch client-side (`helm install --dry-run`); see
// helmchart.Render.
func Render(ch *chart.Chart, release, namespace, kubeVersion, values string) ([]string, error) {
	return helmchart.Render(ch, release, namespace, kubeVersion, values)
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
