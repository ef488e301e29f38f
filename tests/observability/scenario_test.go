package observability

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/tests/internal/runs"
	"github.com/agentplane/agentplane/tests/internal/stack"
	"github.com/agentplane/agentplane/tools/demo/scenario"
)

// The scenario gives every panel something to show: the demo's Job runs
// (successes, failures, a deadline, a queued run, a missing Station), a
// batch run through batch-poller and fakevendor, a realtime session with
// two turns and two refused callers, and an Omnia AgentRuntime with its
// Provider, PromptPack and ToolRegistry.

func jobRuns(t *testing.T, ns string) {
	ctx := context.Background()
	if err := scenario.Apply(ctx, suite.Env.Client, ns, filepath.Join(suite.Env.RepoRoot, "examples", "demo"), io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := scenario.Launch(ctx, suite.Env.Client, ns, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, r := range scenario.Runs {
		a := runs.WaitFor(t, suite.Env.Client, ns, r.Name, 3*time.Minute, "terminal", terminal, nil)
		if why := r.Check(a); why != "" {
			t.Errorf("%s: %s", r.Name, why)
		}
	}
}

func terminal(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() }

// station creates an AgentDefinition and a Station, both named name.
func station(t *testing.T, ns, name string, def agentsv1alpha1.AgentDefinitionSpec) {
	t.Helper()
	d := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: def}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: name, DeadlineMinutes: 5, MaxConcurrentRuns: 2,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agentplane/runner:e2e"}}}}}}
	for _, o := range []client.Object{d, st} {
		if err := suite.Env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func launch(t *testing.T, ns, name, station string) {
	t.Helper()
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentSpec{StationRef: station, Parameters: map[string]string{"topic": "tides"}}}
	if err := suite.Env.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func batchRun(t *testing.T, ns string) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: agentsv1alpha1.AgentSecretsName, Namespace: ns},
		StringData: map[string]string{"ANTHROPIC_API_KEY": apiKey, "OPENAI_API_KEY": apiKey, "GEMINI_API_KEY": apiKey}}
	if err := suite.Env.Client.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	station(t, ns, "summarizer", agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "Summarise {topic} in one line.",
		Execution: agentsv1alpha1.ExecutionBatch, Batch: &agentsv1alpha1.BatchSpec{MaxTokens: 256, TimeoutMinutes: 30}})
	launch(t, ns, "summary", "summarizer")
	a := runs.WaitFor(t, suite.Env.Client, ns, "summary", 2*time.Minute, "terminal", terminal, nil)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
		t.Errorf("the batch run ended %s: %s", a.Status.Phase, a.Status.FailureReason)
	}
}

func realtimeRun(t *testing.T, ns string) {
	// Realtime run pods serve on the node's 127.0.0.1:8090: one at a time
	// across the suites of this machine.
	unlock, err := stack.LockRealtimePort()
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	station(t, ns, "chat", agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "Say hello.", Execution: agentsv1alpha1.ExecutionRealtime})
	allowed, stranger := runs.PromptCaller(t, suite.Env.Kube, ns, "alice", true), runs.PromptCaller(t, suite.Env.Kube, ns, "mallory", false)
	launch(t, ns, "talk", "chat")
	conn, err := grpc.NewClient(gatewayAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c := realtimev1.NewPromptServiceClient(conn)
	ref := &realtimev1.AgentRef{Namespace: ns, Name: "talk"}
	for _, text := range []string{"first question", "second question"} {
		promptWhenReady(t, c, allowed, ref, text)
	}
	for _, refused := range []struct {
		token string
		want  codes.Code
	}{{stranger, codes.PermissionDenied}, {"not-a-token", codes.Unauthenticated}} {
		if err := prompt(as(refused.token), c, ref, "let me in"); status.Code(err) != refused.want {
			t.Errorf("refused caller: %v, want %s", err, refused.want)
		}
	}
	if _, err := c.Close(as(allowed), &realtimev1.CloseRequest{Agent: ref}); err != nil {
		t.Fatal(err)
	}
	a := runs.WaitFor(t, suite.Env.Client, ns, "talk", time.Minute, "terminal", terminal, nil)
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
		t.Errorf("the realtime run ended %s: %s", a.Status.Phase, a.Status.FailureReason)
	}
}

func as(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

// prompt sends one prompt and reads its answer to the end.
func prompt(ctx context.Context, c realtimev1.PromptServiceClient, ref *realtimev1.AgentRef, text string) error {
	s, err := c.Prompt(ctx, &realtimev1.PromptRequest{Agent: ref, Text: text})
	if err != nil {
		return err
	}
	for {
		if _, err := s.Recv(); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// promptWhenReady retries while the run is not serving yet.
func promptWhenReady(t *testing.T, c realtimev1.PromptServiceClient, token string, ref *realtimev1.AgentRef, text string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := prompt(as(token), c, ref, text)
		if err == nil {
			return
		}
		code := status.Code(err)
		if (code != codes.Unavailable && code != codes.FailedPrecondition) || time.Now().After(deadline) {
			t.Fatalf("prompt %q: %v", text, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// omniaRuntime applies the support assistant example and waits until
// omnia-controllers has judged every object.
func omniaRuntime(t *testing.T, ns string) {
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join(suite.Env.RepoRoot, "examples", "omnia", "support-assistant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "support-assistant.yaml"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := scenario.Apply(ctx, suite.Env.Client, ns, dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ar := &omniav1alpha1.AgentRuntime{}
		err := suite.Env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "support-assistant"}, ar)
		if err == nil && len(ar.Status.Conditions) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("AgentRuntime support-assistant has no conditions after a minute (last error %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
