package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	batchpb "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/config"
)

// sysNS is the install's namespace: deploy/ binds the ServiceAccount there.
const sysNS = "agentplane-system"

// grant is one verb RBAC allows the ServiceAccount: on resource (with its
// "/subresource") of group, in namespace ("" for every namespace), on the
// object called name ("" for any).
type grant struct{ namespace, group, resource, name, verb string }

func (g grant) String() string {
	scope := "cluster-wide"
	if g.namespace != "" {
		scope = "in " + g.namespace
	}
	res := g.resource
	if g.group != "" {
		res = g.group + "/" + res
	}
	if g.name != "" {
		res += " " + g.name
	}
	return fmt.Sprintf("%s %s %s", g.verb, res, scope)
}

func (g grant) allows(r apiRequest) bool {
	return g.verb == r.verb && g.group == r.group && g.resource == r.resource &&
		(g.namespace == "" || g.namespace == r.namespace) && (g.name == "" || g.name == r.name)
}

// installRBAC creates what the files (relative to deploy/) declare, in the
// namespace the kustomize install puts them in, until the test ends, and
// returns every verb they grant the agent-controller ServiceAccount.
func installRBAC(t *testing.T, files ...string) []grant {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(env.RepoRoot, "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			switch obj.GetKind() {
			case "ServiceAccount", "Role", "RoleBinding":
				obj.SetNamespace(sysNS)
			}
			if err := env.Client.Create(context.Background(), obj); err != nil {
				t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
			if obj.GetNamespace() == "" {
				// The namespace takes the rest with it.
				t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
			}
			objs = append(objs, obj)
		}
	}
	roles := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		roles[o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName()] = o
	}
	var out []grant
	for _, b := range objs {
		if b.GetKind() != "RoleBinding" && b.GetKind() != "ClusterRoleBinding" {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		if !slices.ContainsFunc(subjects, func(s any) bool {
			sub := s.(map[string]any)
			ns, _ := sub["namespace"].(string)
			return sub["kind"] == "ServiceAccount" && sub["name"] == "agent-controller" && (ns == sysNS || ns == "" && b.GetNamespace() == sysNS)
		}) {
			continue
		}
		kind, _, _ := unstructured.NestedString(b.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		scope, roleNS := "", ""
		if b.GetKind() == "RoleBinding" {
			scope = b.GetNamespace()
			if kind == "Role" {
				roleNS = scope
			}
		}
		role, ok := roles[kind+" "+roleNS+"/"+name]
		if !ok {
			t.Fatalf("%s %s binds %s %s, which is not installed", b.GetKind(), b.GetName(), kind, name)
		}
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			names := strs(rule["resourceNames"])
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range strs(rule["apiGroups"]) {
				for _, res := range strs(rule["resources"]) {
					for _, n := range names {
						for _, v := range strs(rule["verbs"]) {
							out = append(out, grant{namespace: scope, group: g, resource: res, name: n, verb: v})
						}
					}
				}
			}
		}
	}
	return out
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, x.(string))
	}
	return out
}

// apiRequest is one request the controller made, as RBAC names it, and
// the status it got.
type apiRequest struct {
	verb, group, resource, namespace, name string
	code                                   int
}

// apiRecorder passes requests on and records each resource request.
type apiRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []apiRequest
}

func (a *apiRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(req)
	if r, ok := resourceRequest(req); ok {
		if err == nil {
			r.code = resp.StatusCode
		}
		a.mu.Lock()
		a.reqs = append(a.reqs, r)
		a.mu.Unlock()
	}
	return resp, err
}

func (a *apiRecorder) requests() []apiRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.reqs)
}

// resourceRequest names req as the RBAC authorizer does; discovery and the
// other non-resource URLs are not resource requests.
func resourceRequest(req *http.Request) (apiRequest, bool) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var r apiRequest
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		r.group, parts = parts[1], parts[3:]
	default:
		return r, false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		r.namespace, parts = parts[1], parts[2:]
	}
	r.resource = parts[0]
	if len(parts) > 1 {
		r.name = parts[1]
	}
	if len(parts) > 2 {
		r.resource += "/" + parts[2]
	}
	switch w := req.URL.Query().Get("watch"); {
	case req.Method == http.MethodGet && (w == "true" || w == "1"):
		r.verb = "watch"
	case req.Method == http.MethodGet && r.name != "":
		r.verb = "get"
	case req.Method == http.MethodGet:
		r.verb = "list"
	case req.Method == http.MethodPost:
		r.verb = "create"
	case req.Method == http.MethodPut:
		r.verb = "update"
	case req.Method == http.MethodPatch:
		r.verb = "patch"
	case req.Method == http.MethodDelete && r.name != "":
		r.verb = "delete"
	case req.Method == http.MethodDelete:
		r.verb = "deletecollection"
	}
	return r, true
}

