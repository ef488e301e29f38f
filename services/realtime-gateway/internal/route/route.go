// Package route finds where an Agent's session is served: the Agent must
// exist, be a realtime run and be Running, and its Job must have a ready
// pod, whose IP and container port named "realtime" are the address.
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
	pods, err := r.jobPods(ctx, rd, a.Namespace, a.Status.JobName)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "cannot list the pods of Agent %s: %v", id, err)
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

// jobPods lists the pods the Job controls. Pods merely labelled with the
// Job's name are ignored: whoever can create pods must not be able to
// stand in for a run pod and be handed its token.
func (r *Router) jobPods(ctx context.Context, rd client.Reader, namespace, job string) ([]*corev1.Pod, error) {
	for _, label := range []string{LabelJobName, LabelJobNameLegacy} {
		list := &corev1.PodList{}
		if err := rd.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{label: job}); err != nil {
			return nil, err
		}
		var out []*corev1.Pod
		for i := range list.Items {
			if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.Kind == "Job" && ref.Name == job {
				out = append(out, &list.Items[i])
			}
		}
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, nil
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
