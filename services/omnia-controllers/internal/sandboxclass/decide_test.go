package sandboxclass

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/proptest"
)

var t0 = metav1.NewTime(proptest.Epoch)

func class(gen int64, runtime string, conns ...string) *omniav1.SandboxClass {
	c := &omniav1.SandboxClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor", Namespace: "ns", Generation: gen},
		Spec: omniav1.SandboxClassSpec{Image: "sandbox:1"}}
	if runtime != "" {
		c.Spec.RuntimeClassName = &runtime
	}
	for _, n := range conns {
		c.Spec.AllowedConnections = append(c.Spec.AllowedConnections, omniav1.LocalObjectReference{Name: n})
	}
	return c
}

func runtimeClassObj(name string) *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: "runsc"}
}

func resources(req, lim string) *corev1.ResourceRequirements {
	return &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(req), corev1.ResourceCPU: resource.MustParse("100m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(lim)},
	}
}

// TestDecide has one case per rule of the SandboxClass controller.
func TestDecide(t *testing.T) {
	bigRequest := class(1, "")
	bigRequest.Spec.Resources = resources("2Gi", "1Gi")
	fitting := class(1, "")
	fitting.Spec.Resources = resources("1Gi", "1Gi")
	everything := class(1, "gvisor", "github")
	everything.Spec.Resources = resources("2Gi", "1Gi")
	noEgress := class(1, "")
	noEgress.Spec.Network = &omniav1.SandboxNetwork{Egress: omniav1.SandboxEgressNone}
	failed := class(2, "gvisor")
	failed.Status = Decide(Snapshot{Class: class(1, "gvisor"), Now: t0}).Status
	cases := []struct {
		name   string
		snap   Snapshot
		phase  omniav1.SandboxClassPhase
		reason string
		msg    string
		events int
		retry  bool
	}{
		{name: "nothing referenced: Ready on the cluster's default runtime",
			snap:  Snapshot{Class: class(1, "")},
			phase: omniav1.SandboxClassPhaseReady, reason: omniav1.ReasonSandboxClassValid, msg: "image sandbox:1 on the cluster's default runtime, egress connections, 0 allowed Connection(s)"},
		{name: "the RuntimeClass and every allowed Connection exist: Ready, Valid",
			snap:  Snapshot{Class: class(1, "gvisor", "github", "slack"), RuntimeClass: runtimeClassObj("gvisor"), Connections: map[string]bool{"github": true, "slack": true}},
			phase: omniav1.SandboxClassPhaseReady, reason: omniav1.ReasonSandboxClassValid, msg: "on RuntimeClass gvisor, egress connections, 2 allowed Connection(s)"},
		{name: "egress none with no Connections is valid",
			snap:  Snapshot{Class: noEgress},
			phase: omniav1.SandboxClassPhaseReady, reason: omniav1.ReasonSandboxClassValid, msg: "egress none"},
		{name: "a missing RuntimeClass: Failed, RuntimeClassNotFound, a Warning event, retried",
			snap:  Snapshot{Class: class(1, "kata")},
			phase: omniav1.SandboxClassPhaseFailed, reason: omniav1.ReasonRuntimeClassNotFound, msg: `RuntimeClass "kata" not found`, events: 1, retry: true},
		{name: "a missing allowed Connection: Failed, ConnectionNotFound naming each, a Warning event, retried",
			snap:  Snapshot{Class: class(1, "", "github", "slack", "jira"), Connections: map[string]bool{"slack": true}},
			phase: omniav1.SandboxClassPhaseFailed, reason: omniav1.ReasonAllowedConnectionNotFound, msg: "allowed Connection not found: github, jira", events: 1, retry: true},
		{name: "a request above its limit: Failed, ResourcesInvalid, not retried (an edit fixes it)",
			snap:  Snapshot{Class: bigRequest},
			phase: omniav1.SandboxClassPhaseFailed, reason: omniav1.ReasonSandboxResourcesInvalid, msg: "spec.resources requests more than it limits: memory 2Gi > 1Gi", events: 1},
		{name: "a request equal to its limit, or without one, is valid",
			snap:  Snapshot{Class: fitting},
			phase: omniav1.SandboxClassPhaseReady, reason: omniav1.ReasonSandboxClassValid},
		{name: "several faults: every one named, the first's reason, retried for the missing objects",
			snap:  Snapshot{Class: everything},
			phase: omniav1.SandboxClassPhaseFailed, reason: omniav1.ReasonSandboxResourcesInvalid,
			msg: `memory 2Gi > 1Gi; RuntimeClass "gvisor" not found; allowed Connection not found: github`, events: 1, retry: true},
		{name: "a fault already recorded emits no second event, for the new generation too",
			snap:  Snapshot{Class: failed},
			phase: omniav1.SandboxClassPhaseFailed, reason: omniav1.ReasonRuntimeClassNotFound, retry: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.snap.Now = t0
			d := Decide(tc.snap)
			st := d.Status
			proptest.ReadyWant[omniav1.SandboxClassPhase]{Gen: tc.snap.Class.Generation, Phase: tc.phase, ReadyPhase: omniav1.SandboxClassPhaseReady,
				Reason: tc.reason, Msg: tc.msg}.Check(t, st.Phase, st.ObservedGeneration, st.Conditions)
			if len(d.Events) != tc.events || (d.Retry != nil) != tc.retry {
				t.Fatalf("events %+v retry %v; want %d events, retry %v", d.Events, d.Retry, tc.events, tc.retry)
			}
		})
	}
}
