package agentruntime

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// podOf builds the pod template of agentSpec(mut) with a ready pack and
// Provider, and the operator's facade image facade:1.
func agentPod(t *testing.T, mut func(*omniav1.AgentRuntime), ws *omniav1.Workspace) corev1.PodSpec {
	t.Helper()
	in := inputs(agentSpec(mut), []omniav1.PromptPack{ppack("v1", "1.0.0", omniav1.PromptPackPhaseActive)}, readyProvider(nil))
	in.Workspace = ws
	return mustBuild(t, in, Config{RuntimeImage: "runtime:1", FacadeImage: "facade:1", FacadeCommand: []string{"/facade"}}).Spec.Template.Spec
}

func containerNamed(p corev1.PodSpec, name string) *corev1.Container {
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i]
		}
	}
	return nil
}

func envOf(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func portsOf(c *corev1.Container) string {
	var out []string
	for _, p := range c.Ports {
		out = append(out, fmt.Sprintf("%s=%d", p.Name, p.ContainerPort))
	}
	return strings.Join(out, ",")
}

func withFacade(f omniav1.FacadeConfig) func(*omniav1.AgentRuntime) {
	return func(a *omniav1.AgentRuntime) { a.Spec.Facades = []omniav1.FacadeConfig{f} }
}

// TestAgentPod has one case per rule of the agent pod's shape
// (docs/omnia-controllers.md, "The agent pod").
func TestAgentPod(t *testing.T) {
	drain := func(d time.Duration) func(*omniav1.AgentRuntime) {
		return withFacade(omniav1.FacadeConfig{Type: omniav1.FacadeTypeWebSocket, DrainTimeout: &metav1.Duration{Duration: d}})
	}
	cases := []struct {
		rule string
		mut  func(*omniav1.AgentRuntime)
		ws   *omniav1.Workspace
		want func(p corev1.PodSpec) error
	}{
		{"the runtime is the first container and the facade the second", nil, nil, func(p corev1.PodSpec) error {
			if len(p.Containers) != 2 || p.Containers[0].Name != "runtime" || p.Containers[1].Name != FacadeContainerName {
				return fmt.Errorf("containers %d", len(p.Containers))
			}
			return nil
		}},
		{"the facade runs the operator's facade image and command", nil, nil, func(p corev1.PodSpec) error {
			f := containerNamed(p, FacadeContainerName)
			if f.Image != "facade:1" || !slices.Equal(f.Command, []string{"/facade"}) {
				return fmt.Errorf("image %q command %v", f.Image, f.Command)
			}
			return nil
		}},
		{"the primary facade's image beats the operator's", withFacade(omniav1.FacadeConfig{Type: omniav1.FacadeTypeWebSocket, Image: "mine:2"}), nil, func(p corev1.PodSpec) error {
			if f := containerNamed(p, FacadeContainerName); f.Image != "mine:2" {
				return fmt.Errorf("image %q", f.Image)
			}
			return nil
		}},
		{"the facade serves the primary port and the health port; the runtime only its own", nil, nil, func(p corev1.PodSpec) error {
			if got := portsOf(containerNamed(p, FacadeContainerName)); got != "facade=8080,health=8081" {
				return fmt.Errorf("facade ports %s", got)
			}
			if got := portsOf(containerNamed(p, "runtime")); got != "runtime=9000" {
				return fmt.Errorf("runtime ports %s", got)
			}
			return nil
		}},
		{"the facade is told its agent, its pod name, ports, drain and where the runtime is", nil, nil, func(p corev1.PodSpec) error {
			f := containerNamed(p, FacadeContainerName)
			want := map[string]string{"OMNIA_AGENT_NAME": "agent", "OMNIA_NAMESPACE": "ns", "OMNIA_FACADE_PORT": "8080", "OMNIA_HEALTH_PORT": "8081",
				"OMNIA_RUNTIME_ADDR": "localhost:9000", "OMNIA_DRAIN_TIMEOUT": "30s", "OMNIA_FACADE_TYPE": "websocket"}
			for k, v := range want {
				if got := envOf(f, k); got != v {
					return fmt.Errorf("%s=%q, want %q", k, got, v)
				}
			}
			var podName *corev1.EnvVar
			for i := range f.Env {
				if f.Env[i].Name == EnvPodName {
					podName = &f.Env[i]
				}
			}
			if podName == nil || podName.ValueFrom == nil || podName.ValueFrom.FieldRef == nil || podName.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				return fmt.Errorf("%s is %+v; want the pod's metadata.name", EnvPodName, podName)
			}
			if got := envOf(containerNamed(p, "runtime"), "OMNIA_RUNTIME_PORT"); got != "9000" {
				return fmt.Errorf("runtime OMNIA_RUNTIME_PORT=%q", got)
			}
			return nil
		}},
		{"the facade's readiness and liveness probes are on its health port", nil, nil, func(p corev1.PodSpec) error {
			f := containerNamed(p, FacadeContainerName)
			if f.ReadinessProbe == nil || f.ReadinessProbe.HTTPGet == nil || f.ReadinessProbe.HTTPGet.Path != "/readyz" || f.ReadinessProbe.HTTPGet.Port.StrVal != "health" {
				return fmt.Errorf("readiness %+v", f.ReadinessProbe)
			}
			if f.LivenessProbe == nil || f.LivenessProbe.HTTPGet == nil || f.LivenessProbe.HTTPGet.Path != "/healthz" || f.LivenessProbe.HTTPGet.Port.StrVal != "health" {
				return fmt.Errorf("liveness %+v", f.LivenessProbe)
			}
			return nil
		}},
		{"both containers wait on the facade's drain before they are signalled", nil, nil, func(p corev1.PodSpec) error {
			for _, c := range p.Containers {
				h := c.Lifecycle
				if h == nil || h.PreStop == nil || h.PreStop.HTTPGet == nil || h.PreStop.HTTPGet.Path != DrainPath || h.PreStop.HTTPGet.Port.IntVal != HealthPort {
					return fmt.Errorf("%s preStop %+v", c.Name, h)
				}
			}
			return nil
		}},
		{"the grace period is the default 30 s drain plus 30 s", nil, nil, func(p corev1.PodSpec) error {
			if g := p.TerminationGracePeriodSeconds; g == nil || *g != 60 {
				return fmt.Errorf("grace %v", g)
			}
			return nil
		}},
		{"the grace period follows drainTimeout", drain(2 * time.Minute), nil, func(p corev1.PodSpec) error {
			if g := p.TerminationGracePeriodSeconds; g == nil || *g != 150 {
				return fmt.Errorf("grace %v", g)
			}
			if got := envOf(containerNamed(p, FacadeContainerName), "OMNIA_DRAIN_TIMEOUT"); got != "2m0s" {
				return fmt.Errorf("OMNIA_DRAIN_TIMEOUT %q", got)
			}
			return nil
		}},
		{"a drainTimeout over 10 minutes is capped at 10", drain(time.Hour), nil, func(p corev1.PodSpec) error {
			if g := p.TerminationGracePeriodSeconds; g == nil || *g != 630 {
				return fmt.Errorf("grace %v", g)
			}
			return nil
		}},
		{"a2a beside the websocket facade adds the a2a port, 9999 by default", withFacade(omniav1.FacadeConfig{Type: omniav1.FacadeTypeWebSocket, A2A: &omniav1.A2AConfig{Enabled: true}}), nil, func(p corev1.PodSpec) error {
			if got := portsOf(containerNamed(p, FacadeContainerName)); got != "facade=8080,a2a=9999,health=8081" {
				return fmt.Errorf("ports %s", got)
			}
			if got := envOf(containerNamed(p, FacadeContainerName), "OMNIA_A2A_PORT"); got != "9999" {
				return fmt.Errorf("OMNIA_A2A_PORT %q", got)
			}
			return nil
		}},
		{"an enabled mcp server adds the mcp port as its spec says", withFacade(omniav1.FacadeConfig{Type: omniav1.FacadeTypeWebSocket, MCP: &omniav1.MCPFacadeConfig{Enabled: true, Port: ptr(int32(7000))}}), nil, func(p corev1.PodSpec) error {
			if got := portsOf(containerNamed(p, FacadeContainerName)); got != "facade=8080,mcp=7000,health=8081" {
				return fmt.Errorf("ports %s", got)
			}
			return nil
		}},
		{"a disabled mcp server adds no port", withFacade(omniav1.FacadeConfig{Type: omniav1.FacadeTypeWebSocket, MCP: &omniav1.MCPFacadeConfig{Port: ptr(int32(7000))}}), nil, func(p corev1.PodSpec) error {
			if got := portsOf(containerNamed(p, FacadeContainerName)); got != "facade=8080,health=8081" {
				return fmt.Errorf("ports %s", got)
			}
			return nil
		}},
		{"the pods run as <name>-facade by default", nil, nil, func(p corev1.PodSpec) error {
			if p.ServiceAccountName != "agent-facade" {
				return fmt.Errorf("service account %q", p.ServiceAccountName)
			}
			return nil
		}},
		{"the Workspace's runtime service account beats <name>-facade", nil, wsWithSA("ws-sa"), func(p corev1.PodSpec) error {
			if p.ServiceAccountName != "ws-sa" {
				return fmt.Errorf("service account %q", p.ServiceAccountName)
			}
			return nil
		}},
		{"podOverrides' service account beats the Workspace's", func(a *omniav1.AgentRuntime) {
			a.Spec.PodOverrides = &omniav1.PodOverrides{ServiceAccountName: "own-sa"}
		}, wsWithSA("ws-sa"), func(p corev1.PodSpec) error {
			if p.ServiceAccountName != "own-sa" {
				return fmt.Errorf("service account %q", p.ServiceAccountName)
			}
			return nil
		}},
		{"both containers keep the restricted security context", nil, nil, func(p corev1.PodSpec) error {
			for _, c := range p.Containers {
				s := c.SecurityContext
				if s == nil || s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation || s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem ||
					s.Capabilities == nil || len(s.Capabilities.Drop) != 1 {
					return fmt.Errorf("%s security %+v", c.Name, s)
				}
			}
			return nil
		}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if err := c.want(agentPod(t, c.mut, c.ws)); err != nil {
				t.Error(err)
			}
		})
	}
}

