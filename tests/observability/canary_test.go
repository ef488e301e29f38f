package observability

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/runspec"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/tests/internal/receiver"
	"github.com/agentplane/agentplane/tests/internal/runs"
	"github.com/agentplane/agentplane/tests/internal/stack"
)

// TestNoSecretValueLeaksAnywhere puts one canary value in every place a
// user can give the platform a secret (agent-secrets keys exposed as env,
// an MCP server's header, a conversation store's header, an http sink's
// headers, an Omnia Provider's credential), runs a Job, a batch and a
// realtime run and an Omnia Provider on them, and then reads everything
// the platform wrote: component and pod logs, object statuses, pod and Job
// specs, ConfigMaps, Events, every JetStream message and every sink
// payload. Neither the canary nor the vendor key (apiKey, the batch run's
// key) may appear in any of it (docs/architecture.md: secrets never appear
// in logs, status, events or messages).
func TestNoSecretValueLeaksAnywhere(t *testing.T) {
	canary := newCanary(t)
	ns := suite.Env.Namespace(t)
	hook := newCanaryServer(t)
	ctx := context.Background()

	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: agentsv1alpha1.AgentSecretsName, Namespace: ns},
		StringData: map[string]string{
			// The batch run's vendor keys must be the key fakevendor accepts.
			"ANTHROPIC_API_KEY": apiKey, "OPENAI_API_KEY": apiKey, "GEMINI_API_KEY": apiKey,
			"canary-env":    canary,
			"mcp-auth":      "Bearer " + canary,
			"store-headers": "Authorization: Bearer " + canary,
			"sink-headers":  "X-Canary: " + canary,
		}}
	cred := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "canary-credentials", Namespace: ns,
		Labels: map[string]string{"omnia.altairalabs.ai/type": "credentials"}},
		StringData: map[string]string{"ANTHROPIC_API_KEY": canary}}
	for _, o := range []client.Object{sec, cred} {
		if err := suite.Env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	withSecrets := func(conv *agentsv1alpha1.ConversationSpec) *agentsv1alpha1.AgentResources {
		return &agentsv1alpha1.AgentResources{
			Secrets:      []agentsv1alpha1.SecretEnvEntry{{Name: "CANARY_TOKEN", Ref: "canary-env"}},
			MCPServers:   []agentsv1alpha1.MCPServer{{Name: "tools", Transport: agentsv1alpha1.MCPTransportHTTP, URL: hook.url + "/mcp", HeadersSecret: "mcp-auth"}},
			Conversation: conv,
		}
	}
	sinks := func(headers string) *agentsv1alpha1.OutputSpec {
		return &agentsv1alpha1.OutputSpec{Sinks: []agentsv1alpha1.OutputSink{{Type: agentsv1alpha1.SinkHTTP, URL: hook.url + "/hook", HeadersSecret: headers}}}
	}
	var answer []item // the realtime caller's, written by its subtest
	t.Run("runs", func(outer *testing.T) {
		outer.Run("a Job run", func(t *testing.T) {
			t.Parallel()
			station(t, ns, "canary-job", agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "Summarise {topic}.",
				Resources: withSecrets(&agentsv1alpha1.ConversationSpec{Source: hook.url + "/store", Pin: "canary-pin", HeadersSecret: "store-headers"}),
				Output:    sinks("sink-headers")})
			launch(t, ns, "canary-job", "canary-job")
			mustSucceed(t, runs.WaitFor(t, suite.Env.Client, ns, "canary-job", 3*time.Minute, "terminal", terminal, nil))
		})
		outer.Run("a batch run", func(t *testing.T) {
			t.Parallel()
			// A batch run may not send sink headers from agent-secrets (the
			// controller does not read it), so its sink has none.
			station(t, ns, "canary-batch", agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "Summarise {topic}.",
				Execution: agentsv1alpha1.ExecutionBatch, Batch: &agentsv1alpha1.BatchSpec{MaxTokens: 256, TimeoutMinutes: 30},
				Output: sinks("")})
			launch(t, ns, "canary-batch", "canary-batch")
			mustSucceed(t, runs.WaitFor(t, suite.Env.Client, ns, "canary-batch", 2*time.Minute, "terminal", terminal, nil))
		})
		outer.Run("a realtime session", func(t *testing.T) {
			t.Parallel()
			answer = canaryRealtime(t, ns, agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "Say hello.",
				Execution: agentsv1alpha1.ExecutionRealtime,
				Resources: withSecrets(&agentsv1alpha1.ConversationSpec{Source: hook.url + "/store", HeadersSecret: "store-headers"}),
				Output:    sinks("sink-headers")})
		})
		outer.Run("an Omnia Provider", func(t *testing.T) {
			t.Parallel()
			canaryProvider(t, ns)
		})
	})
	if t.Failed() {
		t.FailNow()
	}
	// The canary must really have reached the runs for its absence below
	// to mean anything: the receiving ends are its legitimate holders.
	t.Run("the canary reached the runs", func(t *testing.T) {
		for _, want := range []struct{ endpoint, header, value string }{
			{"hook", "X-Canary", canary},
			{"store", "Authorization", "Bearer " + canary},
		} {
			if got := hook.HeaderSeen(want.endpoint, want.header); !slices.Contains(got, want.value) {
				t.Errorf("/%s was never sent %s from agent-secrets (%d values, none the canary)", want.endpoint, want.header, len(got))
			}
		}
		got := hook.agents()
		t.Logf("sink payloads by Agent: %v", got)
		for _, a := range []string{"canary-job", "canary-batch", "canary-chat"} {
			if got[a] == 0 {
				t.Errorf("the http sink got no payload of %s", a)
			}
		}
		pods, err := suite.Env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refs := map[string]int{}
		for _, p := range pods.Items {
			for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				for _, e := range c.Env {
					if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && r.SecretKeyRef.Name == agentsv1alpha1.AgentSecretsName {
						refs[r.SecretKeyRef.Key]++
					}
				}
			}
		}
		t.Logf("run pods: %d, agent-secrets keys they reference: %v", len(pods.Items), refs)
		for _, key := range []string{"canary-env", "mcp-auth", "store-headers", "sink-headers"} {
			if refs[key] == 0 {
				t.Errorf("no run pod references agent-secrets key %s", key)
			}
		}
	})

	secrets := map[string]string{"canary": canary, "apiKey": apiKey}
	// The NATS credentials are secrets too: the platform's, and each run's
	// (seed and JWT), which only its run's supervisor may hold.
	platformNATS, err := suite.NATS.Secrets()
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(secrets, platformNATS)
	t.Run("the runs had NATS credentials to leak", func(t *testing.T) {
		found := runCredentials(t, ns, secrets)
		t.Logf("run NATS credentials searched for: %v", found)
		for _, a := range []string{"canary-job", "canary-chat"} {
			if !slices.Contains(found, a) {
				t.Errorf("no NATS credential of run %s to search for", a)
			}
		}
	})
	// A Secret marshalled whole carries its values in base64.
	for k, v := range sec.StringData {
		if b64 := base64.StdEncoding.EncodeToString([]byte(v)); !slices.Contains(slices.Collect(maps.Values(secrets)), b64) {
			secrets["base64 of agent-secrets "+k] = b64
		}
	}
	// Events and messages are written a little after the runs end; a
	// late one must be searched too.
	settle(t, ns)
	sources := []struct {
		name  string
		items func(t *testing.T) []item
	}{
		{"component logs", componentLogs},
		{"run pod logs (localnode)", podLogs},
		{"agents.re-cinq.com statuses", func(t *testing.T) []item { return statuses(t, "agents.re-cinq.com") }},
		{"omnia.altairalabs.ai statuses", func(t *testing.T) []item { return statuses(t, "omnia.altairalabs.ai") }},
		{"pods, Jobs and ConfigMaps", workloads},
		{"Events (core/v1 and events.k8s.io/v1)", kubeEvents},
		{"JetStream messages", streamMessages},
		{"http sink payloads", hook.payloads},
		{"realtime answer", func(*testing.T) []item { return answer }},
	}
	for _, src := range sources {
		items := src.items(t)
		size := 0
		for _, it := range items {
			size += len(it.data)
		}
		t.Logf("searched %s: %d items, %d bytes", src.name, len(items), size)
		if len(items) == 0 {
			t.Errorf("%s: nothing to search; a search of nothing proves nothing", src.name)
		}
		for _, it := range items {
			for what, value := range secrets {
				for _, at := range occurrences(it.data, value) {
					t.Errorf("the %s leaked in %s, %s: %q", what, src.name, it.where, excerpt(it.data, at, secrets))
				}
			}
		}
	}
}

