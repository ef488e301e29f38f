package realtime

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
	"github.com/agentplane/agentplane/tests/internal/runs"
)

// recipe creates a realtime AgentDefinition and its Station, both named name.
func recipe(t *testing.T, ns, name string, mutate func(*agentsv1alpha1.AgentDefinitionSpec)) {
	t.Helper()
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "Say hello.", Execution: agentsv1alpha1.ExecutionRealtime}}
	if mutate != nil {
		mutate(&def.Spec)
	}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: name, DeadlineMinutes: 10,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agentplane/runner:e2e"}}}}}}
	for _, o := range []client.Object{def, st} {
		if err := suite.Env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func launch(t *testing.T, ns, name, station, resume string) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			dumpPodLogs(t, ns)
		}
	})
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: agentsv1alpha1.AgentSpec{StationRef: station, ResumeSession: resume}}
	if err := suite.Env.Client.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, ns, name string, within time.Duration, what string, cond func(*agentsv1alpha1.Agent) bool) *agentsv1alpha1.Agent {
	t.Helper()
	return runs.WaitFor(t, suite.Env.Client, ns, name, within, what, cond, nil)
}

// caller returns the bearer token of a ServiceAccount that may prompt the
// Agents of ns (allowed) or has no RBAC at all.
func caller(t *testing.T, ns, name string, allowed bool) string {
	t.Helper()
	return runs.PromptCaller(t, suite.Env.Kube, ns, name, allowed)
}

func promptClient(t *testing.T) realtimev1.PromptServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(gatewayAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return realtimev1.NewPromptServiceClient(conn)
}

func as(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

// turn is one prompt's streamed answer.
type turn struct {
	events int
	texts  []string
	end    *realtimev1.TurnEnd
}

func prompt(ctx context.Context, c realtimev1.PromptServiceClient, ns, name, text string) (turn, error) {
	var out turn
	s, err := c.Prompt(ctx, &realtimev1.PromptRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: name}, Text: text})
	if err != nil {
		return out, err
	}
	for {
		r, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if ev := r.GetEvent(); ev != nil {
			out.events++
			if m := ev.GetMessage(); m != nil {
				out.texts = append(out.texts, m.GetText())
			}
		}
		if e := r.GetTurnEnd(); e != nil {
			out.end = e
		}
	}
}

// promptWhenReady retries while the run is not serving yet (Unavailable or
// busy with its first turn).
func promptWhenReady(t *testing.T, c realtimev1.PromptServiceClient, token, ns, name, text string) turn {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		tr, err := prompt(as(token), c, ns, name, text)
		if err == nil {
			return tr
		}
		code := status.Code(err)
		if (code != codes.Unavailable && code != codes.FailedPrecondition) || time.Now().After(deadline) {
			t.Fatalf("prompt %q: %v", text, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Realtime runs: a person prompts a Running realtime Agent through the
// gateway three times; each turn streams its events back, status.sessionId
// is patched when a prompt reveals a new one, and when the session is
// closed the Job completes and the Agent goes terminal with sessionId read
// from the pod log.
func TestARealtimeSessionOfThreePrompts(t *testing.T) {
	ns := suite.Env.Namespace(t)
	recipe(t, ns, "chat", nil)
	token := caller(t, ns, "alice", true)
	launch(t, ns, "talk", "chat", "")
	running := waitFor(t, ns, "talk", 60*time.Second, "Running", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase == agentsv1alpha1.PhaseRunning })
	job, err := suite.Env.Kube.BatchV1().Jobs(ns).Get(context.Background(), running.Status.JobName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Spec.Template.Labels[agentsv1alpha1.LabelExecution] != "realtime" {
		t.Error("the pod carries the agents.re-cinq.com/execution: realtime label")
	}
	c := promptClient(t)
	var last string
	for i, text := range []string{"first question", "second question", "third question"} {
		tr := promptWhenReady(t, c, token, ns, "talk", text)
		if tr.end == nil || tr.end.GetIsError() || tr.end.GetSessionId() == "" || tr.events == 0 {
			t.Fatalf("turn %d: %d events, end %v", i+1, tr.events, tr.end)
		}
		last = tr.end.GetSessionId()
		a := waitFor(t, ns, "talk", 10*time.Second, "sessionId patched", func(a *agentsv1alpha1.Agent) bool { return a.Status.SessionID == last })
		if a.Status.Phase != agentsv1alpha1.PhaseRunning {
			t.Fatalf("phase %s during the session", a.Status.Phase)
		}
	}
	info, err := c.GetSession(as(token), &realtimev1.GetSessionRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "talk"}})
	if err != nil || info.GetTurns() < 3 {
		t.Fatalf("GetSession = %v, %v", info, err)
	}
	if _, err := c.Close(as(token), &realtimev1.CloseRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "talk"}}); err != nil {
		t.Fatal(err)
	}
	a := waitFor(t, ns, "talk", 60*time.Second, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() })
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || a.Status.SessionID != last {
		t.Errorf("phase %s sessionId %q (want Succeeded with %q read from the log); reason %q", a.Status.Phase, a.Status.SessionID, last, a.Status.FailureReason)
	}
	if _, err := prompt(as(token), c, ns, "talk", "too late"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("a prompt to a finished Agent: %v, want FailedPrecondition", err)
	}
}

