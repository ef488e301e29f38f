package agentruntime

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

func testWorkspace(mut func(*omniav1.Workspace)) *omniav1.Workspace {
	w := &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "team", Generation: 1},
		Spec: omniav1.WorkspaceSpec{Namespace: omniav1.WorkspaceNamespace{Name: "ns"}}}
	if mut != nil {
		mut(w)
	}
	return w
}

func podOf(t *testing.T, in Inputs) corev1.PodTemplateSpec {
	t.Helper()
	return mustBuild(t, in, Config{}).Spec.Template
}

func envValue(p corev1.PodTemplateSpec, name string) (string, bool) {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// TestWorkspacePodDefaults: the namespace's Workspace names itself to the
// runtime and lays its pod defaults under the agent's own settings.
func TestWorkspacePodDefaults(t *testing.T) {
	packs := []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}
	wsDefaults := testWorkspace(func(w *omniav1.Workspace) {
		w.Spec.Runtime = &omniav1.WorkspaceRuntime{ServiceAccountName: "team-sa",
			PodLabels:      map[string]string{"cost-center": "ws", "tier": "ws", LabelInstance: "hijack", omniav1.LabelMode: "hijack"},
			PodAnnotations: map[string]string{"note": "ws", "owner": "ws", omniav1.AnnotationConfigHash: "hijack"}}
	})
	cases := []struct {
		name  string
		agent func(*omniav1.AgentRuntime)
		ws    *omniav1.Workspace
		check func(t *testing.T, p corev1.PodTemplateSpec)
	}{
		{"no Workspace: no OMNIA_WORKSPACE_NAME and the facade's service account", nil, nil,
			func(t *testing.T, p corev1.PodTemplateSpec) {
				if v, ok := envValue(p, "OMNIA_WORKSPACE_NAME"); ok {
					t.Fatalf("OMNIA_WORKSPACE_NAME=%q without a Workspace", v)
				}
				if p.Spec.ServiceAccountName != "agent-facade" {
					t.Fatalf("service account %q", p.Spec.ServiceAccountName)
				}
			}},
		{"a Workspace owns the namespace: the pods carry OMNIA_WORKSPACE_NAME", nil, testWorkspace(nil),
			func(t *testing.T, p corev1.PodTemplateSpec) {
				if v, _ := envValue(p, "OMNIA_WORKSPACE_NAME"); v != "team" {
					t.Fatalf("OMNIA_WORKSPACE_NAME=%q, want team", v)
				}
			}},
		{"the Workspace service account applies when podOverrides names none", nil, wsDefaults,
			func(t *testing.T, p corev1.PodTemplateSpec) {
				if p.Spec.ServiceAccountName != "team-sa" {
					t.Fatalf("service account %q, want team-sa", p.Spec.ServiceAccountName)
				}
			}},
		{"podOverrides SA wins over the Workspace SA", func(a *omniav1.AgentRuntime) {
			a.Spec.PodOverrides = &omniav1.PodOverrides{ServiceAccountName: "agent-sa"}
		}, wsDefaults, func(t *testing.T, p corev1.PodTemplateSpec) {
			if p.Spec.ServiceAccountName != "agent-sa" {
				t.Fatalf("service account %q, want agent-sa", p.Spec.ServiceAccountName)
			}
		}},
		{"podOverrides without an SA keeps the Workspace SA", func(a *omniav1.AgentRuntime) {
			a.Spec.PodOverrides = &omniav1.PodOverrides{PriorityClassName: "high"}
		}, wsDefaults, func(t *testing.T, p corev1.PodTemplateSpec) {
			if p.Spec.ServiceAccountName != "team-sa" {
				t.Fatalf("service account %q, want team-sa", p.Spec.ServiceAccountName)
			}
		}},
		{"Workspace pod labels are added and the agent's podOverrides labels win on the same key", func(a *omniav1.AgentRuntime) {
			a.Spec.PodOverrides = &omniav1.PodOverrides{Labels: map[string]string{"tier": "agent"}}
		}, wsDefaults, func(t *testing.T, p corev1.PodTemplateSpec) {
			if l := p.Labels; l["cost-center"] != "ws" || l["tier"] != "agent" {
				t.Fatalf("labels %v", l)
			}
		}},
		{"a Workspace cannot override the selector or mode labels", nil, wsDefaults,
			func(t *testing.T, p corev1.PodTemplateSpec) {
				if l := p.Labels; l[LabelInstance] != "agent" || l[omniav1.LabelMode] != string(omniav1.AgentModeAgent) {
					t.Fatalf("labels %v", l)
				}
			}},
		{"Workspace pod annotations are added and the agent's annotations win on the same key", func(a *omniav1.AgentRuntime) {
			a.Spec.ExtraPodAnnotations = map[string]string{"owner": "agent-extra"}
			a.Spec.PodOverrides = &omniav1.PodOverrides{Annotations: map[string]string{"note": "agent-po"}}
		}, wsDefaults, func(t *testing.T, p corev1.PodTemplateSpec) {
			if an := p.Annotations; an["owner"] != "agent-extra" || an["note"] != "agent-po" {
				t.Fatalf("annotations %v", an)
			}
		}},
		{"the pods ask to be scraped on the facade's health port, where the KEDA trigger's series is", nil, nil,
			func(t *testing.T, p corev1.PodTemplateSpec) {
				an := p.Annotations
				if an["prometheus.io/scrape"] != "true" || an["prometheus.io/port"] != "8081" || an["prometheus.io/path"] != "/metrics" {
					t.Fatalf("annotations %v", an)
				}
			}},
		{"an agent's annotations replace the scrape defaults", func(a *omniav1.AgentRuntime) {
			a.Spec.ExtraPodAnnotations = map[string]string{"prometheus.io/scrape": "false"}
		}, wsDefaults, func(t *testing.T, p corev1.PodTemplateSpec) {
			if v := p.Annotations["prometheus.io/scrape"]; v != "false" {
				t.Fatalf("prometheus.io/scrape=%q, want the agent's false", v)
			}
		}},
		{"a Workspace cannot override the config hash", nil, wsDefaults,
			func(t *testing.T, p corev1.PodTemplateSpec) {
				if h := p.Annotations[omniav1.AnnotationConfigHash]; h == "hijack" || h == "" {
					t.Fatalf("config hash %q", h)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := inputs(agentSpec(tc.agent), packs, readyProvider(nil))
			in.Workspace = tc.ws
			tc.check(t, podOf(t, in))
		})
	}
}

// TestWorkspaceTemplateInputs: the Workspace's status never reaches the
// pod template (a status write must not roll pods), while each Workspace
// field the pods use does.
func TestWorkspaceTemplateInputs(t *testing.T) {
	packs := []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}
	base := func() Inputs {
		in := inputs(agentSpec(nil), packs, readyProvider(nil))
		in.Workspace = testWorkspace(func(w *omniav1.Workspace) {
			w.Spec.Runtime = &omniav1.WorkspaceRuntime{ServiceAccountName: "sa", PodLabels: map[string]string{"a": "1"}, PodAnnotations: map[string]string{"b": "1"}}
			w.Spec.Services = []omniav1.WorkspaceServiceGroup{{Name: "default"}}
		})
		return in
	}
	hash := func(in Inputs) string { return AppliedHash(podOf(t, in)) }
	ref := hash(base())
	noise := base()
	noise.Workspace.Status = omniav1.WorkspaceStatus{Phase: omniav1.WorkspacePhaseReady, ObservedGeneration: 4,
		Conditions: []metav1.Condition{{Type: omniav1.ConditionNamespaceReady, Status: metav1.ConditionTrue, Reason: omniav1.ReasonNamespaceOwned}}}
	noise.Workspace.Generation, noise.Workspace.ResourceVersion = 4, "99"
	noise.Workspace.Labels = map[string]string{"x": "y"}
	noise.Workspace.Spec.Services[0].Autoscaling = &omniav1.AutoscalingConfig{Enabled: false}
	if hash(noise) != ref {
		t.Fatal("Workspace status, metadata or a disabled group default changed the pod template")
	}
	for name, mut := range map[string]func(*omniav1.Workspace){
		"name":            func(w *omniav1.Workspace) { w.Name = "other" },
		"service account": func(w *omniav1.Workspace) { w.Spec.Runtime.ServiceAccountName = "sa2" },
		"pod labels":      func(w *omniav1.Workspace) { w.Spec.Runtime.PodLabels["a"] = "2" },
		"pod annotations": func(w *omniav1.Workspace) { w.Spec.Runtime.PodAnnotations["b"] = "2" },
	} {
		in := base()
		mut(in.Workspace)
		if hash(in) == ref {
			t.Errorf("Workspace %s changed but the pod template did not", name)
		}
	}
}