func wsWithSA(sa string) *omniav1.Workspace {
	return &omniav1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}, Spec: omniav1.WorkspaceSpec{
		Namespace: omniav1.WorkspaceNamespace{Name: "ns"},
		Runtime:   &omniav1.WorkspaceRuntime{ServiceAccountName: sa}}}
}

// TestFacadeImage: the facade image is the primary facade's, else the
// operator's; with neither the error names the flag and the field.
func TestFacadeImage(t *testing.T) {
	cases := []struct {
		rule, spec, operator, want string
	}{
		{"the primary facade's image wins", "mine:1", "op:1", "mine:1"},
		{"the operator's image when the spec names none", "", "op:1", "op:1"},
		{"neither is an error naming --facade-image and the field", "", "", "--facade-image"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			a := agentSpec(withFacade(omniav1.FacadeConfig{Type: omniav1.FacadeTypeWebSocket, Image: c.spec}))
			got, err := FacadeImage(a, Config{FacadeImage: c.operator})
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestFacadeAccess: the facade's Role grants exactly get on its own
// AgentRuntime and get and patch on its status, and is bound to the
// account the pods run as.
func TestFacadeAccess(t *testing.T) {
	a := agentSpec(nil)
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"omnia.altairalabs.ai"}, Resources: []string{"agentruntimes"}, ResourceNames: []string{"agent"}, Verbs: []string{"get"}},
		{APIGroups: []string{"omnia.altairalabs.ai"}, Resources: []string{"agentruntimes/status"}, ResourceNames: []string{"agent"}, Verbs: []string{"get", "patch"}},
	}
	if r := BuildFacadeRole(a); r.Name != "agent-facade" || !equality.Semantic.DeepEqual(r.Rules, want) {
		t.Errorf("role %s rules %+v", r.Name, r.Rules)
	}
	cases := []struct {
		rule string
		in   Inputs
		sa   string
	}{
		{"bound to <name>-facade by default", Inputs{Agent: a}, "agent-facade"},
		{"bound to the Workspace's account when the pods run as it", Inputs{Agent: a, Workspace: wsWithSA("ws-sa")}, "ws-sa"},
		{"bound to podOverrides' account when the pods run as it", Inputs{Agent: agentSpec(func(a *omniav1.AgentRuntime) {
			a.Spec.PodOverrides = &omniav1.PodOverrides{ServiceAccountName: "own-sa"}
		})}, "own-sa"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			rb := BuildFacadeRoleBinding(c.in)
			if len(rb.Subjects) != 1 || rb.Subjects[0].Name != c.sa || rb.Subjects[0].Namespace != "ns" || rb.RoleRef.Name != "agent-facade" {
				t.Errorf("binding %+v", rb)
			}
		})
	}
}