// serviceAccountKubeconfig writes a kubeconfig that reaches the API server
// as the agent-controller ServiceAccount, through a proxy that records
// every request, and returns its path and the recorder.
func serviceAccountKubeconfig(t *testing.T) (string, *apiRecorder) {
	t.Helper()
	asSA := rest.CopyConfig(env.Config)
	asSA.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + sysNS + ":agent-controller",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + sysNS, "system:authenticated"},
	}
	rt, err := rest.TransportFor(asSA)
	if err != nil {
		t.Fatal(err)
	}
	target, _, err := rest.DefaultServerUrlFor(asSA)
	if err != nil {
		t.Fatal(err)
	}
	rec := &apiRecorder{next: rt}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:     rec,
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(io.Discard, "", 0),
	})
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	kc := clientcmdapi.NewConfig()
	kc.Clusters["recorded"] = &clientcmdapi.Cluster{Server: srv.URL}
	kc.AuthInfos["agent-controller"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["agent-controller"] = &clientcmdapi.Context{Cluster: "recorded", AuthInfo: "agent-controller"}
	kc.CurrentContext = "agent-controller"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path, rec
}

// fakePoller is batch-poller with a vendor that finishes every batch at
// once: what the controller does with the Kubernetes API for a batch run
// does not depend on what stands behind batch-poller.
type fakePoller struct {
	batchpb.UnimplementedBatchServiceServer
}

func (fakePoller) Submit(_ context.Context, req *batchpb.SubmitRequest) (*batchpb.SubmitResponse, error) {
	return &batchpb.SubmitResponse{BatchId: "batch-" + req.GetRun().GetUid(), Provider: batchpb.Provider_PROVIDER_ANTHROPIC}, nil
}

func (fakePoller) Get(context.Context, *batchpb.GetRequest) (*batchpb.GetResponse, error) {
	return &batchpb.GetResponse{State: batchpb.State_STATE_SUCCEEDED,
		Lines: []string{`{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"done","session_id":"s-1"}`}}, nil
}

func (fakePoller) Cancel(context.Context, *batchpb.CancelRequest) (*batchpb.CancelResponse, error) {
	return &batchpb.CancelResponse{State: batchpb.State_STATE_FAILED}, nil
}

func (fakePoller) Delete(context.Context, *batchpb.DeleteRequest) (*batchpb.DeleteResponse, error) {
	return &batchpb.DeleteResponse{}, nil
}

func startPoller(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	batchpb.RegisterBatchServiceServer(s, fakePoller{})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
// ServiceAccount, with exactly the permissions deploy/ grants it (the base
// and the realtime component), against an API server that also enforces
// blockOwnerDeletion permissions, and drives every kind of work the
// controller does: leader election, a Job run and its history pruning,
// missing references, a batch run and its cleanup at the provider, and a
// realtime run with its token Secret. No request may be refused, and every
// verb the RBAC grants must have been used: a grant nothing needs is a
// permission an attacker holding the token gets for free.
func TestInstalledRBACIsEnough(t *testing.T) {
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sysNS}})
	})
	grants := installRBAC(t, "agent-controller/rbac.yaml", "components/realtime/rbac.yaml")
	if err := env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: realtime.KeySecretName, Namespace: sysNS},
		Data: map[string][]byte{realtime.KeySecretKey: []byte(strings.Repeat("k", 32))}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, rec := serviceAccountKubeconfig(t)
	cfg, err := config.Parse([]string{
		"--kubeconfig=" + kubeconfig, "--pod-name=rbac-test", "--pod-namespace=" + sysNS,
		"--metrics-bind-address=" + freeAddr(t), "--health-probe-bind-address=" + freeAddr(t), "--shutdown-timeout=5s",
		"--leader-elect=true", "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
		"--poll-interval=1s", "--realtime-enabled",
		"--batch-enabled", "--batch-poller-address=" + startPoller(t), "--batch-poll-seconds=0.2", "--batch-cleanup-backoff=200ms",
	}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}
	t.Cleanup(stop)
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
		{"a realtime run gets its token Secret and Job", agent("realtime", "realtime"), func(t *testing.T) {
			eventually(t, "the realtime run Running", phaseIs(ns, "realtime", agentsv1alpha1.PhaseRunning))
			a, err := agentIn(ns, "realtime")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, realtime.TokenSecretName(string(a.UID)), metav1.GetOptions{}); err != nil {
				t.Fatalf("token Secret: %v", err)
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
	// Stepping down releases the Lease: that write is the run's too.
	stop()

	reqs := rec.requests()
	t.Run("no request of the ServiceAccount is refused", func(t *testing.T) {
		for _, r := range reqs {
			if r.code == http.StatusForbidden {
				t.Errorf("refused: %s %s/%s %s/%s", r.verb, r.group, r.resource, r.namespace, r.name)
			}
		}
	})
	// The API server checks agents/finalizers, not the controller: each
	// Job and token Secret created blocks its Agent's deletion.
	blocking := slices.ContainsFunc(reqs, func(r apiRequest) bool {
		return r.verb == "create" && (r.resource == "jobs" || r.resource == "secrets") && r.code == http.StatusCreated
	})
	t.Run("every verb the RBAC grants is used", func(t *testing.T) {
		for _, g := range grants {
			used := slices.ContainsFunc(reqs, func(r apiRequest) bool {
				return g.allows(r) && r.code != 0 && r.code != http.StatusForbidden
			})
			if g.group == agentsv1alpha1.GroupVersion.Group && g.resource == "agents/finalizers" && g.verb == "update" {
				used = blocking
			}
			if !used {
				t.Errorf("the RBAC grants %s, which the controller never used", g)
			}
		}
	})
}
