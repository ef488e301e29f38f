package agentruntime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// readySnapshot is agent "agent" of namespace "ns" with every input
// usable (pack 1.0.0 Active, 1.1.0 Active too for rollouts, a Ready mock
// Provider) and nothing owned yet but the facade's access, as the
// reconciler reads it at t0. The access objects exist so each case is
// about what follows them; TestDecideFacadeAccessFirst and
// TestDecideStampsOwnership start from bareSnapshot, without them.
func readySnapshot(mut func(*omniav1.AgentRuntime)) snapshot {
	s := bareSnapshot(mut)
	d := newDecider(&s)
	if err := d.facadeAccess(); err != nil {
		panic(err)
	}
	return written(s, d.p)
}

// bareSnapshot is readySnapshot with nothing owned at all.
func bareSnapshot(mut func(*omniav1.AgentRuntime)) snapshot {
	a := agentSpec(func(a *omniav1.AgentRuntime) {
		a.UID, a.ResourceVersion = "uid-1", "7"
		a.Spec.PromptPackRef.Version = ptr("1.0.0")
		if mut != nil {
			mut(a)
		}
	})
	packs := []omniav1.PromptPack{ppack("support-v1", "1.0.0", omniav1.PromptPackPhaseActive), ppack("support-v2", "1.1.0", omniav1.PromptPackPhaseActive)}
	s := snapshot{in: inputs(a, packs, readyProvider(nil)), cfg: testConfig, now: t0}
	if rollout.Active(&a.Spec) {
		ca := a.DeepCopy()
		ca.Spec = *rollout.CandidateSpec(&a.Spec)
		s.candidate = &candidateInputs{in: inputs(ca, packs, readyProvider(nil))}
	}
	return s
}

// written turns the objects a plan writes into the live objects of the
// next pass, as the API server stores them, and the plan's status, if
// any, into the agent's.
func written(s snapshot, p plan) snapshot {
	next := s
	next.done = nil
	a := s.in.Agent.DeepCopy()
	if p.status != nil {
		a.Status = *p.status.DeepCopy()
	}
	next.in.Agent = a
	for _, w := range p.writes {
		gone := w.op == opDelete
		switch o := w.obj.DeepCopyObject().(type) {
		case *appsv1.Deployment:
			if strings.HasSuffix(w.obj.GetName(), CandidateSuffix) {
				land(&next.live.candidate, o, gone)
			} else {
				land(&next.live.stable, o, gone)
			}
		case *corev1.Service:
			land(&next.live.service, o, gone)
		case *autoscalingv2.HorizontalPodAutoscaler:
			land(&next.live.hpa, o, gone)
		case *corev1.Secret:
			land(&next.live.jwks, o, gone)
		case *corev1.ConfigMap:
			if w.obj.GetName() == CandidateToolsConfigMapName(s.in.Agent.Name) {
				land(&next.live.candidateTools, o, gone)
			} else {
				land(&next.live.tools, o, gone)
			}
		case *unstructured.Unstructured:
			land(&next.live.scaledObject, o, gone)
		case *corev1.ServiceAccount:
			land(&next.live.facadeSA, o, gone)
		case *rbacv1.Role:
			land(&next.live.facadeRole, o, gone)
		case *rbacv1.RoleBinding:
			land(&next.live.facadeBinding, o, gone)
		case *policyv1.PodDisruptionBudget:
			land(&next.live.pdb, o, gone)
		case *discoveryv1.EndpointSlice:
			if o.Name != ActivatorSliceName(a.Name) {
				continue // a stale slice of the cluster's controller
			}
			land(&next.live.activatorSlice, o, gone)
		}
	}
	return next
}

// land sets slot to what a write of o leaves there: o, or nothing once
// deleted.
func land[T client.Object](slot *found[T], o T, gone bool) {
	if gone {
		var none T
		o = none
	}
	slot.obj = o
}

// writesOf names a plan's writes: "create *v1.Deployment agent".
func writesOf(p plan) []string {
	out := make([]string, 0, len(p.writes))
	for _, w := range p.writes {
		out = append(out, fmt.Sprintf("%s %T %s", w.op, w.obj, w.obj.GetName()))
	}
	return out
}

