package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// reasonUnschedulable is the PodScheduled=False reason a scheduler uses.
const reasonUnschedulable = "Unschedulable"

// enqueueBind queues an unbound pod for the binder.
func (n *Node) enqueueBind(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err == nil {
		n.bindQueue.Add(key)
	}
}

// enqueueAllUnbound queues every waiting pod, after the node changed.
func (n *Node) enqueueAllUnbound() {
	pods, err := n.unbound.List(labels.Everything())
	if err != nil {
		return
	}
	for _, p := range pods {
		n.enqueueBind(p)
	}
}

// runBinder binds queued pods one at a time; there is a single node, so
// there is nothing to choose between, only whether the pod fits. It stops
// when the queue shuts down; ctx is the node's lifetime.
func (n *Node) runBinder(ctx context.Context) {
	for {
		key, shutdown := n.bindQueue.Get()
		if shutdown {
			return
		}
		err := n.bindOne(ctx, key)
		if err != nil {
			n.log.Warn("bind failed", "pod", key, "err", err)
			n.bindQueue.AddRateLimited(key)
		} else {
			n.bindQueue.Forget(key)
		}
		n.bindQueue.Done(key)
	}
}

// bindOne binds one pod through pods/binding when it fits this node, and
// otherwise records PodScheduled=False with the reason on the pod.
func (n *Node) bindOne(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := n.unbound.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read pod %s from cache: %w", key, err)
	}
	if !wantsScheduling(pod) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	node, err := n.nodes.Get(n.cfg.Name)
	if err != nil {
		return fmt.Errorf("read node %s from cache for binding: %w", n.cfg.Name, err)
	}
	if reason := unfit(pod, node); reason != "" {
		// A node update queues the pod again.
		return n.markUnschedulable(ctx, pod, reason)
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.cfg.Name},
	}
	err = n.kube.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Deleted, or bound meanwhile: nothing left to do.
		return nil
	}
	if err != nil {
		return fmt.Errorf("bind pod %s to %s: %w", key, n.cfg.Name, err)
	}
	return nil
}

// wantsScheduling says whether a pod is waiting for the default scheduler.
func wantsScheduling(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || len(pod.Spec.SchedulingGates) > 0 {
		return false
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	return pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == corev1.DefaultSchedulerName
}

// unfit returns why pod cannot run on node, or "" when it can.
func unfit(pod *corev1.Pod, node *corev1.Node) string {
	if node.Spec.Unschedulable && !tolerates(pod.Spec.Tolerations, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return fmt.Sprintf("node %s is cordoned (unschedulable)", node.Name)
	}
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return fmt.Sprintf("node %s does not match the pod's nodeSelector %s=%s", node.Name, k, v)
		}
	}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		if !matchesNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, node) {
			return fmt.Sprintf("node %s does not match the pod's required node affinity", node.Name)
		}
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !tolerates(pod.Spec.Tolerations, t) {
			return fmt.Sprintf("node %s has taint {%s: %s} that the pod doesn't tolerate", node.Name, t.Key, t.Effect)
		}
	}
	return ""
}

// tolerates applies the toleration matching rules of the core API.
func tolerates(tols []corev1.Toleration, taint corev1.Taint) bool {
	for _, t := range tols {
		if t.Effect != "" && t.Effect != taint.Effect {
			continue
		}
		if t.Key == "" && t.Operator == corev1.TolerationOpExists {
			return true
		}
		if t.Key != taint.Key {
			continue
		}
		switch t.Operator {
		case corev1.TolerationOpExists:
			return true
		case "", corev1.TolerationOpEqual:
			if t.Value == taint.Value {
				return true
			}
		}
	}
	return false
}

// matchesNodeSelector evaluates required node affinity: terms are ORed,
// the requirements inside a term ANDed.
func matchesNodeSelector(sel *corev1.NodeSelector, node *corev1.Node) bool {
	for _, term := range sel.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		ok := true
		for _, r := range term.MatchExpressions {
			v, has := node.Labels[r.Key]
			ok = ok && requirementHolds(r, v, has)
		}
		for _, r := range term.MatchFields {
			ok = ok && r.Key == "metadata.name" && requirementHolds(r, node.Name, true)
		}
		if ok {
			return true
		}
	}
	return false
}

func requirementHolds(r corev1.NodeSelectorRequirement, v string, has bool) bool {
	in := func() bool {
		for _, x := range r.Values {
			if x == v {
				return true
			}
		}
		return false
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && in()
	case corev1.NodeSelectorOpNotIn:
		return !has || !in()
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		got, err1 := strconv.ParseInt(v, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return got > want
		}
		return got < want
	}
	return false
}

// markUnschedulable records why the pod stays Pending, as a scheduler does,
// skipping the write when the pod already says so.
func (n *Node) markUnschedulable(ctx context.Context, pod *corev1.Pod, reason string) error {
	msg := "0/1 nodes are available: " + strings.TrimSuffix(reason, ".") + "."
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == reasonUnschedulable && c.Message == msg {
			return nil
		}
	}
	cp := pod.DeepCopy()
	setPodCondition(&cp.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reasonUnschedulable, Message: msg})
	cp.Status.Phase = corev1.PodPending
	_, err := n.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("record unschedulable pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// setPodCondition replaces or appends a condition, keeping the transition
// time when the status did not change.
func setPodCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	now := metav1.Now()
	for i := range st.Conditions {
		if st.Conditions[i].Type != c.Type {
			continue
		}
		if st.Conditions[i].Status == c.Status {
			c.LastTransitionTime = st.Conditions[i].LastTransitionTime
		} else {
			c.LastTransitionTime = now
		}
		c.LastProbeTime = st.Conditions[i].LastProbeTime
		st.Conditions[i] = c
		return
	}
	c.LastTransitionTime = now
	st.Conditions = append(st.Conditions, c)
}
