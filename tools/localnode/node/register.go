package node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

const (
	leaseNamespace = "kube-node-lease"
	// leaseDurationSeconds matches a kubelet's default.
	leaseDurationSeconds = 40
	// statusReportInterval is how often the Node status is refreshed even
	// when nothing changed, so its heartbeat times stay recent.
	statusReportInterval = time.Minute
	// hostIP is the only address of the node and of every pod.
	hostIP = "127.0.0.1"
	// kubeletVersion names this node's implementation in NodeInfo.
	kubeletVersion = "v1.36.3-localnode"
)

// nodeLabels are the Node's labels: the well-known ones plus Config.Labels.
func (n *Node) nodeLabels() map[string]string {
	l := map[string]string{
		corev1.LabelHostname:   n.cfg.Name,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
	}
	for k, v := range n.cfg.Labels {
		l[k] = v
	}
	return l
}

// nodeStatus is the whole status this node reports.
func (n *Node) nodeStatus(prev *corev1.NodeStatus) corev1.NodeStatus {
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(hostMemory(), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(int64(n.cfg.MaxPods), resource.DecimalSI),
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		if prev != nil {
			for _, p := range prev.Conditions {
				if p.Type == t && p.Status == s {
					c.LastTransitionTime = p.LastTransitionTime
				}
			}
		}
		return c
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "localnode does not track memory pressure"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "localnode does not track disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "localnode does not track PID pressure"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "localnode is posting ready status"),
		},
		// Only an InternalIP: with a Hostname address first the apiserver
		// would resolve the name for pods/log.
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.cfg.Address}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(n.logServer.port)}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               machineID(),
			KernelVersion:           kernelVersion(),
			OSImage:                 "localnode (host root filesystem)",
			ContainerRuntimeVersion: "localnode://" + kubeletVersion,
			KubeletVersion:          kubeletVersion,
			OperatingSystem:         "linux",
			Architecture:            runtime.GOARCH,
		},
	}
}

// register creates the Node, or takes over an existing one of the same
// name (a restart), and writes its status.
func (n *Node) register(ctx context.Context) error {
	nodes := n.kube.CoreV1().Nodes()
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Labels: n.nodeLabels()},
		Spec: corev1.NodeSpec{Taints: n.cfg.Taints}}
	created, err := nodes.Create(ctx, obj, metav1.CreateOptions{})
	switch {
	case err == nil:
		obj = created
	case apierrors.IsAlreadyExists(err):
		// The node lifecycle controller may be updating the Node (taints)
		// at the same time: retry on conflict.
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			existing, err := nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if existing.Labels == nil {
				existing.Labels = map[string]string{}
			}
			for k, v := range n.nodeLabels() {
				existing.Labels[k] = v
			}
			existing.Spec.Taints = mergeTaints(existing.Spec.Taints, n.cfg.Taints)
			obj, err = nodes.Update(ctx, existing, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("localnode: update labels of existing node %s: %w", n.cfg.Name, err)
		}
	default:
		return fmt.Errorf("localnode: create node %s: %w", n.cfg.Name, err)
	}
	if err := n.writeNodeStatus(ctx, obj); err != nil {
		return err
	}
	return n.renewLease(ctx, obj)
}

// writeNodeStatus writes the node status, re-reading the Node on conflict.
func (n *Node) writeNodeStatus(ctx context.Context, obj *corev1.Node) error {
	nodes := n.kube.CoreV1().Nodes()
	for attempt := 0; ; attempt++ {
		obj.Status = n.nodeStatus(&obj.Status)
		_, err := nodes.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 5 {
			return fmt.Errorf("localnode: write status of node %s: %w", n.cfg.Name, err)
		}
		if obj, err = nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("localnode: re-read node %s: %w", n.cfg.Name, err)
		}
	}
}

// renewLease creates or renews the node Lease the node lifecycle controller
// watches; a lapsed Lease gets the node tainted unreachable.
func (n *Node) renewLease(ctx context.Context, owner *corev1.Node) error {
	leases := n.kube.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, n.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Namespace: leaseNamespace},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(n.cfg.Name), LeaseDurationSeconds: ptr.To[int32](leaseDurationSeconds), RenewTime: &now,
			},
		}
		if owner != nil {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: owner.Name, UID: owner.UID}}
		}
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("localnode: create lease: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("localnode: read lease: %w", err)
	}
	lease.Spec.HolderIdentity = ptr.To(n.cfg.Name)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](leaseDurationSeconds)
	lease.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("localnode: renew lease: %w", err)
	}
	return nil
}

// heartbeat renews the Lease and periodically refreshes the Node status
// until ctx, the node's lifetime, ends.
func (n *Node) heartbeat(ctx context.Context) {
	leaseTick := time.NewTicker(n.cfg.LeaseRenewInterval)
	defer leaseTick.Stop()
	statusTick := time.NewTicker(statusReportInterval)
	defer statusTick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-leaseTick.C:
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := n.renewLease(ctx, nil); err != nil {
				n.log.Warn("lease renewal failed", "err", err)
			}
			cancel()
		case <-statusTick.C:
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			obj, err := n.kube.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{})
			if err == nil {
				err = n.writeNodeStatus(ctx, obj)
			}
			if err != nil {
				n.log.Warn("node status update failed", "err", err)
			}
			cancel()
		}
	}
}

// hostMemory reads MemTotal from /proc/meminfo; 0 when unreadable.
func hostMemory() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

func machineID() string {
	raw, err := os.ReadFile("/etc/machine-id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

func kernelVersion() string {
	raw, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

// mergeTaints adds the configured taints a Node lacks, keeping the ones
// others put there (the node lifecycle controller's).
func mergeTaints(have, want []corev1.Taint) []corev1.Taint {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h.Key == w.Key && h.Effect == w.Effect
		}
		if !found {
			have = append(have, w)
		}
	}
	return have
}
