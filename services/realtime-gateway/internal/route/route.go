// Package route finds where an Agent's session is served: the Agent must
// exist, be a realtime run and be Running, its Job must be controlled by
// the Agent's uid, and that Job must control a ready pod, whose IP and
// container port named "realtime" are the address.
//
// Names and labels prove nothing: anyone who may create Jobs or pods in
// the namespace can create a Job of the run's name, or a pod carrying the
// Job's label, and the gateway hands the pod it picks the run's token and
// the callers' prompts. So only controller owner references, which carry
// uids, are trusted: Agent uid → Job → Job uid → pod.
//
// Reads come from an informer cache so a prompt costs no API round trip;
// every refusal is confirmed with a live read first, so a cache that lags a
// moment behind never turns a good request away.
package route

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
)

// Job pod labels: the Job controller sets both; older clusters only the
// short one.
const (
	LabelJobName       = "batch.kubernetes.io/job-name"
	LabelJobNameLegacy = "job-name"
)

// Router resolves Agents to session addresses.
type Router struct {
	cached, live client.Reader
}

// New reads through cached (an informer cache holding Agents and realtime
// pods) and confirms refusals with live (a direct API client).
func New(cached, live client.Reader) *Router { return &Router{cached: cached, live: live} }

// Target is where a Running realtime Agent's session is served.
type Target struct {
	Agent *agentsv1alpha1.Agent
	Pod   string
	Addr  string
}

// Resolve finds the session of Agent namespace/name. On a refusal it
// returns a gRPC status error; for a finished Agent it also returns the
// Agent (with a nil Target), so GetSession can still report how it ended.
func (r *Router) Resolve(ctx context.Context, namespace, name string) (*Target, *agentsv1alpha1.Agent, error) {
	a, err := r.agent(ctx, r.cached, namespace, name)
	if err == nil {
		var t *Target
		if t, err = r.target(ctx, r.cached, a); err == nil {
			return t, a, nil
		}
	}
	if a, err = r.agent(ctx, r.live, namespace, name); err != nil {
		return nil, nil, err
	}
	t, err := r.target(ctx, r.live, a)
	return t, a, err
}

// ResolveLive is Resolve without the cache, for when what the cache said
// did not work out (the pod it named does not answer).
func (r *Router) ResolveLive(ctx context.Context, namespace, name string) (*Target, *agentsv1alpha1.Agent, error) {
	a, err := r.agent(ctx, r.live, namespace, name)
	if err != nil {
		return nil, nil, err
	}
	t, err := r.target(ctx, r.live, a)
	return t, a, err
}

func (r *Router) agent(ctx context.Context, rd client.Reader, namespace, name string) (*agentsv1alpha1.Agent, error) {
	a := &agentsv1alpha1.Agent{}
	err := rd.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, a)
	switch {
	case apierrors.IsNotFound(err):
		return nil, status.Errorf(codes.NotFound, "Agent %s/%s not found", namespace, name)
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "cannot read Agent %s/%s: %v", namespace, name, err)
	}
	return a, nil
}

