package api_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// notManifests are the folders of deploy/ that hold no Kubernetes objects
// to apply: the generated CRDs (installed by the test environment), the
// Prometheus rule files and their tests, and the Grafana dashboards.
var notManifests = map[string]bool{"crds": true, "prometheus": true, "dashboards": true}

// TestDeployManifestsApply creates every object of the deploy/ bases (not
// the generated CRDs, not kustomization files) with strict validation, so a
// typo in a Deployment or an RBAC rule fails here rather than at install.
func TestDeployManifestsApply(t *testing.T) {
	root := filepath.Join(env.RepoRoot, "deploy")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() || notManifests[e.Name()] {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			ns := env.Namespace(t)
			for _, f := range yamlFiles(t, filepath.Join(root, e.Name())) {
				if strings.HasPrefix(filepath.Base(f), "kustomization") {
					continue
				}
				for _, obj := range docs(t, f) {
					if obj.GetKind() == "Namespace" {
						continue
					}
					if !strings.HasPrefix(obj.GetKind(), "Cluster") {
						obj.SetNamespace(ns)
					}
					err := env.Client.Create(context.Background(), obj, strict)
					if err != nil && !apierrors.IsAlreadyExists(err) {
						t.Errorf("%s: %s %s refused: %v", filepath.Base(f), obj.GetKind(), obj.GetName(), err)
					}
				}
			}
		})
	}
}