// TestBuildPDB: a PodDisruptionBudget of maxUnavailable 1 exists only
// when the agent may run more than one replica.
func TestBuildPDB(t *testing.T) {
	cases := []struct {
		rule string
		rt   *omniav1.RuntimeConfig
		want bool
	}{
		{"none for the default single replica", nil, false},
		{"none for replicas 1", &omniav1.RuntimeConfig{Replicas: ptr(int32(1))}, false},
		{"one for replicas 3", &omniav1.RuntimeConfig{Replicas: ptr(int32(3))}, true},
		{"one for an autoscaler that may scale past one", &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MaxReplicas: ptr(int32(4))}}, true},
		{"none for an autoscaler capped at one", &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MaxReplicas: ptr(int32(1))}}, false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			p := BuildPDB(Inputs{Agent: agentSpec(func(a *omniav1.AgentRuntime) { a.Spec.Runtime = c.rt })})
			if (p != nil) != c.want {
				t.Fatalf("PDB %v, want %v", p != nil, c.want)
			}
			if p != nil && (p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntVal != 1 || p.Spec.MinAvailable != nil ||
				p.Spec.Selector.MatchLabels[omniav1.LabelTrack] != "") {
				t.Errorf("spec %+v", p.Spec)
			}
		})
	}
}
