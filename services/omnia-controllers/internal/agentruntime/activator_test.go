package agentruntime

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// activatorConfig is testConfig with an activator.
var activatorConfig = func() Config {
	c := testConfig
	c.ActivatorAddress, c.ActivatorPort = "10.0.0.7", 8082
	return c
}()

// TestRouteToActivatorRule has a case per rule of the routing decision.
func TestRouteToActivatorRule(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		held   bool
		routed bool
		ready  int32
		want   bool
	}{
		{"a reaped agent is routed to the activator", activatorConfig, true, false, 0, true},
		{"a reaped agent stays routed while its last pods still count ready", activatorConfig, true, true, 2, true},
		{"a woken agent stays routed until a replica is ready", activatorConfig, false, true, 0, true},
		{"a woken agent with a ready replica gets its selector back", activatorConfig, false, true, 1, false},
		{"an agent never routed is not routed", activatorConfig, false, false, 0, false},
		{"without an activator a reaped agent is untouched", testConfig, true, false, 0, false},
		{"without an activator a routed agent is unrouted", testConfig, false, true, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := routeToActivator(tc.cfg, tc.held, tc.routed, tc.ready); got != tc.want {
				t.Errorf("routeToActivator = %v; want %v", got, tc.want)
			}
		})
	}
}

// reaped is an agent whose idle deadline passed an hour ago.
func reaped(a *omniav1.AgentRuntime) {
	a.Spec.IdleTimeout = &metav1.Duration{Duration: time.Minute}
	a.Status.Conditions = []metav1.Condition{{Type: omniav1.ConditionReady, Status: metav1.ConditionTrue, Reason: omniav1.ReasonRuntimeReady,
		LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour)), ObservedGeneration: a.Generation}}
}

// settlePure plays settle without an API server: every write succeeds
// and the Service's slices question is answered with listed.
func settlePure(t *testing.T, s snapshot, listed []discoveryv1.EndpointSlice) (snapshot, plan) {
	t.Helper()
	for range maxRounds {
		p := decide(s)
		switch {
		case len(s.done) < len(p.writes):
			s = succeeded(s, p)
		case p.ask != nil && p.ask.slices != "":
			s.slices = &slicesAnswer{items: listed}
		case p.ask != nil:
			t.Fatalf("unexpected question %+v", p.ask)
		default:
			return s, p
		}
	}
	t.Fatal("the plan did not settle")
	return s, plan{}
}

// writeOf finds the write named name ("create *v1.EndpointSlice x") and
// its index, -1 when the plan does not make it.
func writeOf(p plan, name string) (write, int) {
	i := slices.Index(writesOf(p), name)
	if i < 0 {
		return write{}, -1
	}
	return p.writes[i], i
}

// serviceWrite is the plan's Service write, nil when none.
func serviceWrite(p plan) *corev1.Service {
	for _, w := range p.writes {
		if s, ok := w.obj.(*corev1.Service); ok {
			return s
		}
	}
	return nil
}

func serviceReady(t *testing.T, p plan) *metav1.Condition {
	t.Helper()
	if p.status == nil {
		t.Fatal("no status written")
	}
	c := meta.FindStatusCondition(p.status.Conditions, omniav1.ConditionServiceReady)
	if c == nil {
		t.Fatal("no ServiceReady condition")
	}
	return c
}

const createSlice = "create *v1.EndpointSlice agent-activator"

