package node

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podWorker runs one pod bound to this node, from its first sight until it
// is deleted from the API.
type podWorker struct {
	n       *Node
	uid     types.UID
	ns      string
	name    string
	dir     string
	logDir  string
	updates chan struct{}

	runCtx    context.Context
	cancelRun context.CancelFunc
	goneCh    chan struct{}
	goneOnce  sync.Once
	detachCh  chan struct{}
	detachOne sync.Once
	finished  chan struct{}

	mu          sync.Mutex
	pod         *corev1.Pod
	initSt      []corev1.ContainerStatus
	ctrSt       []corev1.ContainerStatus
	initialized bool
	sandboxOK   bool
	phase       corev1.PodPhase
	reason      string
	message     string
	startTime   metav1.Time
	instances   map[string]*instance
	terminating bool
	termGrace   time.Duration
	finalized   bool
	// sandbox is the pod's network namespace and address (nil: the host
	// network); apiFwd forwards the API server into it.
	sandbox *podSandbox
	apiFwd  *forwarder
	addr    string
	// tokenDue says when each projected token volume is renewed;
	// tokenWake tells the refresher a due time changed.
	tokenDue  map[string]time.Time
	tokenWake chan struct{}

	status statusWriter
}

func newPodWorker(n *Node, pod *corev1.Pod) *podWorker {
	w := &podWorker{
		n: n, uid: pod.UID, ns: pod.Namespace, name: pod.Name, pod: pod,
		dir:     filepath.Join(podsRoot(n.cfg.StateDir), string(pod.UID)),
		logDir:  podLogDir(n.cfg.StateDir, pod.Namespace, pod.Name, pod.UID),
		updates: make(chan struct{}, 1), goneCh: make(chan struct{}), detachCh: make(chan struct{}), finished: make(chan struct{}),
		instances: map[string]*instance{}, tokenWake: make(chan struct{}, 1),
	}
	w.runCtx, w.cancelRun = context.WithCancel(n.ctx)
	w.status.init(w)
	return w
}

// update records the newest version of the pod from the informer.
func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	select {
	case w.updates <- struct{}{}:
	default:
	}
}

func (w *podWorker) latest() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

// gone stops everything of a pod that was removed from the API and waits
// until its processes have ended.
func (w *podWorker) gone() {
	w.goneOnce.Do(func() { close(w.goneCh) })
	w.terminate(2*time.Second, "", "")
	<-w.finished
}

// detach lets go of the pod without touching its processes, for a node
// that stops and leaves them to a successor.
func (w *podWorker) detach() {
	w.detachOne.Do(func() { close(w.detachCh) })
	for _, in := range w.instanceList() {
		in.pump.close()
	}
	// The network stays for the next node; our listeners in it go.
	w.closeSandbox(false)
}

// instanceList returns the pod's processes as they are now, so they can be
// stopped without holding the lock their exits take.
func (w *podWorker) instanceList() []*instance {
	w.mu.Lock()
	defer w.mu.Unlock()
	ins := make([]*instance, 0, len(w.instances))
	for _, in := range w.instances {
		ins = append(ins, in)
	}
	return ins
}

func (w *podWorker) detached() bool {
	select {
	case <-w.detachCh:
		return true
	default:
		return false
	}
}

// killAll stops every process of the pod within grace.
func (w *podWorker) killAll(grace time.Duration) {
	w.terminate(grace, "", "")
	for _, in := range w.instanceList() {
		in.stop(grace)
	}
}

// terminate stops the pod: no container starts or restarts any more, and
// running ones get SIGTERM, then SIGKILL after grace. reason, when set,
// becomes the pod's status reason.
func (w *podWorker) terminate(grace time.Duration, reason, message string) {
	w.mu.Lock()
	if reason != "" && w.reason == "" {
		w.reason, w.message = reason, message
	}
	already := w.terminating
	w.terminating = true
	if !already {
		w.termGrace = grace
	}
	ins := make([]*instance, 0, len(w.instances))
	for _, in := range w.instances {
		ins = append(ins, in)
	}
	w.mu.Unlock()
	w.cancelRun()
	if already && grace > 0 {
		return
	}
	for _, in := range ins {
		go in.stop(grace)
	}
}

// run is the worker's life: run the pod to its end, then wait for its
// deletion to finalise it.
func (w *podWorker) run() {
	defer close(w.finished)
	go w.status.loop()
	defer w.status.stop()
	pod := w.latest()
	if !isTerminal(pod) {
		runDone := make(chan struct{})
		go w.watch(runDone)
		w.runPod(pod)
		close(runDone)
		if w.detached() {
			return
		}
		w.status.writeFinal()
	}
	for {
		if p := w.latest(); p.DeletionTimestamp != nil {
			w.finalize()
		}
		select {
		case <-w.updates:
		case <-w.goneCh:
			return
		case <-w.detachCh:
			return
		}
	}
}

