package runpolicy

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/services/agent-controller/internal/jobbuild"
)

var gateway = Config{GatewayNamespace: "agentplane-system", GatewayPodLabels: map[string]string{"app.kubernetes.io/name": "realtime-gateway"}}

// runJob builds the real Job of an Agent named name in execution mode, as
// the controller would.
func runJob(t *testing.T, name string, mode agentsv1alpha1.ExecutionMode) (*agentsv1alpha1.Agent, *batchv1.Job) {
	t.Helper()
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: "uid-1"},
		Spec: agentsv1alpha1.AgentSpec{StationRef: "st"}}
	job, err := jobbuild.Build(jobbuild.Input{
		Agent: a,
		Station: &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: "st", Namespace: "team"},
			Spec: agentsv1alpha1.StationSpec{AgentDefRef: "def", DeadlineMinutes: 30, Template: corev1.PodTemplateSpec{
				// A template's own labels never steer the policy.
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{agentsv1alpha1.LabelAgent: "spoofed", agentsv1alpha1.LabelComponent: "other"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "runner"}}}}}},
		Definition: &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "def", Namespace: "team"},
			Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "hi", Execution: mode}},
		Model:  "claude-opus-5-5",
		Config: jobbuild.Config{SupervisorImage: "supervisor", SupervisorPath: "/supervisor"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, job
}

func selects(t *testing.T, np *networkingv1.NetworkPolicy, podLabels map[string]string) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Matches(labels.Set(podLabels))
}