// TestDecideActivatorRoute checks the writes of each routing rule in a
// pass: what is written, in which order, and what ServiceReady says.
func TestDecideActivatorRoute(t *testing.T) {
	routedSnap := func(t *testing.T) snapshot {
		s := readySnapshot(reaped)
		s.cfg = activatorConfig
		s, p := settlePure(t, s, nil)
		return written(s, p)
	}
	wake := func(s snapshot) snapshot {
		s.in.Agent.Annotations = map[string]string{omniav1.AnnotationWakeRequestedAt: "2026-11-29T12:00:00Z"}
		s.slices, s.done = nil, nil
		return s
	}

	t.Run("a reaped agent's Service loses its selector behind a slice to the activator", func(t *testing.T) {
		s := readySnapshot(reaped)
		s.cfg = activatorConfig
		_, p := settlePure(t, s, nil)
		w, si := writeOf(p, createSlice)
		if si < 0 {
			t.Fatalf("writes %v: no activator slice", writesOf(p))
		}
		svc := serviceWrite(p)
		if svc == nil || len(svc.Spec.Selector) != 0 {
			t.Fatalf("Service write %+v; want one without a selector", svc)
		}
		if _, vi := writeOf(p, "create *v1.Service agent"); vi < si {
			t.Errorf("writes %v: the Service is written before its slice", writesOf(p))
		}
		sl := w.obj.(*discoveryv1.EndpointSlice)
		if sl.Labels[discoveryv1.LabelServiceName] != "agent" || sl.Labels[discoveryv1.LabelManagedBy] != ActivatorManagedBy {
			t.Errorf("slice labels %v", sl.Labels)
		}
		if !metav1.IsControlledBy(sl, s.in.Agent) {
			t.Error("the slice is not controlled by the agent")
		}
		if sl.AddressType != discoveryv1.AddressTypeIPv4 || len(sl.Endpoints) != 1 || !slices.Equal(sl.Endpoints[0].Addresses, []string{"10.0.0.7"}) {
			t.Errorf("slice endpoints %+v (%s); want the activator's address", sl.Endpoints, sl.AddressType)
		}
		if len(sl.Ports) != len(svc.Spec.Ports) {
			t.Fatalf("slice ports %+v; want one per Service port %+v", sl.Ports, svc.Spec.Ports)
		}
		for i, sp := range svc.Spec.Ports {
			if *sl.Ports[i].Name != sp.Name || *sl.Ports[i].Port != 8082 {
				t.Errorf("slice port %d = %s:%d; want %s:8082", i, *sl.Ports[i].Name, *sl.Ports[i].Port, sp.Name)
			}
		}
		if c := serviceReady(t, p); !strings.Contains(c.Message, "routed to the activator at 10.0.0.7:8082") {
			t.Errorf("ServiceReady message %q", c.Message)
		}
	})

	t.Run("routing deletes the stale slices of the cluster's controller and no one else's", func(t *testing.T) {
		s := readySnapshot(reaped)
		s.cfg = activatorConfig
		stale := func(name, manager string) discoveryv1.EndpointSlice {
			return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("u-" + name),
				Labels: map[string]string{discoveryv1.LabelServiceName: "agent", discoveryv1.LabelManagedBy: manager}}}
		}
		_, p := settlePure(t, s, []discoveryv1.EndpointSlice{stale("agent-x7k2p", kubeSliceController), stale("agent-mesh", "mesh.example")})
		got := writesOf(p)
		if !slices.Contains(got, "delete *v1.EndpointSlice agent-x7k2p") {
			t.Errorf("writes %v: the stale slice is kept", got)
		}
		if slices.Contains(got, "delete *v1.EndpointSlice agent-mesh") {
			t.Errorf("writes %v: another manager's slice is deleted", got)
		}
		if w, _ := writeOf(p, "delete *v1.EndpointSlice agent-x7k2p"); w.preconditions == nil || w.preconditions.UID == nil {
			t.Error("the stale slice's delete has no UID precondition")
		}
	})

	t.Run("a routed, unchanged agent writes nothing", func(t *testing.T) {
		s := routedSnap(t)
		_, p := settlePure(t, s, nil)
		if len(p.writes) != 0 {
			t.Errorf("writes %v; want none", writesOf(p))
		}
	})

	t.Run("a woken agent stays routed until a replica is ready", func(t *testing.T) {
		s := wake(routedSnap(t))
		_, p := settlePure(t, s, nil)
		for _, w := range writesOf(p) {
			if strings.Contains(w, "EndpointSlice") || strings.Contains(w, "Service") {
				t.Errorf("write %q while no replica is ready", w)
			}
		}
		if c := meta.FindStatusCondition(p.status.Conditions, omniav1.ConditionIdle); c == nil || c.Reason != omniav1.ReasonWakeRequested {
			t.Fatalf("Idle = %+v; want WakeRequested", c)
		}
		if c := serviceReady(t, p); !strings.Contains(c.Message, "routed to the activator") {
			t.Errorf("ServiceReady message %q", c.Message)
		}
	})

	t.Run("a woken agent with a ready replica gets its selector back, then its slice goes", func(t *testing.T) {
		s := wake(routedSnap(t))
		s.live.stable.obj.Status.ReadyReplicas = 1
		_, p := settlePure(t, s, nil)
		svc := serviceWrite(p)
		if svc == nil || !equality.Semantic.DeepEqual(svc.Spec.Selector, BuildService(s.in.Agent).Spec.Selector) {
			t.Fatalf("Service write %+v; want the selector back", svc)
		}
		_, di := writeOf(p, "delete *v1.EndpointSlice agent-activator")
		_, vi := writeOf(p, "update *v1.Service agent")
		if di < 0 || vi < 0 || di < vi {
			t.Errorf("writes %v; want the Service update, then the slice's delete", writesOf(p))
		}
		if c := serviceReady(t, p); c.Message != "Service agent" {
			t.Errorf("ServiceReady message %q", c.Message)
		}
	})

	t.Run("a ready candidate pod counts as ready: the Service fronts it too", func(t *testing.T) {
		s := wake(routedSnap(t))
		s.live.candidate.obj = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "agent" + CandidateSuffix, Namespace: "ns"},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 1}}
		_, p := settlePure(t, s, nil)
		if _, di := writeOf(p, "delete *v1.EndpointSlice agent-activator"); di < 0 {
			t.Errorf("writes %v; want the slice deleted", writesOf(p))
		}
	})

	t.Run("without an activator a reaped agent's Service is untouched", func(t *testing.T) {
		s := readySnapshot(reaped)
		_, p := settlePure(t, s, nil)
		if _, si := writeOf(p, createSlice); si >= 0 {
			t.Errorf("writes %v: a slice without an activator", writesOf(p))
		}
		if svc := serviceWrite(p); svc == nil || len(svc.Spec.Selector) == 0 {
			t.Errorf("Service write %+v; want it with its selector", svc)
		}
		if c := serviceReady(t, p); !strings.Contains(c.Message, "no activator is configured") {
			t.Errorf("ServiceReady message %q; want it to say no session wakes the agent", c.Message)
		}
	})

	t.Run("the rollout candidate's Deployment is written the same whether or not the Service is routed", func(t *testing.T) {
		canaryReaped := func(a *omniav1.AgentRuntime) {
			reaped(a)
			a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(2))}
			a.Spec.Rollout = &omniav1.RolloutConfig{Candidate: roToV110(), Steps: []omniav1.RolloutStep{{SetWeight: ptr(int32(50))}},
				TrafficRouting: &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingReplicaWeighted}}
		}
		candidate := func(cfg Config) *appsv1.Deployment {
			s := readySnapshot(canaryReaped)
			s.cfg = cfg
			_, p := settlePure(t, s, nil)
			w, i := writeOf(p, "create *v1.Deployment agent"+CandidateSuffix)
			if i < 0 {
				t.Fatalf("writes %v: no candidate", writesOf(p))
			}
			return w.obj.(*appsv1.Deployment)
		}
		with, without := candidate(activatorConfig), candidate(testConfig)
		if !equality.Semantic.DeepEqual(with.Spec, without.Spec) {
			t.Errorf("candidate with the activator %+v\nwithout %+v", with.Spec, without.Spec)
		}
	})

	t.Run("an activator slice someone else controls is refused", func(t *testing.T) {
		s := readySnapshot(reaped)
		s.cfg = activatorConfig
		s.live.activatorSlice.obj = &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "agent-activator", Namespace: "ns"}}
		_, p := settlePure(t, s, nil)
		if _, si := writeOf(p, "update *v1.EndpointSlice agent-activator"); si >= 0 {
			t.Errorf("writes %v: someone else's slice taken over", writesOf(p))
		}
		if c := serviceReady(t, p); c.Status != metav1.ConditionFalse || c.Reason != omniav1.ReasonServiceFailed {
			t.Errorf("ServiceReady %+v; want False/ServiceFailed", c)
		}
	})

	t.Run("an edited activator slice is written back", func(t *testing.T) {
		s := routedSnap(t)
		s.live.activatorSlice.obj.Endpoints[0].Addresses = []string{"10.9.9.9"}
		_, p := settlePure(t, s, nil)
		w, i := writeOf(p, "update *v1.EndpointSlice agent-activator")
		if i < 0 || w.obj.(*discoveryv1.EndpointSlice).Endpoints[0].Addresses[0] != "10.0.0.7" {
			t.Errorf("writes %v; want the slice's address written back", writesOf(p))
		}
	})
}

