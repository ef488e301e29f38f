// Package deploy checks the kustomize install: the base and its batch and
// realtime components render with the kubectl built alongside the control
// plane, and what they render is accepted by a real kube-apiserver
// (server-side dry run, so every object is validated against its schema).
package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentplane/agentplane/libs/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }

func kubectl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	cmd := exec.Command(bin, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func TestTheInstallRendersAndIsAccepted(t *testing.T) {
	deploy, err := filepath.Abs("../../deploy")
	if err != nil {
		t.Fatal(err)
	}
	kc, err := env.KubeconfigFor("deployer")
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agentplane-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An overlay of the user's own, outside the repository, as the docs show.
	overlay := t.TempDir()
	rel, err := filepath.Rel(overlay, deploy)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - "+rel+
			"\ncomponents:\n  - "+rel+"/components/batch\n  - "+rel+"/components/realtime\n  - "+rel+"/components/omnia\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rule, dir string
		want      []string
		absent    []string
	}{
		{"the base installs every CRD and the agent-controller; batch, realtime and omnia-controllers are off", deploy,
			[]string{"kind: CustomResourceDefinition", "name: agent-controller"},
			[]string{"BATCH_ENABLED", "REALTIME_ENABLED", "name: batch-poller", "name: omnia-controllers"}},
		{"the components add batch-poller, realtime-gateway and omnia-controllers", overlay,
			[]string{"name: batch-poller", "name: realtime-gateway", "name: BATCH_ENABLED", "name: REALTIME_ENABLED", "agentplane-realtime-key",
				"name: omnia-controllers", "name: agentruntimes.omnia.altairalabs.ai", "name: workspaces.omnia.altairalabs.ai",
				"name: skillsources.omnia.altairalabs.ai", "name: rolloutanalyses.omnia.altairalabs.ai"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			out := kubectl(t, nil, "kustomize", tc.dir)
			for _, w := range tc.want {
				if !bytes.Contains(out, []byte(w)) {
					t.Errorf("render lacks %q", w)
				}
			}
			for _, a := range tc.absent {
				if bytes.Contains(out, []byte(a)) {
					t.Errorf("render has %q", a)
				}
			}
			kubectl(t, out, "--kubeconfig", kcPath, "apply", "--dry-run=server", "-f", "-")
		})
	}
}

// TestEveryGeneratedCRDIsInstalled keeps deploy/kustomization.yaml in step
// with controller-gen: a new kind's CRD must be installed by the base.
func TestEveryGeneratedCRDIsInstalled(t *testing.T) {
	out := kubectl(t, nil, "kustomize", "../../deploy")
	files, err := filepath.Glob("../../deploy/crds/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs found: %v", err)
	}
	for _, f := range files {
		// controller-gen names each file <group>_<plural>.yaml and the CRD
		// <plural>.<group>.
		group, plural, ok := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".yaml"), "_")
		if !ok {
			t.Fatalf("unexpected CRD file name %s", f)
		}
		if !bytes.Contains(out, []byte("name: "+plural+"."+group+"\n")) {
			t.Errorf("deploy/kustomization.yaml does not install %s (%s)", plural+"."+group, filepath.Base(f))
		}
	}
}
