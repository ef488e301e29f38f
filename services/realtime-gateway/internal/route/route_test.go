package route

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }

// runningAgent creates a Running realtime Agent ns/name whose status names
// its Job, as the agent-controller leaves it.
func runningAgent(t *testing.T, ns, name string) *agentsv1alpha1.Agent {
	t.Helper()
	ctx := context.Background()
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: agentsv1alpha1.AgentSpec{StationRef: "chat"}}
	if err := env.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.Status.Phase, a.Status.JobName = agentsv1alpha1.PhaseRunning, agentsv1alpha1.JobNamePrefix+name
	if err := env.Client.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	return a
}

// controller is a controller owner reference.
func controller(apiVersion, kind, name string, uid types.UID) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
}

// mkJob creates the Job of a's run name controlled by owner (nil: none).
func mkJob(t *testing.T, a *agentsv1alpha1.Agent, owner *metav1.OwnerReference) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Status.JobName,
			Labels: map[string]string{agentsv1alpha1.LabelComponent: agentsv1alpha1.ComponentJob}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "agent"}}}}},
	}
	if owner != nil {
		j.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	j, err := env.Kube.BatchV1().Jobs(a.Namespace).Create(context.Background(), j, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// mkPod creates a Running, Ready realtime pod named name, labelled with
// jobName as the Job controller labels its pods, controlled by owner (nil:
// none), at ip.
func mkPod(t *testing.T, ns, name, jobName, ip string, owner *metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			LabelJobName: jobName, LabelJobNameLegacy: jobName, agentsv1alpha1.LabelExecution: string(agentsv1alpha1.ExecutionRealtime)}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "agent"}}},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	p, err := env.Kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if p, err = env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// namespace is a fresh namespace with the default ServiceAccount pods need
// (no controller-manager runs here to create it).
func namespace(t *testing.T) string {
	t.Helper()
	ns := env.Namespace(t)
	_, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return ns
}

// TestTheRunPodIsFoundOnlyThroughOwnerUIDs covers the attacks on a
// realtime run's identity: a Job created under the run's name by someone
// else, a Job left by a deleted Agent of the same name, and pods carrying
// the Job's label that the Job does not control. The gateway would hand
// such a pod the run's token and the callers' prompts; it must refuse
// instead, and never pick an impostor over the run's own pod.
func TestTheRunPodIsFoundOnlyThroughOwnerUIDs(t *testing.T) {
	agentOwner := func(a *agentsv1alpha1.Agent) *metav1.OwnerReference {
		return controller(agentsv1alpha1.GroupVersion.String(), "Agent", a.Name, a.UID)
	}
	jobOwner := func(j *batchv1.Job) *metav1.OwnerReference { return controller("batch/v1", "Job", j.Name, j.UID) }
	cases := []struct {
		rule string
		// setup creates the Job and pods of a.
		setup func(t *testing.T, a *agentsv1alpha1.Agent)
		// pod is the pod the route must lead to; "" means a refusal with
		// code and msg.
		pod  string
		code codes.Code
		msg  string
	}{
		{"the Agent's own Job and the pod it controls are the route", func(t *testing.T, a *agentsv1alpha1.Agent) {
			j := mkJob(t, a, agentOwner(a))
			mkPod(t, a.Namespace, "own", j.Name, "10.0.0.1", jobOwner(j))
		}, "own", codes.OK, ""},
		{"a Job created under the run's name without an owner is never the run's", func(t *testing.T, a *agentsv1alpha1.Agent) {
			j := mkJob(t, a, nil)
			mkPod(t, a.Namespace, "forged", j.Name, "10.0.0.2", jobOwner(j))
		}, "", codes.FailedPrecondition, "is not controlled by this Agent"},
		{"a Job left by a deleted Agent of the same name is never the run's", func(t *testing.T, a *agentsv1alpha1.Agent) {
			j := mkJob(t, a, controller(agentsv1alpha1.GroupVersion.String(), "Agent", a.Name, "uid-of-the-deleted-agent"))
			mkPod(t, a.Namespace, "predecessor", j.Name, "10.0.0.3", jobOwner(j))
		}, "", codes.FailedPrecondition, "uid-of-the-deleted-agent"},
		{"a pod carrying the Job's label but controlled by nothing is never picked", func(t *testing.T, a *agentsv1alpha1.Agent) {
			j := mkJob(t, a, agentOwner(a))
			mkPod(t, a.Namespace, "impostor", j.Name, "10.0.0.4", nil)
		}, "", codes.FailedPrecondition, "none is controlled by it"},
		{"a pod naming the Job as its controller with another uid is never picked", func(t *testing.T, a *agentsv1alpha1.Agent) {
			j := mkJob(t, a, agentOwner(a))
			mkPod(t, a.Namespace, "impostor", j.Name, "10.0.0.5", controller("batch/v1", "Job", j.Name, "not-the-jobs-uid"))
		}, "", codes.FailedPrecondition, "none is controlled by it"},
		{"a newer ready impostor next to the run's own pod is never picked", func(t *testing.T, a *agentsv1alpha1.Agent) {
			j := mkJob(t, a, agentOwner(a))
			mkPod(t, a.Namespace, "own", j.Name, "10.0.0.6", jobOwner(j))
			// Creation times count in seconds; the impostor must be the newest.
			time.Sleep(1100 * time.Millisecond)
			mkPod(t, a.Namespace, "impostor", j.Name, "10.0.0.7", controller("batch/v1", "Job", j.Name, "not-the-jobs-uid"))
		}, "own", codes.OK, ""},
		{"a Running Agent whose Job does not exist is unavailable", func(*testing.T, *agentsv1alpha1.Agent) {}, "", codes.Unavailable, "does not exist"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			ns := namespace(t)
			a := runningAgent(t, ns, "chat")
			c.setup(t, a)
			r := New(env.Client, env.Client)
			for _, resolve := range []func(context.Context, string, string) (*Target, *agentsv1alpha1.Agent, error){r.Resolve, r.ResolveLive} {
				target, _, err := resolve(context.Background(), ns, a.Name)
				if c.pod != "" {
					if err != nil || target == nil || target.Pod != c.pod {
						t.Fatalf("resolved to %v, %v; want pod %s", target, err, c.pod)
					}
					continue
				}
				if st := status.Convert(err); target != nil || st.Code() != c.code || !strings.Contains(st.Message(), c.msg) {
					t.Fatalf("resolved to %v, %v; want %v containing %q", target, err, c.code, c.msg)
				}
			}
		})
	}
}