// failed records the outcome of a plan's writes: the first ok succeed,
// the next one fails with err.
func failed(s snapshot, ok int, err error) snapshot {
	p := decide(s)
	for _, w := range p.writes[:ok] {
		s.done = append(s.done, outcome{obj: w.obj})
	}
	s.done = append(s.done, outcome{obj: p.writes[ok].obj, err: err})
	return s
}

func foreignDeployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
}

var (
	createDeployment = "create *v1.Deployment agent"
	createService    = "create *v1.Service agent"
	createHPA        = "create *v2.HorizontalPodAutoscaler agent"
	// createPDB follows the Deployment of an agent that may run more
	// than one replica.
	createPDB   = "create *v1.PodDisruptionBudget agent"
	unavailable = apierrors.NewServiceUnavailable("injected")
	forbidden   = apierrors.NewForbidden(schema.GroupResource{Resource: "any"}, "agent", errors.New("injected refusal"))
)

// TestDecide has a case per rule of one pass, on snapshots built by hand:
// the writes planned in order, the status (or none) and what the pass
// returns, after the outcomes the case records for the writes already
// made.
func TestDecide(t *testing.T) {
	replicas := func(n int32) func(*omniav1.AgentRuntime) {
		return func(a *omniav1.AgentRuntime) { a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(n)} }
	}
	canary := func(a *omniav1.AgentRuntime) {
		a.Spec.Runtime = &omniav1.RuntimeConfig{Replicas: ptr(int32(2))}
		a.Spec.Rollout = &omniav1.RolloutConfig{Candidate: roToV110(), Steps: []omniav1.RolloutStep{{SetWeight: ptr(int32(50))}},
			TrafficRouting: &omniav1.TrafficRoutingConfig{Mode: omniav1.TrafficRoutingReplicaWeighted}}
	}
	idleSince := func(action omniav1.IdleAction) func(*omniav1.AgentRuntime) {
		return func(a *omniav1.AgentRuntime) {
			a.Spec.IdleTimeout, a.Spec.IdleAction = &metav1.Duration{Duration: time.Minute}, action
			a.Status.Conditions = []metav1.Condition{{Type: omniav1.ConditionReady, Status: metav1.ConditionTrue, Reason: omniav1.ReasonRuntimeReady,
				LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour)), ObservedGeneration: a.Generation}}
		}
	}
	says := func(fragment string) func(error) bool {
		return func(err error) bool { return err != nil && strings.Contains(err.Error(), fragment) }
	}
	none := func(err error) bool { return err == nil }

	cases := []struct {
		name   string
		snap   snapshot
		writes []string
		// phase and cond ("type status reason") of the status written;
		// phase "-" when the plan writes no status.
		phase omniav1.AgentRuntimePhase
		cond  string
		err   func(error) bool
		retry bool
		// requeue is the timer of a pass that ends well.
		requeue time.Duration
		// ask is "analysis" or "issuer" when the plan stops at a question.
		ask string
		// check, when set, looks further at the writes of the plan.
		check func(t *testing.T, w []write)
	}{
		{
			name: "an unusable input builds nothing and waits for a watch event",
			snap: func() snapshot {
				s := readySnapshot(nil)
				s.in.Providers["ns/llm"].Status.Phase = omniav1.ProviderPhaseUnavailable
				return s
			}(),
			phase: omniav1.AgentRuntimePhasePending, cond: "ProviderReady False ProviderNotReady", err: none,
		},
		{
			name:  "a reference to an object that does not exist is retried with backoff",
			snap:  func() snapshot { s := readySnapshot(nil); s.in.Providers["ns/llm"] = nil; return s }(),
			phase: omniav1.AgentRuntimePhaseFailed, cond: "ProviderReady False ProviderNotFound", err: none, retry: true,
		},
		{
			name: "a framework without an image waits for an edit",
			snap: readySnapshot(func(a *omniav1.AgentRuntime) {
				a.Spec.Framework = &omniav1.FrameworkConfig{Type: omniav1.FrameworkLangChain}
			}),
			phase: omniav1.AgentRuntimePhasePending, cond: "FrameworkReady False FrameworkImageUnavailable", err: none,
		},
		{
			name:   "usable inputs write the Deployment and the Service, and success asks for no timer",
			snap:   readySnapshot(nil),
			writes: []string{createDeployment, createService},
			phase:  omniav1.AgentRuntimePhasePending, cond: "DeploymentReady True DeploymentCreated", err: none,
		},
		{
			name:   "an unchanged desired state on an unedited object is not written",
			snap:   func() snapshot { s := readySnapshot(nil); return written(s, decide(s)) }(),
			writes: []string{},
			phase:  omniav1.AgentRuntimePhasePending, cond: "ServiceReady True ServiceCreated", err: none,
		},
		{
			name: "an edited Deployment is written back",
			snap: func() snapshot {
				s := readySnapshot(nil)
				s = written(s, decide(s))
				s.live.stable.obj.Spec.Template.Spec.Containers[0].Image = "edited:1"
				return s
			}(),
			writes: []string{"update *v1.Deployment agent"},
			phase:  omniav1.AgentRuntimePhasePending, cond: "DeploymentReady True DeploymentCreated", err: none,
		},
		{
			name:   "a Deployment of the agent's name it does not control is refused: Failed, and the error returned",
			snap:   func() snapshot { s := readySnapshot(nil); s.live.stable.obj = foreignDeployment("agent"); return s }(),
			writes: []string{},
			phase:  omniav1.AgentRuntimePhaseFailed, cond: "DeploymentReady False DeploymentFailed", err: says("is not controlled by this AgentRuntime"),
		},
		{
			name:   "a transient failure writing the Deployment is returned, with no status written",
			snap:   failed(readySnapshot(nil), 0, unavailable),
			writes: []string{createDeployment},
			phase:  "-", err: apierrors.IsServiceUnavailable,
		},
		{
			name:   "a create that meets AlreadyExists is a conflict to retry, not a refusal",
			snap:   failed(readySnapshot(nil), 0, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "deployments"}, "agent")),
			writes: []string{createDeployment},
			phase:  "-", err: apierrors.IsAlreadyExists,
		},
		{
			name:   "a refused Deployment write fails the agent and is returned",
			snap:   failed(readySnapshot(nil), 0, forbidden),
			writes: []string{createDeployment},
			phase:  omniav1.AgentRuntimePhaseFailed, cond: "DeploymentReady False DeploymentFailed", err: apierrors.IsForbidden,
		},
		{
			name: "a read failure of an owned object is judged as a failed write",
			snap: func() snapshot {
				s := readySnapshot(nil)
				s.live.stable.err = fmt.Errorf("get: %w", unavailable)
				return s
			}(),
			writes: []string{},
			phase:  "-", err: apierrors.IsServiceUnavailable,
		},
		{
			name:   "an HPA write failure is recorded after the Deployment and Service are written, and returned",
			snap:   failed(readySnapshot(autoscaledAgentSpec), 3, forbidden),
			writes: []string{createDeployment, createPDB, createService, createHPA},
			phase:  omniav1.AgentRuntimePhasePending, cond: "AutoscalingReady False Error", err: apierrors.IsForbidden,
		},
		{
			name: "an HPA of the agent's name it does not control is refused, never taken over",
			snap: func() snapshot {
				s := readySnapshot(autoscaledAgentSpec)
				s.live.hpa.obj = &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns"}}
				return s
			}(),
			writes: []string{createDeployment, createPDB, createService},
			phase:  omniav1.AgentRuntimePhasePending, cond: "AutoscalingReady False NotOwned", err: says("is not controlled by this AgentRuntime"),
		},
		{
			name:   "a rollout splits the replicas between the stable Deployment and the candidate",
			snap:   readySnapshot(canary),
			writes: []string{"create *v1.Deployment agent-canary", createDeployment, createPDB, createService},
			phase:  omniav1.AgentRuntimePhasePending, cond: "RolloutActive True RolloutInProgress", err: none, requeue: rollout.StepRequeue,
			check: func(t *testing.T, w []write) { wantReplicas(t, w[0], 1); wantReplicas(t, w[1], 1) },
		},
		{
			name: "a rollout failure still applies the stable Deployment at its full count, and is returned",
			snap: func() snapshot {
				s := readySnapshot(canary)
				s.live.candidate.obj = foreignDeployment("agent-canary")
				return s
			}(),
			writes: []string{createDeployment, createPDB, createService},
			phase:  omniav1.AgentRuntimePhasePending, cond: "RolloutActive True RolloutFailed", err: says("agent-canary exists and is not controlled"),
			check: func(t *testing.T, w []write) { wantReplicas(t, w[0], 2) },
		},
		{
			name: "a rollout write refused for a reason a retry may not meet ends the pass, the stable Deployment left at its share",
			snap: failed(readySnapshot(func(a *omniav1.AgentRuntime) {
				canary(a)
				a.Status.Rollout = &omniav1.RolloutStatus{Active: true, CandidateVersion: "1.1.0", CurrentStep: ptr(int32(1)), CurrentWeight: ptr(int32(50))}
			}), 0, apierrors.NewConflict(schema.GroupResource{Group: "omnia.altairalabs.ai", Resource: "agentruntimes"}, "agent", errors.New("modified"))),
			writes: []string{"record status *v1alpha1.AgentRuntime agent"},
			phase:  "-", err: apierrors.IsConflict,
		},
		{
			name: "a version trigger writes the candidate into the spec and ends the pass",
			snap: readySnapshot(func(a *omniav1.AgentRuntime) {
				a.Spec.Rollout = &omniav1.RolloutConfig{Trigger: &omniav1.RolloutTrigger{PromptPackChannel: omniav1.ChannelStable}}
				a.Status.ActiveVersion = ptr("1.0.0")
			}),
			writes: []string{"update agent *v1alpha1.AgentRuntime agent"},
			phase:  "", cond: "FrameworkReady True FrameworkImageResolved", err: none,
		},
		{
			name: "a promotion is recorded in the status before its spec write",
			snap: readySnapshot(func(a *omniav1.AgentRuntime) {
				canary(a)
				a.Status.Rollout = &omniav1.RolloutStatus{Active: true, CandidateVersion: "1.1.0", CurrentStep: ptr(int32(1)), CurrentWeight: ptr(int32(50))}
			}),
			writes: []string{"record status *v1alpha1.AgentRuntime agent", "update agent *v1alpha1.AgentRuntime agent"},
			phase:  "", cond: "RolloutActive True Promoting", err: none, requeue: rollout.PromotionRequeue,
			check: func(t *testing.T, w []write) {
				rec, upd := w[0].obj.(*omniav1.AgentRuntime), w[1].obj.(*omniav1.AgentRuntime)
				if ro := rec.Status.Rollout; ro == nil || !ro.Promoting || ro.PromotedGeneration == nil || *ro.PromotedGeneration != rec.Generation {
					t.Errorf("recorded status.rollout %+v; want promoting at generation %d", ro, rec.Generation)
				}
				if v := upd.Spec.PromptPackRef.Version; v == nil || *v != "1.1.0" {
					t.Errorf("promoted promptPackRef %+v; want version 1.1.0", upd.Spec.PromptPackRef)
				}
			},
		},
		{
			name: "an analysis step asks for its outcome before any write",
			snap: readySnapshot(func(a *omniav1.AgentRuntime) {
				canary(a)
				a.Spec.Rollout.Steps = []omniav1.RolloutStep{{Analysis: &omniav1.RolloutAnalysisStep{TemplateName: "errors"}}}
			}),
			writes: []string{}, ask: "analysis",
		},
		{
			name: "a stale OIDC key mirror asks the issuer after the owned objects are written",
			snap: readySnapshot(func(a *omniav1.AgentRuntime) {
				a.Spec.ExternalAuth = &omniav1.ExternalAuthConfig{OIDC: &omniav1.OIDCAuth{Issuer: "https://issuer.example", Audience: "agents"}}
			}),
			writes: []string{createDeployment, createService}, ask: "issuer",
		},
		{
			name: "the mirrored key set is refreshed on a timer",
			snap: func() snapshot {
				s := readySnapshot(func(a *omniav1.AgentRuntime) {
					a.Spec.ExternalAuth = &omniav1.ExternalAuthConfig{OIDC: &omniav1.OIDCAuth{Issuer: "https://issuer.example", Audience: "agents"}}
				})
				s.keySet = &keySetAnswer{jwks: []byte(testKeySet)}
				return s
			}(),
			writes: []string{createDeployment, createService, "create *v1.Secret agent-agent-oidc-jwks"},
			phase:  omniav1.AgentRuntimePhasePending, cond: "OIDCJWKSReady True JWKSUpdated", err: none, requeue: JWKSRefresh,
		},
		{
			name:   "past the idle deadline, idleAction delete deletes the agent as read and writes no status",
			snap:   readySnapshot(idleSince(omniav1.IdleDelete)),
			writes: []string{"delete *v1alpha1.AgentRuntime agent"},
			phase:  "-", err: none,
			check: func(t *testing.T, w []write) {
				if pc := w[0].preconditions; pc == nil || pc.UID == nil || *pc.UID != "uid-1" || pc.ResourceVersion == nil || *pc.ResourceVersion != "7" {
					t.Errorf("delete preconditions %+v; want the UID and resourceVersion read", pc)
				}
			},
		},
		{
			name:   "past the idle deadline, idleAction scaleToZero holds the agent at zero replicas",
			snap:   readySnapshot(idleSince(omniav1.IdleScaleToZero)),
			writes: []string{createDeployment, createService},
			phase:  omniav1.AgentRuntimePhasePending, cond: "Idle True IdleTimeoutExceeded", err: none,
			check: func(t *testing.T, w []write) { wantReplicas(t, w[0], 0) },
		},
		{
			name: "before the idle deadline the only timer is the time left",
			snap: readySnapshot(func(a *omniav1.AgentRuntime) {
				idleSince("")(a)
				a.Status.LastActivityTime = ptr(metav1.NewTime(t0.Add(-20 * time.Second)))
			}),
			writes: []string{createDeployment, createService},
			phase:  omniav1.AgentRuntimePhasePending, cond: "Idle False Active", err: none, requeue: 40 * time.Second,
		},
		{
			name: "a Deployment the idle deadline held at zero and an HPA own is raised to the HPA's minimum on waking",
			snap: func() snapshot {
				s := readySnapshot(autoscaledAgentSpec)
				s = written(s, decide(s))
				s.live.stable.obj.Spec.Replicas = ptr(int32(0))
				return s
			}(),
			writes: []string{"update *v1.Deployment agent"},
			phase:  omniav1.AgentRuntimePhasePending, cond: "AutoscalingReady True Scaling", err: none,
			check: func(t *testing.T, w []write) { wantReplicas(t, w[0], 1) },
		},
		{
			name: "a replica count edited by hand is written back",
			snap: func() snapshot {
				s := readySnapshot(replicas(3))
				s = written(s, decide(s))
				s.live.stable.obj.Spec.Replicas = ptr(int32(5))
				return s
			}(),
			writes: []string{"update *v1.Deployment agent"},
			phase:  omniav1.AgentRuntimePhasePending, cond: "DeploymentReady True DeploymentCreated", err: none,
			check: func(t *testing.T, w []write) { wantReplicas(t, w[0], 3) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := decide(tc.snap)
			if again := decide(tc.snap); !slices.Equal(writesOf(p), writesOf(again)) {
				t.Fatalf("the same snapshot planned %v, then %v", writesOf(p), writesOf(again))
			}
			if got := writesOf(p); tc.writes != nil && !slices.Equal(got, tc.writes) {
				t.Fatalf("writes %q; want %q", got, tc.writes)
			}
			if tc.check != nil {
				tc.check(t, p.writes)
			}
			if tc.ask != "" || p.ask != nil {
				switch {
				case tc.ask == "analysis" && p.ask != nil && p.ask.analysis != nil,
					tc.ask == "issuer" && p.ask != nil && p.ask.issuer != "":
				default:
					t.Fatalf("asks %+v; want %q", p.ask, tc.ask)
				}
				return
			}
			if len(tc.snap.done) < len(p.writes) {
				// The outcomes of the writes still to make are assumed;
				// the reconciler decides again once they are known.
				p = decide(succeeded(tc.snap, p))
			}
			if tc.phase == "-" {
				if p.status != nil {
					t.Fatalf("status %+v written; want none", p.status)
				}
			} else {
				if p.status == nil {
					t.Fatal("no status written")
				}
				if p.status.Phase != tc.phase {
					t.Errorf("phase %q; want %q", p.status.Phase, tc.phase)
				}
				f := strings.Fields(tc.cond)
				c := meta.FindStatusCondition(p.status.Conditions, f[0])
				if c == nil || string(c.Status) != f[1] || c.Reason != f[2] {
					t.Errorf("%s = %+v; want %s/%s", f[0], c, f[1], f[2])
				}
				for _, c := range p.status.Conditions {
					if c.ObservedGeneration != tc.snap.in.Agent.Generation {
						t.Errorf("condition %s at generation %d; want %d", c.Type, c.ObservedGeneration, tc.snap.in.Agent.Generation)
					}
				}
			}
			if !tc.err(p.err) {
				t.Errorf("err %v: not what the rule returns", p.err)
			}
			if (p.retry != nil) != tc.retry {
				t.Errorf("retry %v; want one: %v", p.retry, tc.retry)
			}
			if p.err == nil && p.requeueAfter != tc.requeue {
				t.Errorf("requeue %s; want %s", p.requeueAfter, tc.requeue)
			}
		})
	}
}

