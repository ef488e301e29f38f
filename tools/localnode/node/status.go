package node

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// initStatuses sets the statuses a pod has before anything runs, keeping
// the start time of a pod an earlier node already started.
func (w *podWorker) initStatuses(pod *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase = corev1.PodPending
	if pod.Status.StartTime != nil {
		w.startTime = *pod.Status.StartTime
	} else {
		w.startTime = metav1.Now()
	}
	mk := func(c corev1.Container, reason string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "localnode://" + c.Image,
			State:   corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}},
			Started: ptr.To(false),
		}
	}
	w.initSt = nil
	for _, c := range pod.Spec.InitContainers {
		w.initSt = append(w.initSt, mk(c, "PodInitializing"))
	}
	w.ctrSt = nil
	reason := "ContainerCreating"
	if len(pod.Spec.InitContainers) > 0 {
		reason = "PodInitializing"
	}
	for _, c := range pod.Spec.Containers {
		w.ctrSt = append(w.ctrSt, mk(c, reason))
	}
}

func (w *podWorker) statusOf(isInit bool, idx int) *corev1.ContainerStatus {
	if isInit {
		return &w.initSt[idx]
	}
	return &w.ctrSt[idx]
}

func (w *podWorker) setAllWaiting(reason, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, list := range [][]corev1.ContainerStatus{w.initSt, w.ctrSt} {
		for i := range list {
			list[i].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
		}
	}
}

func (w *podWorker) setWaiting(isInit bool, idx int, reason, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.statusOf(isInit, idx)
	st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

// setBackoff shows a container waiting to restart, its last run kept in
// lastState.
func (w *podWorker) setBackoff(isInit bool, idx int, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.statusOf(isInit, idx)
	if st.State.Terminated != nil {
		st.LastTerminationState = st.State
	}
	st.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: msg}}
}

// setRunning shows a running instance; readyNow is true for a container
// without a readiness probe, which is ready as soon as it runs.
func (w *podWorker) setRunning(isInit bool, idx int, in *instance, readyNow bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.statusOf(isInit, idx)
	if st.State.Terminated != nil {
		st.LastTerminationState = st.State
	}
	st.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(in.startedAt)}}
	st.RestartCount = int32(in.restart)
	st.ContainerID = w.containerID(in)
	if in.imageID != "" {
		st.ImageID = in.imageID
	}
	st.Started = ptr.To(true)
	st.Ready = readyNow
	if !isInit && w.phase == corev1.PodPending {
		w.phase = corev1.PodRunning
	}
}

func (w *podWorker) setTerminated(isInit bool, idx int, in *instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.statusOf(isInit, idx)
	st.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: in.exit.ExitCode, Reason: in.exit.Reason, Message: in.exit.Message,
		StartedAt: metav1.NewTime(in.startedAt), FinishedAt: metav1.NewTime(in.exit.FinishedAt),
		ContainerID: w.containerID(in),
	}}
	st.RestartCount = int32(in.restart)
	st.ContainerID = w.containerID(in)
	st.Ready = false
	st.Started = ptr.To(false)
}

func (w *podWorker) setReady(isInit bool, idx int, ready bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.statusOf(isInit, idx)
	if st.State.Running == nil || st.Ready == ready {
		return false
	}
	st.Ready = ready
	return true
}

// buildStatus merges this node's view into the pod's current status,
// leaving conditions others own untouched.
func (w *podWorker) buildStatus(pod *corev1.Pod) corev1.PodStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := *pod.Status.DeepCopy()
	st.Phase = w.phase
	st.Reason, st.Message = w.reason, w.message
	st.HostIP, st.PodIP = hostIP, w.podIPLocked()
	st.HostIPs = []corev1.HostIP{{IP: hostIP}}
	st.PodIPs = nil
	if st.PodIP != "" {
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	}
	st.StartTime = ptr.To(w.startTime)
	st.InitContainerStatuses = append([]corev1.ContainerStatus(nil), w.initSt...)
	st.ContainerStatuses = append([]corev1.ContainerStatus(nil), w.ctrSt...)
	cond := func(t corev1.PodConditionType, ok bool, reason string) {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason}
		if ok {
			c.Status, c.Reason = corev1.ConditionTrue, ""
		}
		setPodCondition(&st, c)
	}
	terminal := w.phase == corev1.PodSucceeded || w.phase == corev1.PodFailed
	cond(corev1.PodScheduled, true, "")
	cond(corev1.PodReadyToStartContainers, w.sandboxOK && !terminal, "")
	initialized := w.initialized
	if !initialized {
		initialized = len(w.initSt) > 0 && w.initSt[len(w.initSt)-1].State.Terminated != nil && w.initSt[len(w.initSt)-1].State.Terminated.ExitCode == 0
	}
	cond(corev1.PodInitialized, initialized || len(w.initSt) == 0, "ContainersNotInitialized")
	ready := len(w.ctrSt) > 0 && !terminal
	for _, c := range w.ctrSt {
		ready = ready && c.Ready
	}
	reason := "ContainersNotReady"
	if terminal {
		reason = "PodCompleted"
	}
	cond(corev1.ContainersReady, ready, reason)
	for _, g := range pod.Spec.ReadinessGates {
		found := false
		for _, c := range st.Conditions {
			found = found || (c.Type == g.ConditionType && c.Status == corev1.ConditionTrue)
		}
		ready = ready && found
	}
	cond(corev1.PodReady, ready, reason)
	return st
}

// statusWriter coalesces status writes of one pod: flush asks for a write,
// one goroutine does them.
type statusWriter struct {
	mu    sync.Mutex
	w     *podWorker
	dirty chan struct{}
	done  chan struct{}
}

func (s *statusWriter) init(w *podWorker) {
	s.w, s.dirty, s.done = w, make(chan struct{}, 1), make(chan struct{})
}

func (s *statusWriter) flush() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

func (s *statusWriter) loop() {
	for {
		select {
		case <-s.dirty:
			s.write(3)
		case <-s.done:
			return
		}
	}
}

func (s *statusWriter) stop() { close(s.done) }

// writeFinal writes the terminal status, retrying longer: the Job
// controller counts on it.
func (s *statusWriter) writeFinal() { s.write(30) }

// write updates the status subresource with the pod's resourceVersion,
// re-reading the pod on conflict.
func (s *statusWriter) write(attempts int) {
	w := s.w
	if w.detached() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pod := w.latest()
	for i := 0; i < attempts; i++ {
		want := w.buildStatus(pod)
		if equality.Semantic.DeepEqual(pod.Status, want) {
			return
		}
		cp := pod.DeepCopy()
		cp.Status = want
		ctx, cancel := context.WithTimeout(w.n.ctx, 15*time.Second)
		got, err := w.n.kube.CoreV1().Pods(w.ns).UpdateStatus(ctx, cp, metav1.UpdateOptions{})
		cancel()
		switch {
		case err == nil:
			w.mu.Lock()
			w.pod = got
			w.mu.Unlock()
			return
		case apierrors.IsNotFound(err) || w.n.ctx.Err() != nil:
			return
		case apierrors.IsConflict(err):
		default:
			w.n.log.Warn("pod status update failed", "pod", w.ns+"/"+w.name, "err", err)
			time.Sleep(500 * time.Millisecond)
		}
		ctx, cancel = context.WithTimeout(w.n.ctx, 15*time.Second)
		fresh, err := w.n.kube.CoreV1().Pods(w.ns).Get(ctx, w.name, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			return
		}
		if err == nil && fresh.UID == w.uid {
			pod = fresh
		}
	}
}
