package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/libs/testenv/rbacaudit"
	"github.com/agentplane/agentplane/services/agent-controller/internal/config"
	"github.com/agentplane/agentplane/services/agent-controller/internal/runpolicy"
)

// sysNS is the install's namespace: deploy/ binds the ServiceAccount there.
const sysNS = "agentplane-system"

// installRBAC creates what the files (relative to deploy/) declare, in the
// namespace the kustomize install puts them in, until the test ends, and
// returns every verb they grant the agent-controller ServiceAccount.
func installRBAC(t *testing.T, files ...string) []rbacaudit.Grant {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(env.RepoRoot, "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		o, err := rbacaudit.Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		objs = append(objs, o...)
	}
	rbacaudit.Install(t, env.Client, sysNS, objs)
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding":
			o.SetNamespace(sysNS)
		}
	}
	all, err := rbacaudit.Grants(objs)
	if err != nil {
		t.Fatal(err)
	}
	var mine []rbacaudit.Grant
	for _, g := range all {
		if g.ServiceAccount == sysNS+"/agent-controller" {
			mine = append(mine, g)
		}
	}
	if len(mine) == 0 {
		t.Fatalf("%v grant the agent-controller ServiceAccount nothing: the checks would be empty", files)
	}
	return mine
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, what, cond)
}

func agentIn(ns, name string) (*agentsv1alpha1.Agent, error) {
	a := &agentsv1alpha1.Agent{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, a)
	return a, err
}

func phaseIs(ns, name string, phase agentsv1alpha1.AgentPhase) func() error {
	return func() error {
		a, err := agentIn(ns, name)
		if err != nil {
			return err
		}
		if a.Status.Phase != phase {
			return fmt.Errorf("phase %q (reason %q), want %s", a.Status.Phase, a.Status.FailureReason, phase)
		}
		return nil
	}
}

// natsRunArgs are the flags that give every run its NATS credential, with
// a secured NATS server for the controller's own connection.
func natsRunArgs(t *testing.T) []string {
	t.Helper()
	_, args := securedNATS(t)
	return args
}

// securedNATS starts a NATS server that admits only the users of a new
// authority, and returns it with the controller's NATS flags: the
// server, the controller's service credential, and the signing-key seed
// and account it mints the runs' credentials with.
func securedNATS(t *testing.T) (*eventstest.Server, []string) {
	t.Helper()
	auth, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	srv := eventstest.StartSecured(t, auth)
	seed, err := auth.SigningSeed()
	if err != nil {
		t.Fatal(err)
	}
	svc, err := auth.Issuer().ServiceCredentials("agent-controller", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return srv, []string{"--nats-url=" + srv.URL(), "--nats-creds-file=" + eventstest.WriteFile(t, "agent-controller.creds", svc),
		"--nats-account-seed-file=" + eventstest.WriteFile(t, "seed", seed), "--nats-account=" + auth.AccountPublicKey()}
}

// squatTokenSecret makes, in a namespace of its own, a realtime Agent and
// the token Secret its run would get, written first by someone else; it
// returns the namespace and the Agent's name.
func squatTokenSecret(t *testing.T) (ns, name string) {
	t.Helper()
	ctx := context.Background()
	ns, name = env.Namespace(t), "squatted"
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "runner"}}}}
	for _, o := range []client.Object{
		&agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: ns},
			Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "hi", Execution: agentsv1alpha1.ExecutionRealtime}},
		&agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: ns},
			Spec: agentsv1alpha1.StationSpec{AgentDefRef: "chat", DeadlineMinutes: 30, Template: template}},
		&agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: agentsv1alpha1.AgentSpec{StationRef: "chat"}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	a, err := agentIn(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: realtime.TokenSecretName(string(a.UID)), Namespace: ns},
		Data: map[string][]byte{realtime.TokenSecretKey: []byte("known-token")}}
	if err := env.Client.Create(ctx, forged); err != nil {
		t.Fatal(err)
	}
	return ns, name
}

