package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/tools/helmchart"
)

// TestTheChartValuesInstallThePlatformFromItsImages renders the umbrella
// chart with the demo's values, through the chart's values schema, and
// checks what the demo relies on in the manifests.
func TestTheChartValuesInstallThePlatformFromItsImages(t *testing.T) {
	ch, err := helmchart.LoadUmbrella(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.Marshal(chartValues("9.9.9", "http://fakevendor.vendors.svc:8089"))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := helmchart.Render(ch, releaseName, platformNS, "v1.36.3", string(raw))
	if err != nil {
		t.Fatalf("the chart refuses the demo's values: %v", err)
	}
	deps := map[string]appsv1.Deployment{}
	for _, d := range docs {
		var dep appsv1.Deployment
		if yaml.Unmarshal([]byte(d), &dep) == nil && dep.Kind == "Deployment" {
			deps[dep.Name] = dep
		}
	}
	args := func(name string) string {
		return strings.Join(deps[name].Spec.Template.Spec.Containers[0].Args, " ")
	}
	cases := []struct {
		rule string
		ok   func() bool
	}{
		{"every component is installed", func() bool {
			for _, d := range platformDeployments {
				if _, ok := deps[d]; !ok {
					return false
				}
			}
			return len(deps) == len(platformDeployments)
		}},
		{"each service runs its image of the version, never pulled, one replica", func() bool {
			for _, d := range platformDeployments {
				c := deps[d].Spec.Template.Spec.Containers[0]
				if c.Image != "agentplane/"+d+":9.9.9" || c.ImagePullPolicy != "Never" || *deps[d].Spec.Replicas != 1 {
					return false
				}
			}
			return true
		}},
		{"the services reach NATS by its Service's name", func() bool {
			return strings.Contains(args("agent-controller"), "nats://nats.agentplane-system.svc:4222") &&
				strings.Contains(args("batch-poller"), "nats://nats.agentplane-system.svc:4222")
		}},
		{"batch-poller calls fakevendor's Service", func() bool {
			return strings.Contains(args("batch-poller"), "http://fakevendor.vendors.svc:8089/v1/")
		}},
		{"Omnia agent pods run mockagent's runtime stand-in from its image on the pod's address", func() bool {
			a := args("omnia-controllers")
			return strings.Contains(a, "agentplane/mockagent:9.9.9") && strings.Contains(a, "/usr/local/bin/mockagent,omnia-runtime,--addr=:9000") &&
				strings.Contains(a, "--provider-credential-probe=false")
		}},
		{"Omnia agent pods run mockagent's facade stand-in from its image on the pod's address", func() bool {
			a := args("omnia-controllers")
			return strings.Contains(a, "--facade-image=agentplane/mockagent:9.9.9") && strings.Contains(a, "/usr/local/bin/mockagent,omnia-facade,--host=")
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if !c.ok() {
				t.Errorf("not so in the rendered chart; Deployments' args: %v", func() map[string]string {
					m := map[string]string{}
					for n := range deps {
						m[n] = args(n)
					}
					return m
				}())
			}
		})
	}
}

// TestAMissingImageIsNamedWithTheRemedy: the demo refuses to start when
// the image store lacks an image it runs, naming it and `make images`.
func TestAMissingImageIsNamedWithTheRemedy(t *testing.T) {
	dir := t.TempDir()
	for _, n := range images {
		if n != "nats" {
			if err := os.WriteFile(filepath.Join(dir, n+"-1.0.0.tar"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		rule, version string
		want          []string // empty: no error
	}{
		{"a missing image is named with make images", "1.0.0", []string{"agentplane/nats:1.0.0", "make images"}},
		{"another version's images do not count", "2.0.0", []string{"agentplane/agent-controller:2.0.0"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			err := checkImages(dir, c.version)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if err := os.WriteFile(filepath.Join(dir, "nats-1.0.0.tar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkImages(dir, "1.0.0"); err != nil {
		t.Errorf("every image is there: %v", err)
	}
}

// TestADeploymentIsReadyWhenItsCurrentTemplateIs: the wait for a
// Deployment ends only when every replica of its current template is
// ready, and says where it stands meanwhile.
func TestADeploymentIsReadyWhenItsCurrentTemplateIs(t *testing.T) {
	two := int32(2)
	dep := func(gen, observed int64, replicas, updated, ready int32) *appsv1.Deployment {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &two}}
		d.Generation = gen
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready}
		return d
	}
	cases := []struct {
		rule  string
		d     *appsv1.Deployment
		ready bool
	}{
		{"all replicas of the current template ready", dep(1, 1, 2, 2, 2), true},
		{"a replica not ready yet", dep(1, 1, 2, 2, 1), false},
		{"the controller has not seen the latest spec", dep(2, 1, 2, 2, 2), false},
		{"an old replica still runs beside the new ones", dep(1, 1, 3, 2, 3), false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			err := deploymentReady(c.d)
			if (err == nil) != c.ready {
				t.Errorf("ready %v (%v), want %v", err == nil, err, c.ready)
			}
		})
	}
}