// wantReplicas checks the replica count a Deployment write sends.
func wantReplicas(t *testing.T, w write, n int32) {
	t.Helper()
	d, ok := w.obj.(*appsv1.Deployment)
	switch {
	case !ok:
		t.Errorf("%s %T: not a Deployment", w.op, w.obj)
	case d.Spec.Replicas == nil || *d.Spec.Replicas != n:
		t.Errorf("%s Deployment %s: replicas %v; want %d", w.op, d.Name, d.Spec.Replicas, n)
	}
}

// succeeded records the writes of p not yet made as made.
func succeeded(s snapshot, p plan) snapshot {
	for _, w := range p.writes[len(s.done):] {
		s.done = append(s.done, outcome{obj: w.obj})
	}
	return s
}

// TestDecideStampsOwnership: every object a plan creates is controlled by
// the agent, and the owned objects carry the applied hash the next pass
// compares.
func TestDecideStampsOwnership(t *testing.T) {
	s := bareSnapshot(func(a *omniav1.AgentRuntime) {
		autoscaledAgentSpec(a)
		a.Spec.ExternalAuth = &omniav1.ExternalAuthConfig{OIDC: &omniav1.OIDCAuth{Issuer: "https://issuer.example", Audience: "agents"}}
	})
	s.keySet = &keySetAnswer{jwks: []byte(testKeySet)}
	p := decide(s)
	if len(p.writes) != 8 {
		t.Fatalf("writes %q", writesOf(p))
	}
	for _, w := range p.writes {
		refs := w.obj.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != "uid-1" || refs[0].Kind != "AgentRuntime" || refs[0].APIVersion != omniav1.GroupVersion.String() ||
			refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%T owner references %+v; want the agent as controller", w.obj, refs)
		}
		if _, ok := w.obj.(*corev1.Secret); !ok && w.obj.GetAnnotations()[AnnotationAppliedHash] == "" {
			t.Errorf("%T carries no applied hash", w.obj)
		}
	}
}