// squatRunPolicy makes, in a namespace of its own, a Job-mode Agent and
// the namespace's run NetworkPolicy, written first by someone else and
// admitting everything; it returns the namespace and the Agent's name.
// The controller sets it back (get, update) before the run's Job.
func squatRunPolicy(t *testing.T) (ns, name string) {
	t.Helper()
	ctx := context.Background()
	ns, name = env.Namespace(t), "policed"
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "runner"}}}}
	for _, o := range []client.Object{
		&agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "work", Namespace: ns},
			Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "hi"}},
		&agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: "work", Namespace: ns},
			Spec: agentsv1alpha1.StationSpec{AgentDefRef: "work", DeadlineMinutes: 30, Template: template}},
		&agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: agentsv1alpha1.AgentSpec{StationRef: "work"}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	a, err := agentIn(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	open := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: runpolicy.RunsName, Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: "Agent", Name: a.Name, UID: a.UID, Controller: ptr.To(true)}}},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if err := env.Client.Create(ctx, open); err != nil {
		t.Fatal(err)
	}
	return ns, name
}

// finishPod plays the kubelet's part: the Job's pod exits 0, and the Job
// controller completes the Job.
func finishPod(t *testing.T, ns, job string) {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, "the pod of "+job, func() error {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil || len(pods.Items) == 0 {
			return fmt.Errorf("no pod yet (%w)", err)
		}
		pod = &pods.Items[0]
		return nil
	})
	now := metav1.Now()
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: agentsv1alpha1.AgentContainerName, Image: "runner",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, StartedAt: now, FinishedAt: now}}}}
	if _, err := env.Kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestInstalledRBACIsEnough runs the binary's run loop as the install's