// TestNeedsWake: the activator writes the wake annotation only for an
// agent held at zero whose current annotation the controller has acted on.
func TestNeedsWake(t *testing.T) {
	held := func(ann map[string]string) *omniav1.AgentRuntime {
		a := &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Generation: 2, Annotations: ann}}
		a.Status.Conditions = []metav1.Condition{{Type: omniav1.ConditionIdle, Status: metav1.ConditionTrue, ObservedGeneration: 2,
			Reason: omniav1.ReasonIdleTimeoutExceeded, Message: "scaled to zero " + wakeMarkPrefix + wakeMark(ann) + ")"}}
		return a
	}
	first := map[string]string{omniav1.AnnotationWakeRequestedAt: "2026-11-29T12:00:00Z"}
	cases := []struct {
		name string
		a    *omniav1.AgentRuntime
		want bool
	}{
		{"an agent held at zero needs a wake", held(nil), true},
		{"an agent held at zero after an earlier wake needs a new one", held(first), true},
		{"a wake already asked for is not asked again", func() *omniav1.AgentRuntime {
			a := held(nil)
			a.Annotations = first
			return a
		}(), false},
		{"a spec change already wakes the agent", func() *omniav1.AgentRuntime { a := held(nil); a.Generation = 3; return a }(), false},
		{"an agent that is not held needs none", &omniav1.AgentRuntime{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NeedsWake(tc.a); got != tc.want {
				t.Errorf("NeedsWake = %v; want %v", got, tc.want)
			}
		})
	}
}

// TestAgentPodSelectorMatchesAgentPods: the cache keeps agent pods only,
// by labels that must stay those the pods carry.
func TestAgentPodSelectorMatchesAgentPods(t *testing.T) {
	if !kubeutil.AgentPodSelector().Matches(labels.Set(SelectorLabels("a"))) {
		t.Errorf("kubeutil.AgentPodSelector %s does not match the agent pod labels %v", kubeutil.AgentPodSelector(), SelectorLabels("a"))
	}
}

// TestActivatorSliceLabelsAreValid: the slice's labels are valid label
// values (the cache selects slices by them; an invalid one fails every
// list, and no slice cache would ever sync).
func TestActivatorSliceLabelsAreValid(t *testing.T) {
	for k, v := range ActivatorSliceLabels("agent") {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("label %s=%q: %v", k, v, errs)
		}
	}
}