// watch turns deletion and the active deadline into termination while the
// pod runs.
func (w *podWorker) watch(runDone <-chan struct{}) {
	var deadline <-chan time.Time
	if d := w.latest().Spec.ActiveDeadlineSeconds; d != nil {
		w.mu.Lock()
		start := w.startTime.Time
		w.mu.Unlock()
		if start.IsZero() {
			start = time.Now()
		}
		t := time.NewTimer(time.Until(start.Add(time.Duration(*d) * time.Second)))
		defer t.Stop()
		deadline = t.C
	}
	for {
		if p := w.latest(); p.DeletionTimestamp != nil {
			w.terminate(deletionGrace(p), "", "")
		}
		select {
		case <-w.updates:
		case <-deadline:
			w.terminate(terminationGrace(w.latest()), "DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
		case <-runDone:
			return
		case <-w.detachCh:
			return
		case <-w.goneCh:
			return
		}
	}
}

// runPod sets up volumes, runs init containers in order, then the
// containers, and settles the pod's phase.
func (w *podWorker) runPod(pod *corev1.Pod) {
	ctx := w.runCtx
	w.initStatuses(pod)
	w.status.flush()
	src := newObjectSource(w.n, pod.Namespace)
	defer func() {
		if !w.detached() {
			w.closeSandbox(true)
		}
	}()
	for {
		err := w.setupSandbox(pod)
		msg := "Failed to create pod sandbox: "
		if err == nil {
			err = w.setupVolumes(ctx, pod, src)
			msg = "MountVolume.SetUp failed: "
		}
		if err == nil {
			break
		}
		w.setAllWaiting("ContainerCreating", msg+err.Error())
		w.status.flush()
		select {
		case <-ctx.Done():
			w.settle(false)
			return
		case <-time.After(2 * time.Second):
		}
	}
	go w.refreshTokens(ctx, pod)
	w.mu.Lock()
	w.sandboxOK = true
	w.mu.Unlock()
	// The pod's address is known now: report it before anything runs.
	w.status.flush()
	// Sidecars run beside the rest of the pod and stop once the
	// containers are done.
	sidecarCtx, stopSidecars := context.WithCancel(ctx)
	defer stopSidecars()
	var sidecars sync.WaitGroup
	defer sidecars.Wait()
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if isSidecar(c) {
			if !w.startSidecar(sidecarCtx, pod, src, c, i, &sidecars) {
				w.settle(false)
				return
			}
			continue
		}
		if !w.containerLoop(ctx, pod, src, c, true, i, nil) {
			w.stopSidecars(pod, stopSidecars)
			w.settle(false)
			return
		}
	}
	w.mu.Lock()
	w.initialized = true
	w.mu.Unlock()
	var wg sync.WaitGroup
	for i := range pod.Spec.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.containerLoop(ctx, pod, src, &pod.Spec.Containers[i], false, i, nil)
		}()
	}
	wg.Wait()
	w.stopSidecars(pod, stopSidecars)
	sidecars.Wait()
	w.settle(true)
}

// startSidecar runs a sidecar in the background and waits until it has
// started, as the next init container must. It reports false when the pod
// stopped first.
func (w *podWorker) startSidecar(ctx context.Context, pod *corev1.Pod, src *objectSource, c *corev1.Container, idx int, wg *sync.WaitGroup) bool {
	started := make(chan struct{})
	var once sync.Once
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.containerLoop(ctx, pod, src, c, true, idx, func() { once.Do(func() { close(started) }) })
	}()
	select {
	case <-started:
		return true
	case <-ctx.Done():
		return false
	case <-w.detachCh:
		return false
	}
}

// stopSidecars ends the sidecars once the containers are done: no more
// restarts, and SIGTERM then SIGKILL after the pod's grace period.
func (w *podWorker) stopSidecars(pod *corev1.Pod, cancel context.CancelFunc) {
	if w.detached() {
		// Left running for the next node to adopt.
		return
	}
	cancel()
	grace := terminationGrace(pod)
	var wg sync.WaitGroup
	for _, c := range pod.Spec.InitContainers {
		if !isSidecar(&c) {
			continue
		}
		w.mu.Lock()
		in := w.instances[c.Name]
		w.mu.Unlock()
		if in != nil {
			wg.Add(1)
			go func() { defer wg.Done(); in.stop(grace) }()
		}
	}
	wg.Wait()
}

// settle sets the terminal phase once nothing runs: Succeeded when every
// container ended with 0, else Failed.
func (w *podWorker) settle(initialized bool) {
	if w.detached() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ok := initialized
	for _, st := range w.ctrSt {
		if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
			ok = false
		}
	}
	if ok && w.reason == "" {
		w.phase = corev1.PodSucceeded
	} else {
		w.phase = corev1.PodFailed
	}
}

// finalize deletes the pod with grace 0 once its processes are gone, as a
// kubelet does to complete a graceful deletion.
func (w *podWorker) finalize() {
	w.mu.Lock()
	if w.finalized {
		w.mu.Unlock()
		return
	}
	w.finalized = true
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(w.n.ctx, 30*time.Second)
	defer cancel()
	err := w.n.kube.CoreV1().Pods(w.ns).Delete(ctx, w.name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &w.uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.n.log.Warn("finalise pod deletion failed", "pod", w.ns+"/"+w.name, "err", err)
		w.mu.Lock()
		w.finalized = false
		w.mu.Unlock()
	}
}

func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// deletionGrace is the grace period of a pod being deleted.
func deletionGrace(pod *corev1.Pod) time.Duration {
	if pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	return terminationGrace(pod)
}

func terminationGrace(pod *corev1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

func podLogDir(state, ns, name string, uid types.UID) string {
	return filepath.Join(logsRoot(state), fmt.Sprintf("%s_%s_%s", ns, name, uid))
}
