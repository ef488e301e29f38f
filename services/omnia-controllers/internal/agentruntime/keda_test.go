package agentruntime

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

const testPrometheus = "http://prometheus.monitoring.svc:9090"

// kedaPolicy gives the agent autoscaling type keda, changed by mut.
func kedaPolicy(mut func(*omniav1.AutoscalingConfig)) func(*omniav1.AgentRuntime) {
	return func(a *omniav1.AgentRuntime) {
		as := &omniav1.AutoscalingConfig{Enabled: true, Type: omniav1.AutoscalerKEDA}
		if mut != nil {
			mut(as)
		}
		a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: as}
	}
}

// TestBuildScaledObjectSpec: the ScaledObject carries the spec's bounds,
// KEDA's documented defaults, and the spec's triggers or else the default
// trigger on the agent's open connections.
func TestBuildScaledObjectSpec(t *testing.T) {
	defaultTrigger := func(threshold string) []KEDATrigger {
		return []KEDATrigger{{Type: "prometheus", Metadata: map[string]string{"serverAddress": testPrometheus,
			"query": `sum(omnia_agent_connections_active{namespace="ns",agent="agent"})`, "threshold": threshold}}}
	}
	target := ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "agent"}
	cron := omniav1.KEDATrigger{Type: "cron", Metadata: map[string]string{"timezone": "UTC", "start": "0 8 * * *", "end": "0 18 * * *", "desiredReplicas": "3"}}
	ws := testWorkspace(func(w *omniav1.Workspace) {
		w.Spec.Services = []omniav1.WorkspaceServiceGroup{{Name: omniav1.DefaultServiceGroup,
			Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, Type: omniav1.AutoscalerKEDA, MaxReplicas: ptr(int32(7))}}}
	})
	cases := []struct {
		name       string
		in         Inputs
		prometheus string
		want       ScaledObjectSpec
		err        error
	}{
		{"no keda block: replicas 1 to 100, polling 30 s, cooldown 300 s, the default trigger at 200 connections",
			Inputs{Agent: agentSpec(kedaPolicy(nil))}, testPrometheus,
			ScaledObjectSpec{ScaleTargetRef: target, MinReplicaCount: 1, MaxReplicaCount: 100, PollingInterval: 30, CooldownPeriod: 300, Triggers: defaultTrigger("200")}, nil},
		{"minReplicas 0 is kept: KEDA scales to zero",
			Inputs{Agent: agentSpec(kedaPolicy(func(as *omniav1.AutoscalingConfig) { as.MinReplicas, as.MaxReplicas = ptr(int32(0)), ptr(int32(5)) }))}, testPrometheus,
			ScaledObjectSpec{ScaleTargetRef: target, MinReplicaCount: 0, MaxReplicaCount: 5, PollingInterval: 30, CooldownPeriod: 300, Triggers: defaultTrigger("200")}, nil},
		{"pollingInterval, cooldownPeriod and connectionThreshold are the spec's",
			Inputs{Agent: agentSpec(kedaPolicy(func(as *omniav1.AutoscalingConfig) {
				as.KEDA = &omniav1.KEDAConfig{PollingInterval: ptr(int32(5)), CooldownPeriod: ptr(int32(0)), ConnectionThreshold: ptr(int32(20))}
			}))}, testPrometheus,
			ScaledObjectSpec{ScaleTargetRef: target, MinReplicaCount: 1, MaxReplicaCount: 100, PollingInterval: 5, CooldownPeriod: 0, Triggers: defaultTrigger("20")}, nil},
		{"the spec's triggers replace the default one, without --prometheus-url too",
			Inputs{Agent: agentSpec(kedaPolicy(func(as *omniav1.AutoscalingConfig) {
				as.KEDA = &omniav1.KEDAConfig{Triggers: []omniav1.KEDATrigger{cron}, ConnectionThreshold: ptr(int32(20))}
			}))}, "",
			ScaledObjectSpec{ScaleTargetRef: target, MinReplicaCount: 1, MaxReplicaCount: 100, PollingInterval: 30, CooldownPeriod: 300,
				Triggers: []KEDATrigger{{Type: "cron", Metadata: cron.Metadata}}}, nil},
		{"the Workspace service group's keda policy applies to an agent without its own",
			Inputs{Agent: agentSpec(nil), Workspace: ws}, testPrometheus,
			ScaledObjectSpec{ScaleTargetRef: target, MinReplicaCount: 1, MaxReplicaCount: 7, PollingInterval: 30, CooldownPeriod: 300, Triggers: defaultTrigger("200")}, nil},
		{"no trigger and no --prometheus-url: no default trigger can be built",
			Inputs{Agent: agentSpec(kedaPolicy(nil))}, "", ScaledObjectSpec{}, errNoKEDATrigger},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BuildScaledObjectSpec(tc.in, tc.prometheus)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v; want %v", err, tc.err)
			}
			if tc.err != nil {
				return
			}
			if got.ScaleTargetRef != tc.want.ScaleTargetRef || got.MinReplicaCount != tc.want.MinReplicaCount || got.MaxReplicaCount != tc.want.MaxReplicaCount ||
				got.PollingInterval != tc.want.PollingInterval || got.CooldownPeriod != tc.want.CooldownPeriod ||
				!slices.EqualFunc(got.Triggers, tc.want.Triggers, func(a, b KEDATrigger) bool { return a.Type == b.Type && maps.Equal(a.Metadata, b.Metadata) }) {
				t.Fatalf("spec\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}
}

// kedaSnapshot is readySnapshot with the Deployment and Service already
// in place, KEDA served (or not) and --prometheus-url set.
func kedaSnapshot(served bool, mut func(*omniav1.AgentRuntime)) snapshot {
	s := readySnapshot(mut)
	s.kedaServed = served
	s.cfg.PrometheusURL = testPrometheus
	return deployed(s)
}

// deployed applies the writes of the Deployment and Service of s's first
// pass, so a case's plan holds only autoscaling writes.
func deployed(s snapshot) snapshot {
	p := decide(s)
	next := written(s, p)
	next.live.hpa, next.live.scaledObject = s.live.hpa, s.live.scaledObject
	return next
}

// ownedScaledObject is the ScaledObject the plan of s writes, as stored.
func ownedScaledObject(t *testing.T, s snapshot) *unstructured.Unstructured {
	t.Helper()
	for _, w := range decide(s).writes {
		if u, ok := w.obj.(*unstructured.Unstructured); ok && w.op == opCreate {
			return u.DeepCopy()
		}
	}
	t.Fatal("the plan creates no ScaledObject")
	return nil
}

// TestDecideKEDA has a case per autoscaling rule of type keda: the writes
// planned, AutoscalingReady, and what the pass returns.
func TestDecideKEDA(t *testing.T) {
	keda := kedaPolicy(func(as *omniav1.AutoscalingConfig) { as.MinReplicas = ptr(int32(0)) })
	hpaPolicy := func(a *omniav1.AgentRuntime) { autoscaledAgentSpec(a) }
	base := kedaSnapshot(true, keda)
	live := ownedScaledObject(t, base)
	edited := live.DeepCopy()
	_ = unstructured.SetNestedField(edited.Object, int64(50), "spec", "maxReplicaCount")
	foreign := live.DeepCopy()
	foreign.SetOwnerReferences(nil)
	withSO := func(s snapshot, so *unstructured.Unstructured) snapshot {
		s.live.scaledObject.obj = so
		return s
	}
	hpaLive := func(s snapshot) snapshot {
		h := ownedHPA(t, kedaSnapshot(true, hpaPolicy))
		s.live.hpa.obj = h
		return s
	}
	noTrigger := kedaSnapshot(true, keda)
	noTrigger.cfg.PrometheusURL = ""
	readErr := kedaSnapshot(true, keda)
	readErr.live.scaledObject.err = unavailable

	cases := []struct {
		name    string
		s       snapshot
		writes  []string
		status  metav1.ConditionStatus
		reason  string
		requeue time.Duration
		err     bool
	}{
		{"KEDA's CRD not served: KEDANotInstalled, nothing written, no error, looked at again after the long recheck",
			kedaSnapshot(false, keda), nil, metav1.ConditionFalse, omniav1.ReasonKEDANotInstalled, kedaRecheck, false},
		{"served and absent: the ScaledObject is created, Scaling",
			base, []string{"create *unstructured.Unstructured agent"}, metav1.ConditionTrue, omniav1.ReasonScaling, 0, false},
		{"served and as written: nothing to write",
			withSO(base, live), nil, metav1.ConditionTrue, omniav1.ReasonScaling, 0, false},
		{"edited by someone (maxReplicaCount): the spec is written back",
			withSO(base, edited), []string{"update *unstructured.Unstructured agent"}, metav1.ConditionTrue, omniav1.ReasonScaling, 0, false},
		{"a ScaledObject of the agent's name it does not control: NotOwned, left alone, retried",
			withSO(base, foreign), nil, metav1.ConditionFalse, omniav1.ReasonAutoscalerNotOwned, 0, true},
		{"a failed read: Error, returned",
			readErr, nil, metav1.ConditionFalse, omniav1.ReasonAutoscalingError, 0, true},
		{"no trigger and no Prometheus: NoTrigger, nothing written, no retry (needs an edit)",
			noTrigger, nil, metav1.ConditionFalse, omniav1.ReasonKEDANoTrigger, 0, false},
		{"keda chosen with the agent's HPA live: the HPA is deleted and the ScaledObject created",
			hpaLive(base), []string{"delete *v2.HorizontalPodAutoscaler agent", "create *unstructured.Unstructured agent"}, metav1.ConditionTrue, omniav1.ReasonScaling, 0, false},
		{"hpa chosen with the agent's ScaledObject live: the ScaledObject is deleted and the HPA created",
			withSO(kedaSnapshot(true, hpaPolicy), live), []string{"delete *unstructured.Unstructured agent", createHPA}, metav1.ConditionTrue, omniav1.ReasonScaling, 0, false},
		{"autoscaling off with the agent's ScaledObject live: the ScaledObject is deleted, no condition",
			withSO(kedaSnapshot(true, nil), live), []string{"delete *unstructured.Unstructured agent"}, "", "", 0, false},
		{"hpa chosen with a ScaledObject the agent does not control: left alone",
			withSO(kedaSnapshot(true, hpaPolicy), foreign), []string{createHPA}, metav1.ConditionTrue, omniav1.ReasonScaling, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := decide(tc.s)
			if got := writesOf(p); !slices.Equal(got, tc.writes) {
				t.Fatalf("writes %q; want %q", got, tc.writes)
			}
			if (p.err != nil) != tc.err {
				t.Fatalf("err %v; want an error: %v", p.err, tc.err)
			}
			if p.requeueAfter != tc.requeue {
				t.Errorf("requeue %s; want %s", p.requeueAfter, tc.requeue)
			}
			c := meta.FindStatusCondition(p.status.Conditions, omniav1.ConditionAutoscalingReady)
			switch {
			case tc.reason == "" && c != nil:
				t.Errorf("AutoscalingReady %s/%s; want none", c.Status, c.Reason)
			case tc.reason != "" && (c == nil || c.Status != tc.status || c.Reason != tc.reason):
				t.Errorf("AutoscalingReady %+v; want %s/%s", c, tc.status, tc.reason)
			}
			for _, w := range p.writes {
				if u, ok := w.obj.(*unstructured.Unstructured); ok && w.op != opDelete {
					if n, _, _ := unstructured.NestedInt64(u.Object, "spec", "maxReplicaCount"); n != 100 {
						t.Errorf("written maxReplicaCount %d; want 100", n)
					}
					if !metav1.IsControlledBy(u, tc.s.in.Agent) || u.GetAnnotations()[AnnotationAppliedHash] == "" {
						t.Errorf("written ScaledObject not stamped: %v %v", u.GetOwnerReferences(), u.GetAnnotations())
					}
				}
			}
		})
	}
}

// ownedHPA is the HPA the plan of s creates.
func ownedHPA(t *testing.T, s snapshot) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	for _, w := range decide(s).writes {
		if h, ok := w.obj.(*autoscalingv2.HorizontalPodAutoscaler); ok {
			return h.DeepCopy()
		}
	}
	t.Fatal("the plan creates no HPA")
	return nil
}
