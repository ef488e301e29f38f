package node_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("never saw %s", what)
}

// TestNodeRegistration: the Node is Ready with capacity, only a loopback
// InternalIP, the kubelet endpoint port and well-known labels, and its
// Lease is held in kube-node-lease.
func TestNodeRegistration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The API server taints a new Node not-ready; the node lifecycle
	// controller lifts the taint once the Node reports Ready.
	var n *corev1.Node
	waitFor(t, "the node untainted", func() bool {
		var err error
		n, err = env.Kube.CoreV1().Nodes().Get(ctx, shared.Name(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(n.Spec.Taints) == 0
	})
	ready := false
	for _, c := range n.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready {
		t.Errorf("node not Ready: %+v", n.Status.Conditions)
	}
	if len(n.Status.Addresses) != 1 || n.Status.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}) {
		t.Errorf("addresses %+v, want only InternalIP 127.0.0.1", n.Status.Addresses)
	}
	if got := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port); got != shared.KubeletPort() || got == 0 {
		t.Errorf("kubelet endpoint port %d, node serves on %d", got, shared.KubeletPort())
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if q, ok := n.Status.Allocatable[r]; !ok || q.IsZero() {
			t.Errorf("allocatable %s missing", r)
		}
		if q, ok := n.Status.Capacity[r]; !ok || q.IsZero() {
			t.Errorf("capacity %s missing", r)
		}
	}
	if n.Labels[corev1.LabelHostname] != shared.Name() || n.Labels[corev1.LabelOSStable] != "linux" {
		t.Errorf("labels %v", n.Labels)
	}
	lease, err := env.Kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, shared.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != shared.Name() || lease.Spec.RenewTime == nil {
		t.Errorf("lease %+v", lease.Spec)
	}
}

// TestScheduling: a pod whose nodeSelector the node doesn't match stays
// Pending with PodScheduled=False/Unschedulable, and is bound and run once
// the node gains the label; a pod tolerating nothing is bound to the
// untainted node.
func TestScheduling(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	label := "localnode-test/" + ns
	pod := podSpec("picky", sh("main", "echo ran"))
	pod.Spec.NodeSelector = map[string]string{label: "yes", corev1.LabelOSStable: "linux"}
	createPod(t, ns, pod)
	p := waitPod(t, ns, "picky", "PodScheduled=False", func(p *corev1.Pod) bool {
		return p != nil && condition(p, corev1.PodScheduled) == corev1.ConditionFalse
	})
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		t.Fatalf("pod should stay Pending and unbound: %s", describe(p))
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason != "Unschedulable" {
			t.Errorf("PodScheduled reason %q, want Unschedulable", c.Reason)
		}
	}
	patch := []byte(`{"metadata":{"labels":{"` + label + `":"yes"}}}`)
	if _, err := env.Kube.CoreV1().Nodes().Patch(ctx, shared.Name(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		patch := []byte(`{"metadata":{"labels":{"` + label + `":null}}}`)
		_, _ = env.Kube.CoreV1().Nodes().Patch(ctx, shared.Name(), types.MergePatchType, patch, metav1.PatchOptions{})
	})
	p = waitPod(t, ns, "picky", "Succeeded", phaseIs(corev1.PodSucceeded))
	if p.Spec.NodeName != shared.Name() || condition(p, corev1.PodScheduled) != corev1.ConditionTrue {
		t.Fatalf("pod should be bound and scheduled: %s", describe(p))
	}
}