// ServiceAccount, with exactly the permissions deploy/ grants it (the base,
// the realtime and the nats-auth components), against an API server that
// also enforces blockOwnerDeletion permissions, and drives every kind of
// work the controller does: leader election, a Job run and its history
// pruning, missing references, a batch run and its cleanup at the
// provider, a cleanup that fails until it gives up, a realtime run with its
// token Secret, each run's NATS credential Secret, a run Secret whose name
// was taken, each namespace's run NetworkPolicy and one written first under its
// name, and the Events of them all. No request may be refused, and every
// verb the RBAC grants must have been used: a grant nothing needs is a
// permission an attacker holding the token gets for free.
func TestInstalledRBACIsEnough(t *testing.T) {
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}})
	})
	grants := installRBAC(t, "agent-controller/rbac.yaml", "components/realtime/rbac.yaml", "components/nats-auth/rbac.yaml")
	if err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName, Namespace: sysNS},
		Data: map[string][]byte{realtime.KeySecretKey: []byte(strings.Repeat("k", 32))}}); err != nil {
		t.Fatal(err)
	}
	// A realtime run whose token Secret a namespace user created first:
	// the controller reads it back, finds it is not the run's and fails
	// the run. Its Agent exists before the controller starts, since its
	// uid names the Secret.
	squatNS, squatted := squatTokenSecret(t)
	policedNS, policed := squatRunPolicy(t)
	kubeconfig, rec := rbacaudit.RecordedKubeconfig(t, env.Config, sysNS, "agent-controller")
	stop := startRun(t, append([]string{
		"--kubeconfig=" + kubeconfig, "--pod-name=rbac-test", "--pod-namespace=" + sysNS,
		"--metrics-bind-address=" + testenv.FreeAddr(t), "--health-probe-bind-address=" + testenv.FreeAddr(t), "--shutdown-timeout=5s",
		"--leader-elect=true", "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
		"--poll-interval=1s", "--realtime-enabled",
		"--batch-enabled", "--batch-poller-address=" + startPoller(t), "--batch-poll-seconds=0.2", "--batch-cleanup-backoff=200ms"},
		natsRunArgs(t)...)...)
	ctx := context.Background()
	eventually(t, "the Lease taken as the ServiceAccount", func() error {
		l, err := env.Kube.CoordinationV1().Leases(sysNS).Get(ctx, config.LeaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "rbac-test" {
			return fmt.Errorf("held by %q", h)
		}
		return nil
	})

	ns := env.Namespace(t)
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: agentsv1alpha1.AgentContainerName, Image: "runner"}}}}
	recipe := func(name string, exec agentsv1alpha1.ExecutionMode) []client.Object {
		def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "do {thing}", Execution: exec}}
		if exec == agentsv1alpha1.ExecutionBatch {
			def.Spec.Batch = &agentsv1alpha1.BatchSpec{MaxTokens: 256, TimeoutMinutes: 30}
		}
		return []client.Object{def, &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: agentsv1alpha1.StationSpec{AgentDefRef: name, DeadlineMinutes: 30, Template: template}}}
	}
	agent := func(name, station string) *agentsv1alpha1.Agent {
		return &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: agentsv1alpha1.AgentSpec{StationRef: station}}
	}
	jobs := recipe("jobs", agentsv1alpha1.ExecutionJob)
	// No successful run is kept: the run is pruned as soon as it succeeds.
	jobs[1].(*agentsv1alpha1.Station).Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](0)
	noDef := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: "no-def", Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: "missing", DeadlineMinutes: 30, Template: template}}
	objs := append(append(append(jobs, recipe("batch", agentsv1alpha1.ExecutionBatch)...), recipe("realtime", agentsv1alpha1.ExecutionRealtime)...), noDef)
	for _, o := range objs {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	work := []struct {
		rule  string
		agent *agentsv1alpha1.Agent
		// finish drives the run to its end and waits for it.
		finish func(t *testing.T)
	}{
		{"a Job run is started, read back and pruned", agent("job", "jobs"), func(t *testing.T) {
			eventually(t, "the Job run Running", phaseIs(ns, "job", agentsv1alpha1.PhaseRunning))
			finishPod(t, ns, "agent-job-job")
			eventually(t, "the succeeded Job run pruned", func() error {
				if _, err := agentIn(ns, "job"); !apierrors.IsNotFound(err) {
					return fmt.Errorf("still there (%w)", err)
				}
				return nil
			})
		}},
		{"a missing Station is confirmed with a live read", agent("no-station", "missing"), func(t *testing.T) {
			eventually(t, "the run Failed", phaseIs(ns, "no-station", agentsv1alpha1.PhaseFailed))
		}},
		{"a missing AgentDefinition is confirmed with a live read", agent("no-def", "no-def"), func(t *testing.T) {
			eventually(t, "the run Failed", phaseIs(ns, "no-def", agentsv1alpha1.PhaseFailed))
		}},
		{"a batch run is submitted, finished and cleaned up", agent("batch", "batch"), func(t *testing.T) {
			eventually(t, "the batch run cleaned up", func() error {
				if err := phaseIs(ns, "batch", agentsv1alpha1.PhaseSucceeded)(); err != nil {
					return err
				}
				a, _ := agentIn(ns, "batch")
				if len(a.Finalizers) > 0 || a.Status.BatchID == "" {
					return fmt.Errorf("finalizers %v, batchId %q", a.Finalizers, a.Status.BatchID)
				}
				return nil
			})
		}},
		{"a batch cleanup that keeps failing records its Events, the repeats as one series, and gives up", agent(stuckAgent, "batch"), func(t *testing.T) {
			eventually(t, "the cleanup given up", func() error {
				a, err := agentIn(ns, stuckAgent)
				if err != nil {
					return err
				}
				if len(a.Finalizers) > 0 || a.Status.BatchCleanupAttempts != agentsv1alpha1.MaxBatchCleanupAttempts {
					return fmt.Errorf("finalizers %v after %d attempts", a.Finalizers, a.Status.BatchCleanupAttempts)
				}
				return nil
			})
			// The repeats of CleanupFailed join the first one's series: the
			// recorder patches it.
			eventually(t, "the Events of the cleanup", func() error {
				evs, err := env.Kube.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return err
				}
				var series int32
				gaveUp := false
				for _, e := range evs.Items {
					if e.Regarding.Name != stuckAgent {
						continue
					}
					switch e.Reason {
					case "CleanupFailed":
						if e.Series != nil {
							series = e.Series.Count
						}
					case "CleanupGivenUp":
						gaveUp = true
					}
				}
				if series < 2 || !gaveUp {
					return fmt.Errorf("CleanupFailed series count %d, CleanupGivenUp recorded %v", series, gaveUp)
				}
				return nil
			})
		}},
		{"a realtime run gets its token and NATS credential Secrets and Job", agent("realtime", "realtime"), func(t *testing.T) {
			eventually(t, "the realtime run Running", phaseIs(ns, "realtime", agentsv1alpha1.PhaseRunning))
			a, err := agentIn(ns, "realtime")
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{realtime.TokenSecretName(string(a.UID)), runspec.NATSSecretName(string(a.UID))} {
				if _, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
					t.Fatalf("Secret %s: %v", name, err)
				}
			}
		}},
	}
	for _, w := range work {
		if err := env.Client.Create(ctx, w.agent); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range work {
		t.Run(w.rule, w.finish)
	}
	t.Run("a run whose token Secret name is taken reads it back and fails", func(t *testing.T) {
		eventually(t, "the squatted run Failed", phaseIs(squatNS, squatted, agentsv1alpha1.PhaseFailed))
		a, _ := agentIn(squatNS, squatted)
		if !strings.Contains(a.Status.FailureReason, "is not controlled by this Agent") {
			t.Errorf("failureReason %q", a.Status.FailureReason)
		}
	})
	t.Run("a run whose namespace's NetworkPolicy was written first, open to all, sets it back and starts", func(t *testing.T) {
		eventually(t, "the policed run Running", phaseIs(policedNS, policed, agentsv1alpha1.PhaseRunning))
		np, err := env.Kube.NetworkingV1().NetworkPolicies(policedNS).Get(ctx, runpolicy.RunsName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(np.Spec.Ingress) != 0 || np.Spec.PodSelector.MatchLabels[agentsv1alpha1.LabelComponent] != agentsv1alpha1.ComponentJob {
			t.Errorf("the planted spec was kept: %+v", np.Spec)
		}
	})
	// Stepping down releases the Lease: that write is the run's too.
	stop()

	reqs := rec.Requests()
	t.Run("no request of the ServiceAccount is refused", func(t *testing.T) {
		for _, r := range reqs {
			if r.Code == http.StatusForbidden {
				t.Errorf("refused: %s %s/%s %s/%s", r.Verb, r.Group, r.Resource, r.Namespace, r.Name)
			}
		}
	})
	// The API server checks agents/finalizers, not the controller: each
	// Job and token Secret created blocks its Agent's deletion.
	blocking := slices.ContainsFunc(reqs, func(r rbacaudit.Request) bool {
		return r.Verb == "create" && (r.Resource == "jobs" || r.Resource == "secrets") && r.Code == http.StatusCreated
	})
	t.Run("every verb the RBAC grants is used", func(t *testing.T) {
		for _, g := range grants {
			used := slices.ContainsFunc(reqs, func(r rbacaudit.Request) bool {
				return g.Allows(r) && r.Code != 0 && r.Code != http.StatusForbidden
			})
			if g.Group == agentsv1alpha1.GroupVersion.Group && g.Resource == "agents/finalizers" && g.Verb == "update" {
				used = blocking
			}
			if !used {
				t.Errorf("the RBAC grants %s, which the controller never used", g)
			}
		}
	})
}
