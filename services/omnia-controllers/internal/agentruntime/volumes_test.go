package agentruntime

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

func rawVolume(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

// withVolumes gives an agent a cache volume under spec.runtime and a
// settings volume under spec.podOverrides, each mounted.
func withVolumes(a *omniav1.AgentRuntime) {
	a.Spec.Runtime = &omniav1.RuntimeConfig{
		Volumes:      []apiextensionsv1.JSON{rawVolume(`{"name":"cache","emptyDir":{"sizeLimit":"64Mi"}}`)},
		VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
	}
	a.Spec.PodOverrides = &omniav1.PodOverrides{
		ExtraVolumes:      []apiextensionsv1.JSON{rawVolume(`{"name":"settings","configMap":{"name":"agent-settings"}}`)},
		ExtraVolumeMounts: []corev1.VolumeMount{{Name: "settings", MountPath: "/etc/settings", ReadOnly: true}},
	}
}

// TestPodVolumes: the agent's volumes go into the pod next to the
// operator's pack volume, and a spec the API server would refuse is
// refused here with the spec field named.
func TestPodVolumes(t *testing.T) {
	packs := []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}
	cases := []struct {
		name    string
		mut     func(*omniav1.AgentRuntime)
		live    bool     // a live pack: no operator volume
		want    []string // volume names, in order
		wantErr string
	}{
		{"no agent volumes: the pack volume only", nil, false, []string{PackVolumeName}, ""},
		{"runtime and podOverrides volumes follow the pack volume", withVolumes, false, []string{PackVolumeName, "cache", "settings"}, ""},
		{"a live pack has no pack volume", withVolumes, true, []string{"cache", "settings"}, ""},
		{"an unknown field in a volume is refused", func(a *omniav1.AgentRuntime) {
			withVolumes(a)
			a.Spec.Runtime.Volumes[0] = rawVolume(`{"name":"cache","emptyDirr":{}}`)
		}, false, nil, "runtime.volumes[0]"},
		{"a volume without a name is refused", func(a *omniav1.AgentRuntime) {
			withVolumes(a)
			a.Spec.PodOverrides.ExtraVolumes[0] = rawVolume(`{"emptyDir":{}}`)
		}, false, nil, "podOverrides.extraVolumes[0]: name is required"},
		{"a volume name must be an RFC 1123 label", func(a *omniav1.AgentRuntime) {
			withVolumes(a)
			a.Spec.Runtime.Volumes[0] = rawVolume(`{"name":"Cache_Dir","emptyDir":{}}`)
			a.Spec.Runtime.VolumeMounts[0].Name = "Cache_Dir"
		}, false, nil, `runtime.volumes[0]: name "Cache_Dir"`},
		{"the pack volume's name is reserved, even for a live pack", func(a *omniav1.AgentRuntime) {
			withVolumes(a)
			a.Spec.Runtime.Volumes[0] = rawVolume(`{"name":"promptpack","emptyDir":{}}`)
		}, true, nil, `runtime.volumes[0]: name "promptpack" is reserved`},
		{"two volumes may not share a name", func(a *omniav1.AgentRuntime) {
			withVolumes(a)
			a.Spec.PodOverrides.ExtraVolumes[0] = rawVolume(`{"name":"cache","emptyDir":{}}`)
		}, false, nil, `podOverrides.extraVolumes[0]: name "cache" is already used by runtime.volumes[0]`},
		{"a mount must name a volume of the pod", func(a *omniav1.AgentRuntime) {
			withVolumes(a)
			a.Spec.PodOverrides.ExtraVolumeMounts[0].Name = "absent"
		}, false, nil, `podOverrides.extraVolumeMounts[0]: mounts volume "absent"`},
		{"a runtime mount may name an extra volume", func(a *omniav1.AgentRuntime) {
			withVolumes(a)
			a.Spec.Runtime.VolumeMounts = append(a.Spec.Runtime.VolumeMounts, corev1.VolumeMount{Name: "settings", MountPath: "/settings"})
		}, false, []string{PackVolumeName, "cache", "settings"}, ""},
		{"mounting the pack volume of a live pack is refused", func(a *omniav1.AgentRuntime) {
			a.Spec.Runtime = &omniav1.RuntimeConfig{VolumeMounts: []corev1.VolumeMount{{Name: PackVolumeName, MountPath: "/pack"}}}
		}, true, nil, `runtime.volumeMounts[0]: mounts volume "promptpack"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := packs
			if tc.live {
				ps = []omniav1.PromptPack{livePack()}
			}
			in := inputs(agentSpec(tc.mut), ps, readyProvider(nil))
			d, err := BuildDeployment(in, resolved(t, in), Config{FacadeImage: "facade:1"}, "runtime:1")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range d.Spec.Template.Spec.Volumes {
				got = append(got, v.Name)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("volumes %v, want %v", got, tc.want)
			}
		})
	}
}

// TestVolumesReachTheDeployment: an agent with spec.runtime.volumes and
// spec.podOverrides.extraVolumes, each mounted, gets a Deployment the API
// server accepts, holding those volumes; an agent whose mount names no
// volume is Failed with VolumesInvalid naming the field, and no Deployment.
func TestVolumesReachTheDeployment(t *testing.T) {
	ns := env.Namespace(t)
	startAll(t)
	ctx := context.Background()
	createWithInputs(t, ns, newAgent(ns, "agent", withVolumes),
		newAgent(ns, "broken", func(a *omniav1.AgentRuntime) {
			withVolumes(a)
			a.Spec.Runtime.VolumeMounts[0].Name = "absent"
		}))
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionDeploymentReady, omniav1.ReasonDeploymentCreated))
	dep := ctrltest.Get[appsv1.Deployment](t, env, types.NamespacedName{Namespace: ns, Name: "agent"})
	vols := map[string]corev1.Volume{}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	if v := vols["cache"]; v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "64Mi" {
		t.Errorf("cache volume %+v", v)
	}
	if v := vols["settings"]; v.ConfigMap == nil || v.ConfigMap.Name != "agent-settings" {
		t.Errorf("settings volume %+v", v)
	}
	mounts := map[string]string{}
	for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["cache"] != "/cache" || mounts["settings"] != "/etc/settings" {
		t.Errorf("mounts %v", mounts)
	}

	ctrltest.Eventually(t, wait, agentIs(ns, "broken", omniav1.AgentRuntimePhaseFailed, omniav1.ConditionDeploymentReady, omniav1.ReasonVolumesInvalid))
	ctrltest.Eventually(t, wait, func() error {
		a := mustAgent(t, ns, "broken")
		for _, c := range a.Status.Conditions {
			if c.Type == omniav1.ConditionDeploymentReady && strings.Contains(c.Message, "runtime.volumeMounts[0]") {
				return nil
			}
		}
		return fmt.Errorf("DeploymentReady does not name runtime.volumeMounts[0]: %+v", a.Status.Conditions)
	})
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "broken"}, &appsv1.Deployment{}); err == nil {
		t.Fatal("a Deployment was built for an agent whose mount names no volume")
	}
}