func TestForRules(t *testing.T) {
	long := strings.Repeat("a", 80)
	cases := []struct {
		rule  string
		name  string
		mode  agentsv1alpha1.ExecutionMode
		check func(t *testing.T, job *batchv1.Job, np *networkingv1.NetworkPolicy)
	}{
		{"a Job run's policy selects its pod and admits no ingress at all", "once", agentsv1alpha1.ExecutionJob,
			func(t *testing.T, job *batchv1.Job, np *networkingv1.NetworkPolicy) {
				if !selects(t, np, job.Spec.Template.Labels) {
					t.Errorf("the policy %v does not select the run's pod %v", np.Spec.PodSelector, job.Spec.Template.Labels)
				}
				if len(np.Spec.Ingress) != 0 || np.Name != RunsName {
					t.Errorf("policy %s, ingress rules %+v, want %s with none", np.Name, np.Spec.Ingress, RunsName)
				}
			}},
		{"a Job run's policy selects every run pod of the namespace, realtime ones too", "once", agentsv1alpha1.ExecutionJob,
			func(t *testing.T, _ *batchv1.Job, np *networkingv1.NetworkPolicy) {
				_, other := runJob(t, "other", agentsv1alpha1.ExecutionJob)
				_, talk := runJob(t, "talk", agentsv1alpha1.ExecutionRealtime)
				if !selects(t, np, other.Spec.Template.Labels) || !selects(t, np, talk.Spec.Template.Labels) {
					t.Errorf("the policy %v misses a run pod: %v, %v", np.Spec.PodSelector, other.Spec.Template.Labels, talk.Spec.Template.Labels)
				}
			}},
		{"a run policy selects no pod that is not a run's", "once", agentsv1alpha1.ExecutionJob,
			func(t *testing.T, _ *batchv1.Job, np *networkingv1.NetworkPolicy) {
				if selects(t, np, map[string]string{"app": "tenant"}) {
					t.Errorf("the policy %v selects a tenant's pod", np.Spec.PodSelector)
				}
			}},
		{"a realtime run's policy admits TCP 8090 only, from the gateway's pods in the gateway's namespace, both in one peer", "talk", agentsv1alpha1.ExecutionRealtime,
			func(t *testing.T, job *batchv1.Job, np *networkingv1.NetworkPolicy) {
				if !selects(t, np, job.Spec.Template.Labels) || np.Name != RealtimeRunsName {
					t.Errorf("the policy %s %v does not select the run's pod %v", np.Name, np.Spec.PodSelector, job.Spec.Template.Labels)
				}
				if len(np.Spec.Ingress) != 1 {
					t.Fatalf("ingress rules %+v, want one", np.Spec.Ingress)
				}
				in := np.Spec.Ingress[0]
				if len(in.Ports) != 1 || in.Ports[0].Port.IntValue() != realtime.Port || *in.Ports[0].Protocol != corev1.ProtocolTCP || in.Ports[0].EndPort != nil {
					t.Errorf("ports %+v, want TCP %d alone", in.Ports, realtime.Port)
				}
				if len(in.From) != 1 {
					t.Fatalf("peers %+v, want one", in.From)
				}
				p := in.From[0]
				if p.IPBlock != nil || p.NamespaceSelector == nil || p.PodSelector == nil {
					t.Fatalf("peer %+v, want a namespace and a pod selector together", p)
				}
				if got := p.NamespaceSelector.MatchLabels; len(got) != 1 || got[corev1.LabelMetadataName] != "agentplane-system" || len(p.NamespaceSelector.MatchExpressions) > 0 {
					t.Errorf("namespace selector %+v, want the gateway's namespace by name", p.NamespaceSelector)
				}
				if got := p.PodSelector.MatchLabels; len(got) != 1 || got["app.kubernetes.io/name"] != "realtime-gateway" || len(p.PodSelector.MatchExpressions) > 0 {
					t.Errorf("pod selector %+v, want the gateway's labels", p.PodSelector)
				}
			}},
		{"a realtime run's policy opens no Job run's pod", "talk", agentsv1alpha1.ExecutionRealtime,
			func(t *testing.T, _ *batchv1.Job, np *networkingv1.NetworkPolicy) {
				_, once := runJob(t, "once", agentsv1alpha1.ExecutionJob)
				if selects(t, np, once.Spec.Template.Labels) {
					t.Errorf("the realtime policy %v selects a Job run's pod %v", np.Spec.PodSelector, once.Spec.Template.Labels)
				}
			}},
		{"egress is never restricted: the policy is of type Ingress only", "talk", agentsv1alpha1.ExecutionRealtime,
			func(t *testing.T, _ *batchv1.Job, np *networkingv1.NetworkPolicy) {
				if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress || len(np.Spec.Egress) > 0 {
					t.Errorf("policy types %v, egress %v", np.Spec.PolicyTypes, np.Spec.Egress)
				}
			}},
		{"the policy is the namespace's, owned by no run, labelled as the controller's", "once", agentsv1alpha1.ExecutionJob,
			func(t *testing.T, _ *batchv1.Job, np *networkingv1.NetworkPolicy) {
				if np.Namespace != "team" || len(np.OwnerReferences) > 0 || np.Labels[ManagedByLabel] != ManagedBy {
					t.Errorf("policy %s/%s owners %+v labels %v", np.Namespace, np.Name, np.OwnerReferences, np.Labels)
				}
			}},
		{"a long Agent name changes nothing: the policy selects by component", long, agentsv1alpha1.ExecutionJob,
			func(t *testing.T, job *batchv1.Job, np *networkingv1.NetworkPolicy) {
				if !selects(t, np, job.Spec.Template.Labels) {
					t.Errorf("selector %v, pod labels %v", np.Spec.PodSelector, job.Spec.Template.Labels)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			a, job := runJob(t, c.name, c.mode)
			c.check(t, job, For(a.Namespace, job, gateway))
		})
	}
}

func TestForKeepsItsConfig(t *testing.T) {
	a, job := runJob(t, "talk", agentsv1alpha1.ExecutionRealtime)
	cfg := Config{GatewayNamespace: "gw", GatewayPodLabels: map[string]string{"a": "b"}}
	np := For(a.Namespace, job, cfg)
	np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["a"] = "changed"
	if cfg.GatewayPodLabels["a"] != "b" {
		t.Error("the policy shares its pod labels with the controller's config")
	}
}

func TestParsePodLabelsRules(t *testing.T) {
	cases := []struct {
		rule, in string
		want     map[string]string
		err      string
	}{
		{"the default names the gateway chart's pods", DefaultGatewayPodLabels, map[string]string{"app.kubernetes.io/name": "realtime-gateway"}, ""},
		{"several labels are all required", "a=b,c=d", map[string]string{"a": "b", "c": "d"}, ""},
		{"no label is refused: it would admit the whole namespace", "", nil, "no label given"},
		{"a key without a value is refused", "app", nil, "invalid selector"},
		{"a set-based selector is refused", "a in (b,c)", nil, "invalid selector"},
		{"an invalid label key is refused", "-bad=x", nil, "name part must"},
		{"an invalid label value is refused", "a=" + strings.Repeat("v", 64), nil, "no more than 63"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got, err := ParsePodLabels(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParsePodLabels(%q) = %v, %v; want an error containing %q", c.in, got, err, c.err)
				}
				return
			}
			if err != nil || labels.Set(got).String() != labels.Set(c.want).String() {
				t.Fatalf("ParsePodLabels(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
}