// runCredentials adds to secrets the seed and JWT of the NATS credential
// of every run of ns whose Secret still exists, and returns the runs'
// Agent names.
func runCredentials(t *testing.T, ns string, secrets map[string]string) []string {
	t.Helper()
	list, err := suite.Env.Kube.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, s := range list.Items {
		if !strings.HasPrefix(s.Name, runspec.NATSSecretName("")) || len(s.OwnerReferences) == 0 {
			continue
		}
		name := s.OwnerReferences[0].Name
		if err := stack.CredsSecrets(secrets, "NATS credential of run "+name, s.Data[runspec.NATSCredsKey]); err != nil {
			t.Errorf("Secret %s: %v", s.Name, err)
			continue
		}
		found = append(found, name)
	}
	return found
}

func newCanary(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "canary-" + hex.EncodeToString(b)
}

func mustSucceed(t *testing.T, a *agentsv1alpha1.Agent) {
	t.Helper()
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
		t.Errorf("%s ended %s: %s", a.Name, a.Status.Phase, a.Status.FailureReason)
	}
}

// canaryServer is the http sink, the MCP server and the conversation
// store of the runs (receiver.Recorder).
type canaryServer struct {
	*receiver.Recorder
	url string
}

func newCanaryServer(t *testing.T) *canaryServer {
	r := receiver.NewRecorder(t)
	return &canaryServer{Recorder: r, url: r.URL}
}

