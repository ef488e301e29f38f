package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// maxBackoff caps the delay between restarts of a crashing container.
const maxBackoff = 5 * time.Minute

// reasonNoCommand is the terminated reason of a container without command:
// there is no image, so no entrypoint to fall back to.
const reasonNoCommand = "NoCommand"

// containerLoop runs one container until it is done by the pod's restart
// policy, or the pod stops. It reports whether the last run exited 0.
// onStart, when set, is called each time the container runs. A sidecar (an
// init container with restartPolicy Always) restarts whatever its exit, and
// is probed like a container.
func (w *podWorker) containerLoop(ctx context.Context, pod *corev1.Pod, src *objectSource, c *corev1.Container, isInit bool, idx int, onStart func()) bool {
	policy := pod.Spec.RestartPolicy
	sidecar := isSidecar(c)
	if sidecar {
		policy = corev1.RestartPolicyAlways
	}
	restart, in := w.adoptLatest(c.Name)
	for {
		if in == nil {
			if ctx.Err() != nil {
				return false
			}
			var err error
			in, err = w.startInstance(ctx, pod, src, c, restart)
			if err != nil {
				// A configuration problem (a missing Secret key, say) may
				// be fixed later: stay Waiting and retry, as a kubelet does.
				reason := "CreateContainerConfigError"
				var we *waitingError
				if errors.As(err, &we) {
					reason = we.reason
				}
				w.setWaiting(isInit, idx, reason, err.Error())
				w.status.flush()
				select {
				case <-ctx.Done():
					return false
				case <-time.After(2 * time.Second):
				}
				continue
			}
		}
		if !w.track(in) {
			return false
		}
		w.setRunning(isInit, idx, in, (!isInit || sidecar) && c.ReadinessProbe == nil)
		w.status.flush()
		if onStart != nil {
			onStart()
		}
		var probeDone chan struct{}
		if !isInit || sidecar {
			probeDone = make(chan struct{})
			// Probes last as long as the instance and use the worker's
			// runCtx: a sidecar's ctx is cancelled while it still runs
			// out its grace period, and is probed meanwhile.
			go w.probeReadiness(c, isInit, idx, in, probeDone) //nolint:contextcheck // probes outlive a sidecar's ctx; they use the worker's runCtx
			go w.probeLiveness(c, in, probeDone)               //nolint:contextcheck // probes outlive a sidecar's ctx; they use the worker's runCtx
		}
		select {
		case <-in.done:
		case <-w.detachCh:
			return false
		}
		if probeDone != nil {
			close(probeDone)
		}
		in.exit.Message = withTerminationMessage(in.exit.Message, terminationMessage(ctx, c, in))
		w.setTerminated(isInit, idx, in)
		w.status.flush()
		// An image-mode instance's writable layer ends with it; the next
		// run starts from the image again.
		releaseRoot(in.dir)
		ok := in.exit.ExitCode == 0
		if ctx.Err() != nil {
			return ok
		}
		switch {
		case policy == corev1.RestartPolicyNever:
			return ok
		case ok && !sidecar && (isInit || policy == corev1.RestartPolicyOnFailure):
			return true
		}
		backoff := w.n.cfg.RestartBackoff << min(restart, 20)
		if backoff > maxBackoff || backoff <= 0 {
			backoff = maxBackoff
		}
		w.setBackoff(isInit, idx, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", backoff, c.Name, pod.Name, pod.Namespace, pod.UID))
		w.status.flush()
		select {
		case <-ctx.Done():
			return ok
		case <-w.detachCh:
			return false
		case <-time.After(backoff):
		}
		restart++
		in = nil
	}
}

// isSidecar says whether an init container is a restartable sidecar.
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// track registers a running instance, stopping it at once when the pod is
// already terminating. It reports false when the node has detached.
func (w *podWorker) track(in *instance) bool {
	w.mu.Lock()
	w.instances[in.container] = in
	term, grace := w.terminating, w.termGrace
	w.mu.Unlock()
	if w.detached() {
		in.pump.close()
		return false
	}
	if term {
		go in.stop(grace)
	}
	return true
}

func (w *podWorker) instanceDir(container string, restart int) string {
	return filepath.Join(w.dir, "containers", container, strconv.Itoa(restart))
}

// adoptLatest finds the newest instance an earlier node left for this
// container. It returns the restart count to use and the instance, if any.
func (w *podWorker) adoptLatest(container string) (int, *instance) {
	entries, err := os.ReadDir(filepath.Join(w.dir, "containers", container))
	if err != nil {
		return 0, nil
	}
	latest := -1
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > latest {
			latest = n
		}
	}
	if latest < 0 {
		return 0, nil
	}
	in, ok := adopt(w.instanceDir(container, latest), instanceLogPath(w.logDir, container, latest), container, latest)
	if !ok {
		return latest, nil
	}
	w.n.log.Info("adopted container", "pod", w.ns+"/"+w.name, "container", container, "restart", latest)
	return latest, in
}

// waitingError is a start failure with the Waiting reason to show.
type waitingError struct {
	reason string
	err    error
}

func (e *waitingError) Error() string { return e.err.Error() }
func (e *waitingError) Unwrap() error { return e.err }