// The supervisor accepts only the run's own token; a caller without RBAC
// is refused at the gateway. Neither reaches the CLI.
func TestOnlyTheRunsTokenAndAllowedCallersGetThrough(t *testing.T) {
	ns := suite.Env.Namespace(t)
	recipe(t, ns, "chat", nil)
	allowed := caller(t, ns, "alice", true)
	stranger := caller(t, ns, "mallory", false)
	launch(t, ns, "talk", "chat", "")
	c := promptClient(t)
	first := promptWhenReady(t, c, allowed, ns, "talk", "hello")
	if first.end == nil {
		t.Fatal("no turn end")
	}
	if _, err := prompt(as(stranger), c, ns, "talk", "let me in"); status.Code(err) != codes.PermissionDenied {
		t.Errorf("caller without RBAC: %v, want PermissionDenied", err)
	}
	// Straight to the pod's :8090 with a wrong token.
	conn, err := grpc.NewClient("127.0.0.1:8090", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	sc := supervisorv1.NewSessionServiceClient(conn)
	for _, tok := range []string{"", "not-the-token", string(waitFor(t, ns, "talk", time.Second, "exists", func(*agentsv1alpha1.Agent) bool { return true }).UID)} {
		s, err := sc.Prompt(context.Background(), &supervisorv1.PromptRequest{Token: tok, Text: "sneak in"})
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("token %q at the supervisor: %v, want Unauthenticated", tok, err)
		}
	}
	info, err := c.GetSession(as(allowed), &realtimev1.GetSessionRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "talk"}})
	if err != nil || info.GetTurns() != 2 {
		t.Errorf("GetSession = %v, %v: want the first turn and one prompt, nothing from the refused calls", info, err)
	}
	if _, err := c.Close(as(allowed), &realtimev1.CloseRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "talk"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ns, "talk", 60*time.Second, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() })
}

// With spec.resumeSession set, the Job restores that conversation from the
// store and sends no initial prompt: the session waits for the first one,
// and the Agent says the conversation was restored.
func TestAResumedSessionSendsNoInitialPrompt(t *testing.T) {
	var mu sync.Mutex
	var fetched []string
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			return // the session's save at its end
		}
		mu.Lock()
		fetched = append(fetched, r.URL.Path)
		mu.Unlock()
		_, _ = w.Write(conversationArchive(t))
	}))
	defer store.Close()
	ns, token := launchResumed(t, store.URL)
	c := promptClient(t)
	// Until the first prompt the session has had no turn at all.
	deadline := time.Now().Add(90 * time.Second)
	for {
		info, err := c.GetSession(as(token), &realtimev1.GetSessionRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "again"}})
		if err == nil {
			if info.GetTurns() != 0 || info.GetState() != realtimev1.SessionState_SESSION_STATE_IDLE {
				t.Fatalf("a resumed session ran a turn before any prompt: %v", info)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session never served: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	mu.Lock()
	if len(fetched) != 1 || fetched[0] != "/sess-earlier" {
		t.Errorf("conversation fetched as %v, want /sess-earlier", fetched)
	}
	mu.Unlock()
	tr := promptWhenReady(t, c, token, ns, "again", "where were we?")
	if tr.end == nil || tr.end.GetSessionId() == "" {
		t.Fatalf("turn end %v", tr.end)
	}
	// The Agent says, while the session runs, that it continues its
	// conversation.
	waitFor(t, ns, "again", 30*time.Second, "ConversationRestored=True/Restored", func(a *agentsv1alpha1.Agent) bool {
		c := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionConversationRestored)
		return a.Status.Phase == agentsv1alpha1.PhaseRunning && c != nil && c.Status == metav1.ConditionTrue && c.Reason == agentsv1alpha1.ReasonRestored
	})
	if _, err := c.Close(as(token), &realtimev1.CloseRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "again"}}); err != nil {
		t.Fatal(err)
	}
	a := waitFor(t, ns, "again", 60*time.Second, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() })
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
		t.Errorf("status %+v", a.Status)
	}
}

// launchResumed launches Agent "again", which resumes session
// sess-earlier from the conversation store at storeURL, in a new
// namespace where alice may prompt it; it returns the namespace and
// alice's token.
func launchResumed(t *testing.T, storeURL string) (ns, token string) {
	t.Helper()
	ns = suite.Env.Namespace(t)
	recipe(t, ns, "chat", func(s *agentsv1alpha1.AgentDefinitionSpec) {
		s.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: storeURL}}
	})
	token = caller(t, ns, "alice", true)
	launch(t, ns, "again", "chat", "sess-earlier")
	return ns, token
}

