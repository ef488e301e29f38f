package agentruntime

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestDeploymentDrifted: a Deployment as the API server stores it (the
// desired one plus defaults and other actors' additions) has not drifted;
// an edit of a field the controller owns has.
func TestDeploymentDrifted(t *testing.T) {
	in := inputs(agentSpec(withVolumes), []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}, readyProvider(nil))
	want := mustBuild(t, in, Config{})
	// stored plays the API server: it fills in defaults the controller
	// leaves unset.
	stored := func(mut func(*appsv1.Deployment)) *appsv1.Deployment {
		d := want.DeepCopy()
		p := &d.Spec.Template.Spec
		p.RestartPolicy, p.DNSPolicy, p.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, corev1.DefaultSchedulerName
		if p.TerminationGracePeriodSeconds == nil {
			p.TerminationGracePeriodSeconds = ptr(int64(30))
		}
		for i := range p.Containers {
			c := &p.Containers[i]
			c.TerminationMessagePath, c.TerminationMessagePolicy = "/dev/termination-log", corev1.TerminationMessageReadFile
			for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
				if pr == nil {
					continue
				}
				pr.TimeoutSeconds, pr.SuccessThreshold, pr.FailureThreshold = 1, 1, 3
				if pr.HTTPGet != nil {
					pr.HTTPGet.Scheme = corev1.URISchemeHTTP
				}
			}
			if ps := c.Lifecycle; ps != nil && ps.PreStop != nil && ps.PreStop.HTTPGet != nil {
				ps.PreStop.HTTPGet.Scheme = corev1.URISchemeHTTP
			}
		}
		for i := range p.Volumes {
			if cm := p.Volumes[i].ConfigMap; cm != nil {
				cm.DefaultMode = ptr(int32(0o644))
			}
		}
		d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "3"}
		d.Labels["team"] = "support"
		if mut != nil {
			mut(d)
		}
		return d
	}
	cases := []struct {
		name     string
		live     *appsv1.Deployment
		replicas *int32
		want     bool
	}{
		{"as stored, with the API server's defaults: no drift", stored(nil), nil, false},
		{"another actor's template annotation (kubectl rollout restart): no drift", stored(func(d *appsv1.Deployment) {
			d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-11-29T12:00:00Z"
		}), nil, false},
		{"the image edited: drift", stored(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "other:1" }), nil, true},
		{"an environment variable added: drift", stored(func(d *appsv1.Deployment) {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "DEBUG", Value: "1"})
		}), nil, true},
		{"an environment variable removed: drift", stored(func(d *appsv1.Deployment) {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = c.Env[1:]
		}), nil, true},
		{"a sidecar container added: drift", stored(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "sidecar", Image: "side:1"})
		}), nil, true},
		{"a volume removed: drift", stored(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes = d.Spec.Template.Spec.Volumes[:1]
		}), nil, true},
		{"the volume size edited: drift", stored(func(d *appsv1.Deployment) {
			for i := range d.Spec.Template.Spec.Volumes {
				if v := &d.Spec.Template.Spec.Volumes[i]; v.EmptyDir != nil {
					v.EmptyDir.SizeLimit = ptr(resource.MustParse("1Gi"))
				}
			}
		}), nil, true},
		{"a pod label the controller sets edited: drift", stored(func(d *appsv1.Deployment) { d.Spec.Template.Labels[omniav1.LabelMode] = "other" }), nil, true},
		{"an object label the controller sets removed: drift", stored(func(d *appsv1.Deployment) { delete(d.Labels, LabelManagedBy) }), nil, true},
		{"replicas scaled by hand while the controller owns the count: drift", stored(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(5)) }), ptr(int32(1)), true},
		{"replicas moved by an autoscaler (no count to write): no drift", stored(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr(int32(5)) }), nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := deploymentDrifted(want, tc.live, tc.replicas); got != tc.want {
				t.Fatalf("deploymentDrifted = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestServiceDrifted: the selector is compared exactly, ports and labels
// as far as the controller sets them.
func TestServiceDrifted(t *testing.T) {
	want := BuildService(agentSpec(nil))
	stored := func(mut func(*corev1.Service)) *corev1.Service {
		s := want.DeepCopy()
		s.Spec.ClusterIP, s.Spec.SessionAffinity = "10.0.0.7", corev1.ServiceAffinityNone
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		if mut != nil {
			mut(s)
		}
		return s
	}
	cases := []struct {
		name string
		live *corev1.Service
		want bool
	}{
		{"as stored, with the API server's defaults: no drift", stored(nil), false},
		{"a selector key added: drift", stored(func(s *corev1.Service) { s.Spec.Selector["extra"] = "x" }), true},
		{"a selector key removed: drift", stored(func(s *corev1.Service) { delete(s.Spec.Selector, LabelInstance) }), true},
		{"the port edited: drift", stored(func(s *corev1.Service) { s.Spec.Ports[0].Port = 9999 }), true},
		{"a port added: drift", stored(func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "debug", Port: 7000})
		}), true},
		{"the type edited: drift", stored(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := serviceDrifted(want, tc.live); got != tc.want {
				t.Fatalf("serviceDrifted = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHPADrifted: the HPA's spec is the controller's; the API server's
// defaults in it are not drift.
func TestHPADrifted(t *testing.T) {
	a := agentSpec(func(a *omniav1.AgentRuntime) {
		a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MaxReplicas: ptr(int32(5))}}
	})
	want := BuildHPA(Inputs{Agent: a})
	stored := func(mut func(*autoscalingv2.HorizontalPodAutoscaler)) *autoscalingv2.HorizontalPodAutoscaler {
		h := want.DeepCopy()
		h.Spec.Behavior.ScaleUp = &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr(int32(0)), SelectPolicy: ptr(autoscalingv2.MaxChangePolicySelect)}
		h.Spec.Behavior.ScaleDown.SelectPolicy = ptr(autoscalingv2.MaxChangePolicySelect)
		if mut != nil {
			mut(h)
		}
		return h
	}
	cases := []struct {
		name string
		live *autoscalingv2.HorizontalPodAutoscaler
		want bool
	}{
		{"as stored, with the API server's defaults: no drift", stored(nil), false},
		{"maxReplicas edited: drift", stored(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MaxReplicas = 50 }), true},
		{"a metric removed: drift", stored(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics = h.Spec.Metrics[:1] }), true},
		{"the scale target edited: drift", stored(func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.ScaleTargetRef.Name = "other" }), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := hpaDrifted(want, tc.live); got != tc.want {
				t.Fatalf("hpaDrifted = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReplicasToWrite: the controller writes the count it owns, leaves an
// autoscaler's alone, and raises an autoscaled Deployment found at zero
// (left there by the idle deadline) to the autoscaler's floor, since an
// HPA never scales a target up from zero; KEDA does, so its floor of zero
// leaves zero alone.
func TestReplicasToWrite(t *testing.T) {
	cases := []struct {
		name    string
		desired *int32
		live    *int32
		floor   int32
		want    *int32
	}{
		{"the controller owns the count: the desired count", ptr(int32(2)), ptr(int32(5)), 3, ptr(int32(2))},
		{"the idle deadline holds the agent at zero: zero", ptr(int32(0)), ptr(int32(3)), 3, ptr(int32(0))},
		{"autoscaled: the autoscaler's count stands", nil, ptr(int32(4)), 3, nil},
		{"autoscaled and found at zero (woken): the HPA's minReplicas", nil, ptr(int32(0)), 3, ptr(int32(3))},
		{"autoscaled by KEDA with minReplicaCount 0 and found at zero: KEDA's zero stands", nil, ptr(int32(0)), 0, nil},
		{"autoscaled with no count stored: nothing to write", nil, nil, 3, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := replicasToWrite(tc.desired, tc.live, tc.floor)
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("replicasToWrite = %v, want %v", deref(got), deref(tc.want))
			}
		})
	}
}

// TestAutoscalerFloor: an autoscaled agent restarts from its HPA's
// minReplicas (the Workspace's when the agent sets none), else one.
func TestAutoscalerFloor(t *testing.T) {
	hpa := func(min *int32) func(*omniav1.AgentRuntime) {
		return func(a *omniav1.AgentRuntime) {
			a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MinReplicas: min}}
		}
	}
	ws := testWorkspace(func(w *omniav1.Workspace) {
		w.Spec.Services = []omniav1.WorkspaceServiceGroup{{Name: omniav1.DefaultServiceGroup,
			Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MinReplicas: ptr(int32(2))}}}
	})
	cases := []struct {
		name string
		in   Inputs
		want int32
	}{
		{"the agent's HPA minReplicas", Inputs{Agent: agentSpec(hpa(ptr(int32(3))))}, 3},
		{"an HPA without minReplicas: one", Inputs{Agent: agentSpec(hpa(nil))}, 1},
		{"the Workspace group's HPA minReplicas", Inputs{Agent: agentSpec(nil), Workspace: ws}, 2},
		{"keda (no HPA) without minReplicas: one", Inputs{Agent: agentSpec(func(a *omniav1.AgentRuntime) {
			a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, Type: omniav1.AutoscalerKEDA}}
		})}, 1},
		{"keda: its minReplicaCount, zero included", Inputs{Agent: agentSpec(func(a *omniav1.AgentRuntime) {
			a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, Type: omniav1.AutoscalerKEDA, MinReplicas: ptr(int32(0))}}
		})}, 0},
		{"not autoscaled: one", Inputs{Agent: agentSpec(nil)}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := autoscalerFloor(tc.in); got != tc.want {
				t.Fatalf("autoscalerFloor = %d, want %d", got, tc.want)
			}
		})
	}
}

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}