// TestEffectiveAutoscaling: the precedence of autoscaling policies — the agent's
// runtime.autoscaling if set, as a unit; else its Workspace service
// group's (spec.serviceGroup, "default" when unset); else none.
func TestEffectiveAutoscaling(t *testing.T) {
	group := func(name string, min, max int32) omniav1.WorkspaceServiceGroup {
		return omniav1.WorkspaceServiceGroup{Name: name, Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MinReplicas: ptr(min), MaxReplicas: ptr(max)}}
	}
	ws := testWorkspace(func(w *omniav1.Workspace) {
		w.Spec.Services = []omniav1.WorkspaceServiceGroup{group("default", 2, 8), group("voice", 3, 30), {Name: "plain"}}
	})
	kedaWS := testWorkspace(func(w *omniav1.Workspace) {
		w.Spec.Services = []omniav1.WorkspaceServiceGroup{{Name: "default", Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, Type: omniav1.AutoscalerKEDA}}}
	})
	cases := []struct {
		name     string
		agent    func(*omniav1.AgentRuntime)
		ws       *omniav1.Workspace
		hpa      [2]int32 // min, max; zero for no HPA
		replicas *int32   // the Deployment's replicas; nil when an autoscaler owns them
	}{
		{"no policy anywhere: no HPA, the agent's replicas", func(a *omniav1.AgentRuntime) {
			a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(2))}
		}, nil, [2]int32{}, ptr(int32(2))},
		{"the service group's autoscaling applies when the agent has none", func(a *omniav1.AgentRuntime) {
			a.Spec.ServiceGroup = "voice"
		}, ws, [2]int32{3, 30}, nil},
		{"an agent without a serviceGroup uses the default group", nil, ws, [2]int32{2, 8}, nil},
		{"a group without autoscaling gives none", func(a *omniav1.AgentRuntime) { a.Spec.ServiceGroup = "plain" }, ws, [2]int32{}, ptr(int32(1))},
		{"a group the Workspace lacks gives none", func(a *omniav1.AgentRuntime) { a.Spec.ServiceGroup = "batch" }, ws, [2]int32{}, ptr(int32(1))},
		{"agent autoscaling wins as a unit over the service group", func(a *omniav1.AgentRuntime) {
			// The group's minReplicas 2 must not fill the agent's gap.
			a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MaxReplicas: ptr(int32(5))}}
		}, ws, [2]int32{1, 5}, nil},
		{"agent autoscaling turned off wins over an enabled service group", func(a *omniav1.AgentRuntime) {
			a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(4)), Autoscaling: &omniav1.AutoscalingConfig{Enabled: false}}
		}, ws, [2]int32{}, ptr(int32(4))},
		{"a keda group default builds no HPA but owns the replicas", nil, kedaWS, [2]int32{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs{Agent: agentSpec(tc.agent), Workspace: tc.ws}
			h := BuildHPA(in)
			switch {
			case tc.hpa == [2]int32{} && h != nil:
				t.Fatalf("HPA %+v, want none", h.Spec)
			case tc.hpa != [2]int32{} && (h == nil || *h.Spec.MinReplicas != tc.hpa[0] || h.Spec.MaxReplicas != tc.hpa[1]):
				t.Fatalf("HPA %+v, want min %d max %d", h, tc.hpa[0], tc.hpa[1])
			}
			got := desiredReplicas(in)
			if (got == nil) != (tc.replicas == nil) || got != nil && *got != *tc.replicas {
				t.Fatalf("replicas %v, want %v", got, tc.replicas)
			}
		})
	}
}