// startInstance resolves the container's environment and mounts and
// launches it: from its image when the node's image store holds it
// (image mode), else as a host process. A host-mode container without
// command ends at once as NoCommand.
func (w *podWorker) startInstance(ctx context.Context, pod *corev1.Pod, src *objectSource, c *corev1.Container, restart int) (*instance, error) {
	logPath := instanceLogPath(w.logDir, c.Name, restart)
	dir := w.instanceDir(c.Name, restart)
	img, err := w.n.images.lookup(c.Image)
	if err != nil {
		return nil, &waitingError{"ErrImagePull", err}
	}
	if img != nil {
		return w.startFromImage(ctx, pod, src, c, restart, img)
	}
	if len(c.Command) == 0 {
		in := &instance{container: c.Name, restart: restart, dir: dir, logPath: logPath, startedAt: time.Now(), done: make(chan struct{})}
		in.exit = exitRecord{ExitCode: 127, Reason: reasonNoCommand, FinishedAt: time.Now().UTC(),
			Message: "localnode runs a container's command and args only, and this container has no command (its image is not in the node's image store, so there is no entrypoint to fall back to)"}
		close(in.done)
		return in, nil
	}
	env, err := w.n.containerEnv(ctx, src, pod, c, envContext{podIP: w.podIP()})
	if err != nil {
		return nil, err
	}
	mounts, err := w.containerMounts(pod, c)
	if err != nil {
		return nil, err
	}
	mounts = append(mounts, terminationMounts(c, dir)...)
	argv := make([]string, 0, len(c.Command)+len(c.Args))
	vals := envValues(env)
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		argv = append(argv, expand(a, vals))
	}
	spec := shimSpec{Argv: argv, Env: env, Dir: c.WorkingDir, Mounts: mounts}
	if ns := w.netNSPath(); ns != "" {
		// Its own network: its own hosts and resolv.conf and host name,
		// over the host's in its private mount namespace.
		spec.NetNS, spec.Hostname = ns, podHostname(pod)
		spec.Mounts = append(w.etcMounts(), mounts...)
	}
	uid, gid := runAs(pod, c)
	if uid != nil {
		spec.UID = ptr.To(uint32(*uid))
	}
	if gid != nil {
		spec.GID = ptr.To(uint32(*gid))
	}
	return launch(dir, logPath, c.Name, restart, spec, rootSource{})
}

// startFromImage launches a container in image mode: Kubernetes' rules
// for command and args over the image's Entrypoint and Cmd, the image's
// env under the container's, the container's workingDir over the image's,
// and runAsUser/runAsGroup over the image's User.
func (w *podWorker) startFromImage(ctx context.Context, pod *corev1.Pod, src *objectSource, c *corev1.Container, restart int, img *storedImage) (*instance, error) {
	lower, err := w.n.images.rootfs(img)
	if err != nil {
		return nil, &waitingError{"ErrImagePull", err}
	}
	id, err := resolveIdentity(pod, c, img.config, lower)
	if err != nil {
		return nil, err
	}
	kubeEnv, err := w.n.containerEnv(ctx, src, pod, c, envContext{defaults: imageEnvDefaults(img.config, id.home), podIP: w.podIP()})
	if err != nil {
		return nil, err
	}
	argv := imageArgv(c, img.config, envValues(kubeEnv))
	if len(argv) == 0 {
		return nil, &waitingError{"CreateContainerError", fmt.Errorf("no command specified: the container has no command and image %s no Entrypoint or Cmd", c.Image)}
	}
	mounts, err := w.containerMounts(pod, c)
	if err != nil {
		return nil, err
	}
	dir := w.instanceDir(c.Name, restart)
	mounts = append(mounts, terminationMounts(c, dir)...)
	wd := c.WorkingDir
	if wd == "" {
		wd = img.config.WorkingDir
	}
	spec := shimSpec{
		Argv: argv, Env: mergeEnv(img.config.Env, kubeEnv), Dir: wd,
		Mounts: append(w.etcMounts(), mounts...), NetNS: w.netNSPath(),
		UID: ptr.To(id.uid), GID: ptr.To(id.gid), Groups: id.groups,
		ReadOnlyRoot: c.SecurityContext != nil && ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false),
	}
	if !pod.Spec.HostNetwork {
		// A hostNetwork pod shares the host's name, as on a kubelet.
		spec.Hostname = podHostname(pod)
	}
	in, err := launch(dir, instanceLogPath(w.logDir, c.Name, restart), c.Name, restart, spec,
		rootSource{lower: lower, overlay: w.n.overlay})
	if err != nil {
		return nil, err
	}
	in.imageID = img.id.String()
	return in, nil
}

// podHostname is the host name of a pod's containers: spec.hostname, else
// the pod's name.
func podHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

// envValues maps a KEY=value list for $(VAR) expansion.
func envValues(env []string) map[string]string {
	vals := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	return vals
}

// containerID names an instance in container statuses.
func (w *podWorker) containerID(in *instance) string {
	return fmt.Sprintf("localnode://%s/%s/%d", w.uid, in.container, in.restart)
}
