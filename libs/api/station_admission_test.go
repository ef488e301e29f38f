package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// station is a Station whose template holds the agent, a sidecar and an
// init container, for a case to arm.
func station(name string) *agentsv1alpha1.Station {
	return &agentsv1alpha1.Station{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: "def", Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "prepare", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "agent", Image: "runner"}, {Name: "proxy", Image: "proxy"}},
		}}},
	}
}

func sc(c *corev1.Container) *corev1.SecurityContext {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	return c.SecurityContext
}

// TestStationPodSecurityAdmission attacks admission with Stations whose
// pod template breaks a Pod Security rule that holds at every level the
// controller runs with: each must be refused with a message naming the
// field. Each attack's harmless twin (the same field, off) is admitted, so
// no rule refuses more than it says.
func TestStationPodSecurityAdmission(t *testing.T) {
	hostPath := corev1.Volume{Name: "node", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}
	token := corev1.Volume{Name: "kube-api", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}
	configMap := corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}}}}
	cases := []struct {
		rule   string
		attack func(*corev1.PodSpec)
		twin   func(*corev1.PodSpec)
		want   string
	}{
		{"hostNetwork", func(p *corev1.PodSpec) { p.HostNetwork = true }, func(p *corev1.PodSpec) { p.HostNetwork = false },
			"spec.template.spec.hostNetwork must not be true"},
		{"hostPID", func(p *corev1.PodSpec) { p.HostPID = true }, func(p *corev1.PodSpec) { p.HostPID = false },
			"spec.template.spec.hostPID must not be true"},
		{"hostIPC", func(p *corev1.PodSpec) { p.HostIPC = true }, func(p *corev1.PodSpec) { p.HostIPC = false },
			"spec.template.spec.hostIPC must not be true"},
		{"shareProcessNamespace", func(p *corev1.PodSpec) { p.ShareProcessNamespace = ptr.To(true) }, func(p *corev1.PodSpec) { p.ShareProcessNamespace = ptr.To(false) },
			"spec.template.spec.shareProcessNamespace must not be true"},
		{"automountServiceAccountToken", func(p *corev1.PodSpec) { p.AutomountServiceAccountToken = ptr.To(true) },
			func(p *corev1.PodSpec) { p.AutomountServiceAccountToken = ptr.To(false) },
			"spec.template.spec.automountServiceAccountToken must not be true"},
		{"hostPath volumes", func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{hostPath} },
			func(p *corev1.PodSpec) {
				p.Volumes = []corev1.Volume{{Name: "node", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			},
			"spec.template.spec.volumes[*].hostPath must not be set"},
		{"projected service account token", func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMap, token} },
			func(p *corev1.PodSpec) { p.Volumes = []corev1.Volume{configMap} },
			"spec.template.spec.volumes[*].projected.sources[*].serviceAccountToken must not be set"},
		{"privileged container", func(p *corev1.PodSpec) { sc(&p.Containers[1]).Privileged = ptr.To(true) },
			func(p *corev1.PodSpec) { sc(&p.Containers[1]).Privileged = ptr.To(false) },
			"spec.template.spec.containers[*].securityContext.privileged must not be true"},
		{"privileged init container", func(p *corev1.PodSpec) { sc(&p.InitContainers[0]).Privileged = ptr.To(true) },
			func(p *corev1.PodSpec) { sc(&p.InitContainers[0]).Privileged = ptr.To(false) },
			"spec.template.spec.initContainers[*].securityContext.privileged must not be true"},
		{"hostPort", func(p *corev1.PodSpec) {
			p.Containers[1].Ports = []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 8080, HostPort: 8080}}
		}, func(p *corev1.PodSpec) { p.Containers[1].Ports = []corev1.ContainerPort{{ContainerPort: 8080}} },
			"spec.template.spec.containers[*].ports[*].hostPort must not be set"},
		{"hostPort of an init container", func(p *corev1.PodSpec) {
			p.InitContainers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
		}, func(p *corev1.PodSpec) { p.InitContainers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080}} },
			"spec.template.spec.initContainers[*].ports[*].hostPort must not be set"},
		{"seccomp Unconfined for the pod", func(p *corev1.PodSpec) {
			p.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}}
		}, func(p *corev1.PodSpec) {
			p.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		}, "spec.template.spec.securityContext.seccompProfile.type must not be Unconfined"},
		{"seccomp Unconfined for a container", func(p *corev1.PodSpec) {
			sc(&p.Containers[1]).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, func(p *corev1.PodSpec) {
			sc(&p.Containers[1]).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}, "spec.template.spec.containers[*].securityContext.seccompProfile.type must not be Unconfined"},
		{"seccomp Unconfined for an init container", func(p *corev1.PodSpec) {
			sc(&p.InitContainers[0]).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, func(p *corev1.PodSpec) {
			sc(&p.InitContainers[0]).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		}, "spec.template.spec.initContainers[*].securityContext.seccompProfile.type must not be Unconfined"},
		{"AppArmor unconfined for the pod", func(p *corev1.PodSpec) {
			p.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
		}, func(p *corev1.PodSpec) {
			p.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}}
		}, "spec.template.spec.securityContext.appArmorProfile.type must not be Unconfined"},
		{"AppArmor unconfined for a container", func(p *corev1.PodSpec) {
			sc(&p.Containers[1]).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, func(p *corev1.PodSpec) {
			sc(&p.Containers[1]).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
		}, "spec.template.spec.containers[*].securityContext.appArmorProfile.type must not be Unconfined"},
		{"AppArmor unconfined for an init container", func(p *corev1.PodSpec) {
			sc(&p.InitContainers[0]).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, func(p *corev1.PodSpec) {
			sc(&p.InitContainers[0]).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
		}, "spec.template.spec.initContainers[*].securityContext.appArmorProfile.type must not be Unconfined"},
		{"more containers than admission can price", func(p *corev1.PodSpec) {
			for i := len(p.Containers); i <= 64; i++ {
				p.Containers = append(p.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "x"})
			}
		}, func(p *corev1.PodSpec) {
			for i := len(p.Containers); i < 64; i++ {
				p.Containers = append(p.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: "x"})
			}
		}, "spec.template.spec.containers: Too many: 65: must have at most 64 items"},
	}
	ns := env.Namespace(t)
	ctx := context.Background()
	for i, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			attack := station(fmt.Sprintf("attack-%d", i))
			attack.Namespace = ns
			c.attack(&attack.Spec.Template.Spec)
			err := env.Client.Create(ctx, attack)
			if err == nil {
				t.Fatalf("admission accepted the attack")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("refused for the wrong reason: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("the refusal does not name the field %q:\n%v", c.want, err)
			}
			twin := station(fmt.Sprintf("twin-%d", i))
			twin.Namespace = ns
			c.twin(&twin.Spec.Template.Spec)
			if err := env.Client.Create(ctx, twin, strict); err != nil {
				t.Errorf("the harmless twin was refused: %v", err)
			}
		})
	}
}

// TestAStationWithEveryPodSecurityRuleArmedNamesEachField: one Station
// breaking several rules at once hears of each.
func TestAStationWithEveryPodSecurityRuleArmedNamesEachField(t *testing.T) {
	st := station("all")
	st.Namespace = env.Namespace(t)
	p := &st.Spec.Template.Spec
	p.HostNetwork, p.HostPID = true, true
	sc(&p.Containers[1]).Privileged = ptr.To(true)
	err := env.Client.Create(context.Background(), st)
	for _, w := range []string{"spec.template.spec.hostNetwork", "spec.template.spec.hostPID", "spec.template.spec.containers[*].securityContext.privileged"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal does not name %s: %v", w, err)
		}
	}
}
