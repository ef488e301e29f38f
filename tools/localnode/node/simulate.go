package node

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// SimulatedRuns makes a node run nothing: a pod bound to it goes Running
// at once and Succeeded (every container terminated with exit code 0)
// after a run length between Min and Max, so a control plane can be
// loaded with thousands of "running" pods that cost no process each
// (docs/localnode.md, docs/benchmarks.md).
type SimulatedRuns struct {
	Min, Max time.Duration
}

// simulateWorkers is how many pod statuses a simulating node writes at
// once: enough to keep up with the client rate limit, not one per pod.
const simulateWorkers = 8

// ParseSimulatedRuns reads a run length range, "30s-120s", or one length,
// "45s", for runs that all last the same.
func ParseSimulatedRuns(s string) (*SimulatedRuns, error) {
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		hi = lo
	}
	minD, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return nil, fmt.Errorf("simulated run length %q: %w", s, err)
	}
	maxD, err := time.ParseDuration(strings.TrimSpace(hi))
	if err != nil {
		return nil, fmt.Errorf("simulated run length %q: %w", s, err)
	}
	if minD < 0 || maxD < minD {
		return nil, fmt.Errorf("simulated run length %q: want MIN-MAX with 0 <= MIN <= MAX", s)
	}
	return &SimulatedRuns{Min: minD, Max: maxD}, nil
}

// runLength is the pod's run length, drawn from its UID: random from pod
// to pod (UIDs are), and the same for a pod after the node restarts.
func (r SimulatedRuns) runLength(pod *corev1.Pod) time.Duration {
	span := r.Max - r.Min
	if span <= 0 {
		return r.Min
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(pod.UID))
	return r.Min + time.Duration(h.Sum64()%uint64(span+1))
}

// simulatedStatus is the status of a simulated pod at now: Running from its
// start (now, for a pod not yet started) for length, then Succeeded. Every
// time in it derives from the start time, so computing it again gives the
// same status and a write is skipped; next is when it changes (zero once
// terminal). Conditions of types this node does not own are kept.
func simulatedStatus(pod *corev1.Pod, length time.Duration, now time.Time) (st corev1.PodStatus, next time.Time) {
	st = *pod.Status.DeepCopy()
	start := metav1.NewTime(now).Rfc3339Copy()
	if st.StartTime != nil {
		start = *st.StartTime
	}
	end := metav1.NewTime(start.Add(length))
	done := !now.Before(end.Time)
	st.StartTime = &start
	st.HostIP, st.PodIP = hostIP, hostIP
	st.HostIPs, st.PodIPs = []corev1.HostIP{{IP: hostIP}}, []corev1.PodIP{{IP: hostIP}}
	st.Reason, st.Message = "", ""
	terminated := func(c corev1.Container, i int, init bool) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "localnode://" + c.Image,
			ContainerID: simulatedContainerID(pod, c.Name, init, i),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: start, FinishedAt: end,
				ContainerID: simulatedContainerID(pod, c.Name, init, i)}},
			Started: ptr.To(false)}
	}
	running := func(c corev1.Container, i int, init bool) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "localnode://" + c.Image,
			ContainerID: simulatedContainerID(pod, c.Name, init, i),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}},
			Started:     ptr.To(true), Ready: true}
	}
	st.InitContainerStatuses = nil
	for i, c := range pod.Spec.InitContainers {
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		if sidecar && !done {
			st.InitContainerStatuses = append(st.InitContainerStatuses, running(c, i, true))
		} else {
			st.InitContainerStatuses = append(st.InitContainerStatuses, terminated(c, i, true))
		}
	}
	st.ContainerStatuses = nil
	for i, c := range pod.Spec.Containers {
		if done {
			st.ContainerStatuses = append(st.ContainerStatuses, terminated(c, i, false))
		} else {
			st.ContainerStatuses = append(st.ContainerStatuses, running(c, i, false))
		}
	}
	ready, readyAt, notReady := corev1.ConditionTrue, start, ""
	st.Phase = corev1.PodRunning
	if done {
		st.Phase, ready, readyAt, notReady = corev1.PodSucceeded, corev1.ConditionFalse, end, "PodCompleted"
		next = time.Time{}
	} else {
		next = end.Time
	}
	for _, c := range []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: start},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: start},
		{Type: corev1.PodReadyToStartContainers, Status: ready, LastTransitionTime: readyAt},
		{Type: corev1.ContainersReady, Status: ready, Reason: notReady, LastTransitionTime: readyAt},
		{Type: corev1.PodReady, Status: ready, Reason: notReady, LastTransitionTime: readyAt},
	} {
		replaceCondition(&st, c)
	}
	return st, next
}

// replaceCondition sets c in st, in place of one of the same type.
func replaceCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

func simulatedContainerID(pod *corev1.Pod, name string, init bool, i int) string {
	kind := "c"
	if init {
		kind = "i"
	}
	return fmt.Sprintf("localnode://%s/%s%d-%s", pod.UID, kind, i, name)
}

// simulator writes the statuses of a simulating node's pods, one pod at a
// time per worker; a pod comes back to the queue when its status is next
// due to change.
type simulator struct {
	n     *Node
	runs  SimulatedRuns
	queue workqueue.TypedRateLimitingInterface[string]
}

func newSimulator(n *Node, runs SimulatedRuns) *simulator {
	return &simulator{n: n, runs: runs,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
}

// handler queues every bound pod that is added or changes.
func (s *simulator) handler() cache.ResourceEventHandlerFuncs {
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			s.queue.Add(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }}
}

// run starts the workers; they stop when the queue shuts down.
func (s *simulator) run(ctx context.Context) {
	for range simulateWorkers {
		s.n.wg.Add(1)
		go func() {
			defer s.n.wg.Done()
			for {
				key, shutdown := s.queue.Get()
				if shutdown {
					return
				}
				if err := s.sync(ctx, key); err != nil {
					s.n.log.Warn("simulated pod status not written", "pod", key, "err", err)
					s.queue.AddRateLimited(key)
				} else {
					s.queue.Forget(key)
				}
				s.queue.Done(key)
			}
		}()
	}
}

// sync brings one pod's status to where its simulated run is, and
// finishes the deletion of a pod being deleted, as a kubelet does once its
// containers have stopped (here, at once).
func (s *simulator) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := s.n.bound.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if pod.DeletionTimestamp != nil {
		err := s.n.kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	want, next := simulatedStatus(pod, s.runs.runLength(pod), time.Now())
	if !equality.Semantic.DeepEqual(pod.Status, want) {
		cp := pod.DeepCopy()
		cp.Status = want
		_, err := s.n.kube.CoreV1().Pods(ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			// A conflict comes back with the newer pod from the informer.
			return err
		}
	}
	if !next.IsZero() {
		s.queue.AddAfter(key, time.Until(next))
	}
	return nil
}