func autoscaledAgentSpec(a *omniav1.AgentRuntime) {
	a.Spec.Runtime = &omniav1.RuntimeConfig{Autoscaling: &omniav1.AutoscalingConfig{Enabled: true, MaxReplicas: ptr(int32(4))}}
}

// TestDecideFacadeAccessFirst: a new agent's facade ServiceAccount, Role
// and RoleBinding are created before its Deployment, whose pods name the
// account; a RoleBinding whose roleRef differs is replaced, since roleRef
// cannot be changed; and a failed access write fails the agent with the
// object named, writing no Deployment.
func TestDecideFacadeAccessFirst(t *testing.T) {
	p := decide(bareSnapshot(nil))
	want := []string{"create *v1.ServiceAccount agent-facade", "create *v1.Role agent-facade", "create *v1.RoleBinding agent-facade",
		"create *v1.Deployment agent", "create *v1.Service agent"}
	if got := writesOf(p); !slices.Equal(got, want) {
		t.Fatalf("writes %q; want %q", got, want)
	}

	s := readySnapshot(nil)
	s.live.facadeBinding.obj.RoleRef.Name = "cluster-admin"
	if got := writesOf(decide(s)); len(got) == 0 || got[0] != "delete *v1.RoleBinding agent-facade" {
		t.Fatalf("a binding of another role: writes %q; want its delete first", got)
	}

	s = bareSnapshot(nil)
	s.done = []outcome{{err: apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts"}, "agent-facade", errors.New("no"))}}
	p = decide(s)
	if got := writesOf(p); len(got) != 1 {
		t.Fatalf("after a refused ServiceAccount: writes %q; want none more", got)
	}
	c := meta.FindStatusCondition(p.status.Conditions, omniav1.ConditionDeploymentReady)
	if p.status.Phase != omniav1.AgentRuntimePhaseFailed || c == nil || !strings.Contains(c.Message, "ServiceAccount ns/agent-facade") {
		t.Fatalf("phase %s DeploymentReady %+v; want Failed naming the ServiceAccount", p.status.Phase, c)
	}
}