// TestNamespaceWorkspace: which Workspace applies when several name the
// same namespace; the pick must not depend on list order.
func TestNamespaceWorkspace(t *testing.T) {
	at := func(name string, minute int, cond *metav1.Condition) omniav1.Workspace {
		w := omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(minute) * time.Minute))}}
		if cond != nil {
			w.Status.Conditions = []metav1.Condition{*cond}
		}
		return w
	}
	owned := &metav1.Condition{Type: omniav1.ConditionNamespaceReady, Status: metav1.ConditionTrue, Reason: omniav1.ReasonNamespaceOwned}
	refused := &metav1.Condition{Type: omniav1.ConditionNamespaceReady, Status: metav1.ConditionFalse, Reason: omniav1.ReasonNamespaceClaimed}
	terminating := &metav1.Condition{Type: omniav1.ConditionNamespaceReady, Status: metav1.ConditionFalse, Reason: omniav1.ReasonNamespaceTerminating}
	cases := []struct {
		name string
		wss  []omniav1.Workspace
		want string // "" for none
	}{
		{"no Workspace names the namespace: none applies", nil, ""},
		{"the one Workspace naming the namespace applies, reconciled or not", []omniav1.Workspace{at("a", 0, nil)}, "a"},
		{"a Workspace its controller refused never applies", []omniav1.Workspace{at("a", 0, refused)}, ""},
		{"the Workspace holding the namespace wins over an older one not holding it", []omniav1.Workspace{at("old", 0, terminating), at("new", 5, owned)}, "new"},
		{"otherwise the oldest wins", []omniav1.Workspace{at("b", 5, nil), at("a", 9, nil), at("c", 1, nil)}, "c"},
		{"equal ages fall back to the name", []omniav1.Workspace{at("b", 0, nil), at("a", 0, nil)}, "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][]omniav1.Workspace{tc.wss, reversed(tc.wss)} {
				got := ""
				if w := NamespaceWorkspace(order); w != nil {
					got = w.Name
				}
				if got != tc.want {
					t.Fatalf("picked %q from %v, want %q", got, names(order), tc.want)
				}
			}
		})
	}
}

func reversed(wss []omniav1.Workspace) []omniav1.Workspace {
	out := make([]omniav1.Workspace, len(wss))
	for i := range wss {
		out[len(wss)-1-i] = wss[i]
	}
	return out
}

func names(wss []omniav1.Workspace) []string {
	var out []string
	for _, w := range wss {
		out = append(out, w.Name)
	}
	return out
}