func (r *Router) target(ctx context.Context, rd client.Reader, a *agentsv1alpha1.Agent) (*Target, error) {
	id := a.Namespace + "/" + a.Name
	switch phase := a.CurrentPhase(); {
	case phase.IsTerminal():
		return nil, status.Errorf(codes.FailedPrecondition, "Agent %s has finished (phase %s): the session has ended", id, phase)
	case phase != agentsv1alpha1.PhaseRunning:
		return nil, status.Errorf(codes.FailedPrecondition, "Agent %s is not Running yet (phase %s)", id, phase)
	case a.Status.JobName == "":
		return nil, status.Errorf(codes.Unavailable, "Agent %s is Running but has no Job yet", id)
	}
	job, err := r.job(ctx, rd, a)
	if err != nil {
		return nil, err
	}
	pods, impostors, err := r.jobPods(ctx, rd, job)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "cannot list the pods of Agent %s: %v", id, err)
	}
	if len(pods) == 0 && impostors > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "Agent %s: %d pod(s) carry the label of Job %s but none is controlled by it (uid %s); they are not the run's pod",
			id, impostors, job.Name, job.UID)
	}
	if len(pods) == 0 {
		return nil, status.Errorf(codes.Unavailable, "Agent %s has no pod yet (Job %s)", id, a.Status.JobName)
	}
	var realtimePods []*corev1.Pod
	for _, p := range pods {
		if p.Labels[agentsv1alpha1.LabelExecution] == string(agentsv1alpha1.ExecutionRealtime) {
			realtimePods = append(realtimePods, p)
		}
	}
	if len(realtimePods) == 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "Agent %s is not a realtime run (its pod has no label %s=realtime)", id, agentsv1alpha1.LabelExecution)
	}
	p := pickReady(realtimePods)
	if p == nil {
		return nil, status.Errorf(codes.Unavailable, "Agent %s: pod %s is not ready (phase %s)", id, realtimePods[0].Name, realtimePods[0].Status.Phase)
	}
	return &Target{Agent: a, Pod: p.Name, Addr: net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(sessionPort(p))))}, nil
}

// job reads the Running Agent a's Job and refuses it unless a's uid
// controls it: a Job of that name created by someone else, or left by a
// deleted Agent of the same name, is not the run's.
func (r *Router) job(ctx context.Context, rd client.Reader, a *agentsv1alpha1.Agent) (*batchv1.Job, error) {
	id := a.Namespace + "/" + a.Name
	job := &batchv1.Job{}
	err := rd.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Status.JobName}, job)
	switch {
	case apierrors.IsNotFound(err):
		return nil, status.Errorf(codes.Unavailable, "Agent %s: its Job %s does not exist", id, a.Status.JobName)
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "cannot read the Job of Agent %s: %v", id, err)
	}
	if !metav1.IsControlledBy(job, a) {
		owner := "no controller"
		if ref := metav1.GetControllerOf(job); ref != nil {
			owner = fmt.Sprintf("%s %s (uid %s)", ref.Kind, ref.Name, ref.UID)
		}
		return nil, status.Errorf(codes.FailedPrecondition, "Agent %s: Job %s is not controlled by this Agent (uid %s) but by %s; it is not the run's Job",
			id, job.Name, a.UID, owner)
	}
	return job, nil
}

// jobPods lists the pods job controls (by its uid), and counts the others
// that carry its name's label: whoever can create pods must not be able to
// stand in for a run pod and be handed its token.
func (r *Router) jobPods(ctx context.Context, rd client.Reader, job *batchv1.Job) (pods []*corev1.Pod, impostors int, err error) {
	seen := map[types.UID]bool{}
	for _, label := range []string{LabelJobName, LabelJobNameLegacy} {
		list := &corev1.PodList{}
		if err := rd.List(ctx, list, client.InNamespace(job.Namespace), client.MatchingLabels{label: job.Name}); err != nil {
			return nil, 0, err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if seen[p.UID] {
				continue
			}
			seen[p.UID] = true
			if metav1.IsControlledBy(p, job) {
				pods = append(pods, p)
			} else {
				impostors++
			}
		}
		if len(pods) > 0 {
			// The Job controller sets both labels; older clusters only the
			// legacy one, which is looked at only when needed.
			return pods, impostors, nil
		}
	}
	return nil, impostors, nil
}

// pickReady returns the newest Running, Ready, not-deleting pod with an
// IP, or nil.
func pickReady(pods []*corev1.Pod) *corev1.Pod {
	var best *corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || !ready(p) {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&p.CreationTimestamp) {
			best = p
		}
	}
	return best
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sessionPort is the container port named realtime.PortName, else
// realtime.Port.
func sessionPort(p *corev1.Pod) int32 {
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == realtime.PortName && port.ContainerPort > 0 {
				return port.ContainerPort
			}
		}
	}
	return realtime.Port
}

// String names the Target for logs.
func (t *Target) String() string { return fmt.Sprintf("%s/%s@%s", t.Agent.Namespace, t.Pod, t.Addr) }