// payloads are the sink payloads, each named by its place.
func (s *canaryServer) payloads(*testing.T) []item {
	var out []item
	for i, b := range s.Bodies() {
		out = append(out, item{where: fmt.Sprintf("payload %d", i+1), data: b})
	}
	return out
}

// agents returns the Agents the sink payloads name, with their counts.
func (s *canaryServer) agents() map[string]int {
	out := map[string]int{}
	for _, p := range s.payloads(nil) {
		var v struct{ Source struct{ Agent string } }
		_ = json.Unmarshal(p.data, &v)
		out[v.Source.Agent]++
	}
	return out
}

// canaryRealtime runs one realtime session of one prompt on def and
// returns what the caller was answered.
func canaryRealtime(t *testing.T, ns string, def agentsv1alpha1.AgentDefinitionSpec) []item {
	unlock, err := stack.LockRealtimePort()
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	station(t, ns, "canary-chat", def)
	caller := runs.PromptCaller(t, suite.Env.Kube, ns, "alice", true)
	waitTokenAccepted(t, caller)
	launch(t, ns, "canary-chat", "canary-chat")
	conn, err := grpc.NewClient(gatewayAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c := realtimev1.NewPromptServiceClient(conn)
	ref := &realtimev1.AgentRef{Namespace: ns, Name: "canary-chat"}
	answer := promptAnswer(t, c, caller, ref, "what is the weather")
	if _, err := c.Close(as(caller), &realtimev1.CloseRequest{Agent: ref}); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, runs.WaitFor(t, suite.Env.Client, ns, "canary-chat", time.Minute, "terminal", terminal, nil))
	return answer
}

// promptAnswer sends one prompt, retrying while the run is not serving
// yet, and returns each message of the answer.
func promptAnswer(t *testing.T, c realtimev1.PromptServiceClient, token string, ref *realtimev1.AgentRef, text string) []item {
	deadline := time.Now().Add(90 * time.Second)
	for {
		var out []item
		s, err := c.Prompt(as(token), &realtimev1.PromptRequest{Agent: ref, Text: text})
		for err == nil {
			var r *realtimev1.PromptResponse
			if r, err = s.Recv(); err == nil {
				out = append(out, item{where: fmt.Sprintf("answer message %d", len(out)+1), data: []byte(r.String())})
			}
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		code := status.Code(err)
		if (code != codes.Unavailable && code != codes.FailedPrecondition) || time.Now().After(deadline) {
			t.Fatalf("prompt %q: %v", text, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// waitTokenAccepted waits until the apiserver authenticates a token of a
// ServiceAccount created a moment ago: it may not know the account yet.
func waitTokenAccepted(t *testing.T, token string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		tr, err := suite.Env.Kube.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{runs.GatewayAudience}}}, metav1.CreateOptions{})
		if err == nil && tr.Status.Authenticated {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the caller's token is not accepted after 30s (last error %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// canaryProvider creates a Provider on the canary credential and waits
// until omnia-controllers has judged it.
func canaryProvider(t *testing.T, ns string) {
	ctx := context.Background()
	p := &omniav1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "canary-claude", Namespace: ns},
		Spec: omniav1alpha1.ProviderSpec{Type: "claude", Model: "claude-sonnet-4-5",
			Credential: &omniav1alpha1.CredentialConfig{SecretRef: &omniav1alpha1.SecretKeyRef{Name: "canary-credentials", Key: ptr.To("ANTHROPIC_API_KEY")}}}}
	if err := suite.Env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := suite.Env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: p.Name}, p)
		if err == nil && len(p.Status.Conditions) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Provider %s has no conditions after a minute (last error %v)", p.Name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
