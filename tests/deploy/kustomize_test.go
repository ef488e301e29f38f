// Package deploy checks the kustomize install: the base and its batch and
// realtime components render with the kubectl built alongside the control
// plane, and what they render is accepted by a real kube-apiserver
// (server-side dry run, so every object is validated against its schema).
package deploy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/agentplane/agentplane/libs/service/servicetest"
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

// deployDir is the repository's deploy/, as an absolute path.
func deployDir(t *testing.T) string {
	t.Helper()
	deploy, err := filepath.Abs("../../deploy")
	if err != nil {
		t.Fatal(err)
	}
	return deploy
}

// renderedDeployments renders the install with every component and
// returns its Deployments, in the order rendered.
func renderedDeployments(t *testing.T) []deployment {
	t.Helper()
	out := kubectl(t, nil, "kustomize", overlayWithEveryComponent(t, deployDir(t)))
	var deps []deployment
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var d deployment
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			return deps
		} else if err != nil {
			t.Fatal(err)
		}
		if d.Kind == "Deployment" {
			deps = append(deps, d)
		}
	}
}

// overlayWithEveryComponent writes an overlay of the user's own, outside
// the repository, as the docs show: the base and every component.
func overlayWithEveryComponent(t *testing.T, deploy string) string {
	t.Helper()
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
	return overlay
}

func TestTheInstallRendersAndIsAccepted(t *testing.T) {
	deploy := deployDir(t)
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
	overlay := overlayWithEveryComponent(t, deploy)
	// The NATS server's policy goes where the server runs.
	if _, err := env.Kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "messaging"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	natsPolicy := t.TempDir()
	rel, err := filepath.Rel(natsPolicy, filepath.Join(deploy, "components", "nats-network-policy"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(natsPolicy, "kustomization.yaml"), []byte(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n  - "+rel+"\n"), 0o644); err != nil {
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
		{"the nats-network-policy component renders the NATS server's NetworkPolicy in its namespace", natsPolicy,
			[]string{"kind: NetworkPolicy", "name: agentplane-nats", "namespace: messaging", "port: 4222"}, []string{"kind: Deployment"}},
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

// deployment is the part of a rendered Deployment this package reads.
type deployment struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Template struct {
			Spec corev1.PodSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// documentedFlags reads the generated flag table of a docs page: flag name
// → variable. The table is kept equal to the binary's flags by each
// service's own test, so it stands for the binary here.
func documentedFlags(t *testing.T, page string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, servicetest.BeginMarker), strings.Index(doc, servicetest.EndMarker)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated flag table", page)
	}
	flags := map[string]string{}
	for _, line := range strings.Split(doc[i:j], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`--") {
			continue
		}
		flags[strings.Trim(strings.TrimSpace(cells[1]), "`-")] = strings.Trim(strings.TrimSpace(cells[2]), "`")
	}
	return flags
}

// TestTheInstallSetsOnlyWhatTheBinariesRead: every variable and argument
// the install gives a binary is one of its flags, so a renamed flag cannot
// leave a Deployment setting a variable nothing reads any more.
func TestTheInstallSetsOnlyWhatTheBinariesRead(t *testing.T) {
	rendered := map[string]deployment{}
	for _, d := range renderedDeployments(t) {
		rendered[d.Metadata.Name] = d
	}
	for _, tc := range []struct{ deployment, container, page string }{
		{"agent-controller", "controller", "../../docs/agent-controller.md"},
		{"omnia-controllers", "controllers", "../../docs/omnia-controllers.md"},
	} {
		t.Run(tc.deployment, func(t *testing.T) {
			flags := documentedFlags(t, tc.page)
			vars := map[string]bool{}
			for _, v := range flags {
				vars[v] = true
			}
			d, ok := rendered[tc.deployment]
			if !ok {
				t.Fatalf("the install renders no Deployment %s", tc.deployment)
			}
			found := false
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name != tc.container {
					continue
				}
				found = true
				for _, e := range c.Env {
					if !vars[e.Name] {
						t.Errorf("the install sets %s, which %s does not read (%s)", e.Name, tc.deployment, tc.page)
					}
				}
				for _, a := range c.Args {
					name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
					if _, ok := flags[name]; !ok || !strings.HasPrefix(a, "--") {
						t.Errorf("the install passes %q, which is not a flag of %s", a, tc.deployment)
					}
				}
				for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
					if p == nil || p.HTTPGet == nil {
						t.Errorf("%s: every probe is an HTTP GET of the probe port", tc.deployment)
						continue
					}
					port := p.HTTPGet.Port.IntValue()
					for _, cp := range c.Ports {
						if cp.Name == p.HTTPGet.Port.String() {
							port = int(cp.ContainerPort)
						}
					}
					if port != 8081 {
						t.Errorf("%s: %s is probed on port %d, not on --health-probe-bind-address's :8081", tc.deployment, p.HTTPGet.Path, port)
					}
				}
			}
			if !found {
				t.Fatalf("Deployment %s has no container %s", tc.deployment, tc.container)
			}
		})
	}
}

// The kustomize install runs the images `make images` builds:
// agentplane/<service>:<VERSION>, the supervisor's included, so that one
// tree's manifests, charts and images name the same release.
func TestTheInstallRunsThisReleasesImages(t *testing.T) {
	raw, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(raw))
	seen := 0
	for _, d := range renderedDeployments(t) {
		for _, c := range d.Spec.Template.Spec.Containers {
			seen++
			if want := "agentplane/" + d.Metadata.Name + ":" + version; c.Image != want {
				t.Errorf("Deployment %s runs %s, want %s", d.Metadata.Name, c.Image, want)
			}
			for _, e := range c.Env {
				if want := "agentplane/supervisor:" + version; e.Name == "SUPERVISOR_IMAGE" && e.Value != want {
					t.Errorf("Deployment %s hands runs the supervisor %s, want %s", d.Metadata.Name, e.Value, want)
				}
			}
		}
	}
	if seen < 4 {
		t.Fatalf("only %d containers rendered; want the four services", seen)
	}
}