// A resumed session whose conversation store is down still runs: the init
// step skips the restore, the session starts fresh and answers its first
// prompt in a new session, and the Agent says, while the session is still
// Running, that the conversation was not restored.
func TestAResumedSessionWhoseStoreIsDownStartsFresh(t *testing.T) {
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer store.Close()
	ns, token := launchResumed(t, store.URL)
	restored := func(a *agentsv1alpha1.Agent) *metav1.Condition {
		return meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionConversationRestored)
	}
	a := waitFor(t, ns, "again", 90*time.Second, "ConversationRestored set", func(a *agentsv1alpha1.Agent) bool { return restored(a) != nil })
	want := `conversation "sess-earlier" could not be restored from ` + store.URL + `: status 503; starting a fresh conversation`
	if c := restored(a); a.Status.Phase != agentsv1alpha1.PhaseRunning || c.Status != metav1.ConditionFalse ||
		c.Reason != agentsv1alpha1.ReasonRestoreSkipped || c.Message != want {
		t.Fatalf("phase %s condition %+v: want Running with False/%s %q", a.Status.Phase, c, agentsv1alpha1.ReasonRestoreSkipped, want)
	}
	c := promptClient(t)
	tr := promptWhenReady(t, c, token, ns, "again", "where were we?")
	if tr.end == nil || tr.end.GetIsError() || tr.end.GetSessionId() == "" || tr.end.GetSessionId() == "sess-earlier" || len(tr.texts) == 0 {
		t.Fatalf("turn end %v, %d texts: want an answer in a fresh session", tr.end, len(tr.texts))
	}
	if _, err := c.Close(as(token), &realtimev1.CloseRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "again"}}); err != nil {
		t.Fatal(err)
	}
	a = waitFor(t, ns, "again", 60*time.Second, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() })
	if c := restored(a); a.Status.Phase != agentsv1alpha1.PhaseSucceeded || c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("phase %s condition %+v: want Succeeded, still saying the conversation was not restored", a.Status.Phase, c)
	}
}

// conversationArchive is a tar.gz of a Claude state dir, as a store holds it.
func conversationArchive(t *testing.T) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	body := []byte(`{"type":"summary","summary":"earlier"}` + "\n")
	for _, h := range []*tar.Header{
		{Name: ".claude/projects/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: ".claude/projects/-workspace/sess-earlier.jsonl", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Error(err)
		}
		if h.Typeflag == tar.TypeReg {
			_, _ = tw.Write(body)
		}
	}
	_ = tw.Close()
	_ = zw.Close()
	return buf.Bytes()
}

// Pending: the definition is validated and the Agent fails with the
// matching reason.
func TestRealtimeValidationReasons(t *testing.T) {
	ns := suite.Env.Namespace(t)
	cases := []struct {
		rule, station, resume, want string
		mutate                      func(*agentsv1alpha1.AgentDefinitionSpec)
	}{
		{"resources.conversation.id is refused", "with-id", "", "resources.conversation.id", func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: "https://s", ID: "x"}}
		}},
		{"resources.conversation.pin is refused", "with-pin", "", "resources.conversation.pin", func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: "https://s", Pin: "x"}}
		}},
		{"resumeSession requires realtime execution", "job-run", "sess", "resumeSession requires realtime execution", func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Execution = agentsv1alpha1.ExecutionJob
		}},
		{"resumeSession needs resources.conversation.source", "no-source", "sess", "resumeSession needs resources.conversation.source", nil},
		{"<vendor> cannot resume a session", "exec-run", "sess", "exec cannot resume a session", func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Model = "exec"
			s.ToolConfig = &apiextensionsv1.JSON{Raw: []byte(`{"command":["sh","-c","echo hi"]}`)}
			s.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: "https://s"}}
		}},
	}
	for _, tc := range cases {
		recipe(t, ns, tc.station, tc.mutate)
		launch(t, ns, tc.station, tc.station, tc.resume)
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			a := waitFor(t, ns, tc.station, 30*time.Second, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() })
			if a.Status.Phase != agentsv1alpha1.PhaseFailed || !strings.Contains(a.Status.FailureReason, tc.want) || a.Status.JobName != "" {
				t.Errorf("status %+v, want Failed at Pending with %q", a.Status, tc.want)
			}
		})
	}
}

// dumpPodLogs prints the agent container logs of ns's pods, to explain a
// failed run.
func dumpPodLogs(t *testing.T, ns string) {
	pods, err := suite.Env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		for _, c := range []string{"init", "agent"} {
			raw, err := suite.Env.Kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c}).DoRaw(context.Background())
			if err == nil {
				t.Logf("pod %s container %s log:\n%s", p.Name, c, raw)
			}
		}
	}
}
