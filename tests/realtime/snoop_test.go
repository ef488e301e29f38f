package realtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/tests/internal/receiver"
	"github.com/agentplane/agentplane/tests/internal/runs"
	"github.com/agentplane/agentplane/tests/internal/stack"
)

// TestTheVendorCLICannotReadWhatItsSupervisorHolds is the attack of a
// vendor CLI on the secrets of the supervisor that runs it, as the same
// uid (1000) in the same container: the mock CLI's snoop mode reads
// /proc/<supervisor>/environ and /proc/1/environ, opens
// /proc/<supervisor>/mem, and /proc/<supervisor>/fd/1 (the pod log the
// controller reads results from) for writing, and reads every file under
// /var/run/agentplane, where the platform mounts Secrets. A Job run and a realtime run (whose
// supervisor holds the run's token) each hold a sink header secret, a
// conversation store header secret and the run's NATS credential. Every
// /proc attempt must be made and refused, the mount directory must be
// listed (its public CA read, so the path is right), and no secret value
// may appear in the run's events, its pod's logs or the realtime answers
// (docs/security.md, "The vendor CLI and its supervisor").
func TestTheVendorCLICannotReadWhatItsSupervisorHolds(t *testing.T) {
	ns := suite.Env.Namespace(t)
	ctx := context.Background()
	sinkSecret, storeSecret := randomValue(t, "sink"), randomValue(t, "store")
	if err := suite.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: agentsv1alpha1.AgentSecretsName, Namespace: ns},
		StringData: map[string]string{"sink-headers": "X-Snoop: " + sinkSecret, "store-headers": "Authorization: Bearer " + storeSecret}}); err != nil {
		t.Fatal(err)
	}
	hook := receiver.NewRecorder(t)
	withSecrets := func(execution agentsv1alpha1.ExecutionMode, pin string) func(*agentsv1alpha1.AgentDefinitionSpec) {
		return func(s *agentsv1alpha1.AgentDefinitionSpec) {
			s.Prompt, s.Execution = "mock:snoop", execution
			s.Output = &agentsv1alpha1.OutputSpec{Sinks: []agentsv1alpha1.OutputSink{{Type: agentsv1alpha1.SinkHTTP, URL: hook.URL + "/hook", HeadersSecret: "sink-headers"}}}
			s.Resources = &agentsv1alpha1.AgentResources{Conversation: &agentsv1alpha1.ConversationSpec{Source: hook.URL + "/store", Pin: pin, HeadersSecret: "store-headers"}}
		}
	}

	recipe(t, ns, "snoop-job", withSecrets(agentsv1alpha1.ExecutionJob, "snoop-pin"))
	launch(t, ns, "snoop-job", "snoop-job", "")
	if a := waitFor(t, ns, "snoop-job", 3*time.Minute, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() }); a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
		t.Fatalf("the Job run ended %s: %s", a.Status.Phase, a.Status.FailureReason)
	}

	recipe(t, ns, "snoop-chat", withSecrets(agentsv1alpha1.ExecutionRealtime, ""))
	token := caller(t, ns, "alice", true)
	launch(t, ns, "snoop-chat", "snoop-chat", "")
	c := promptClient(t)
	tr := promptWhenReady(t, c, token, ns, "snoop-chat", "mock:snoop")
	if tr.end == nil || tr.end.GetIsError() {
		t.Fatalf("the realtime turn: %d events, end %v", tr.events, tr.end)
	}
	if _, err := c.Close(as(token), &realtimev1.CloseRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "snoop-chat"}}); err != nil {
		t.Fatal(err)
	}
	if a := waitFor(t, ns, "snoop-chat", time.Minute, "terminal", func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() }); a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
		t.Fatalf("the realtime run ended %s: %s", a.Status.Phase, a.Status.FailureReason)
	}

	// What the supervisors held: the headers reached their legitimate
	// holders, so each was in a supervisor's environment.
	secrets := map[string]string{"sink header secret": sinkSecret, "conversation store header secret": storeSecret}
	for _, want := range []struct{ endpoint, header, value string }{
		{"hook", "X-Snoop", sinkSecret}, {"store", "Authorization", "Bearer " + storeSecret},
	} {
		if !slices.Contains(hook.HeaderSeen(want.endpoint, want.header), want.value) {
			t.Errorf("/%s was never sent its %s: the supervisor did not hold it, so its absence below proves nothing", want.endpoint, want.header)
		}
	}
	for _, name := range []string{"snoop-job", "snoop-chat"} {
		a := &agentsv1alpha1.Agent{}
		if err := suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, a); err != nil {
			t.Fatal(err)
		}
		sec, err := suite.Env.Kube.CoreV1().Secrets(ns).Get(ctx, runspec.NATSSecretName(string(a.UID)), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("run %s has no NATS credential to protect: %v", name, err)
		}
		if err := stack.CredsSecrets(secrets, "NATS credential of "+name, sec.Data[runspec.NATSCredsKey]); err != nil {
			t.Fatal(err)
		}
	}
	chat := &agentsv1alpha1.Agent{}
	if err := suite.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "snoop-chat"}, chat); err != nil {
		t.Fatal(err)
	}
	rt, err := suite.Env.Kube.CoreV1().Secrets(ns).Get(ctx, realtime.TokenSecretName(string(chat.UID)), metav1.GetOptions{})
	if err != nil || len(rt.Data[realtime.TokenSecretKey]) == 0 {
		t.Fatalf("the realtime run has no token to protect: %v", err)
	}
	secrets["realtime token"] = string(rt.Data[realtime.TokenSecretKey])

	for _, name := range []string{"snoop-job", "snoop-chat"} {
		t.Run(name+": every attempt was made and refused", func(t *testing.T) {
			checkSnoopRefused(t, snoopAttempts(t, runs.Stored(t, suite.NATSURL, ns, name, natsOpts...)))
		})
	}
	t.Run("no secret value reached the CLI's output", func(t *testing.T) {
		sources := map[string][]byte{"realtime answer": []byte(strings.Join(tr.texts, "\n"))}
		for _, name := range []string{"snoop-job", "snoop-chat"} {
			for i, ev := range runs.Stored(t, suite.NATSURL, ns, name, natsOpts...) {
				raw, err := protojson.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				sources[fmt.Sprintf("%s event %d", name, i+1)] = raw
			}
		}
		for pod, log := range podLogs(t, ns) {
			sources["log of "+pod] = log
		}
		for where, data := range sources {
			for what, value := range secrets {
				if strings.Contains(string(data), value) {
					t.Errorf("the %s is in %s", what, where)
				}
			}
		}
		t.Logf("searched %d sources for %d secret values", len(sources), len(secrets))
	})
}

// snoopAttempt is one Read or Glob of the mock's snoop mode and its result.
type snoopAttempt struct {
	tool, path, text string
	answered, failed bool
}

// snoopAttempts pairs the snoop mode's tool calls with their results.
func snoopAttempts(t *testing.T, evs []*eventsv1.RunEvent) []*snoopAttempt {
	t.Helper()
	byID := map[string]*snoopAttempt{}
	var out []*snoopAttempt
	for _, ev := range evs {
		if call := ev.GetToolCall(); call != nil {
			in := call.GetInput().AsMap()
			path, _ := in["file_path"].(string)
			if pattern, ok := in["pattern"].(string); ok {
				path = pattern
			}
			a := &snoopAttempt{tool: call.GetName(), path: path}
			byID[call.GetId()] = a
			out = append(out, a)
		}
		if res := ev.GetToolResult(); res != nil {
			if a, ok := byID[res.GetToolCallId()]; ok {
				a.answered, a.failed, a.text = true, res.GetIsError(), res.GetText()
			}
		}
	}
	return out
}

var procPath = regexp.MustCompile(`^/proc/([0-9]+)/(environ|mem|fd/1)$`)

// checkSnoopRefused fails t unless the supervisor's environment, memory
// and stdout (for writing) and PID 1's environment were each tried and
// refused, and the mount directory was listed, with only the CA in it,
// which was read.
func checkSnoopRefused(t *testing.T, attempts []*snoopAttempt) {
	t.Helper()
	tried := map[string]int{}
	caRead := false
	for _, a := range attempts {
		t.Logf("%s %s: error %v, %.80q", a.tool, a.path, a.failed, a.text)
		if !a.answered {
			t.Errorf("%s %s got no answer", a.tool, a.path)
			continue
		}
		switch m := procPath.FindStringSubmatch(a.path); {
		case m != nil:
			what := "the supervisor's " + m[2]
			if m[1] == "1" {
				what = "PID 1's " + m[2]
			}
			tried[what]++
			if !a.failed || !strings.Contains(a.text, "permission denied") {
				t.Errorf("%s (%s) was not refused: %.300q", what, a.path, a.text)
			}
		case a.tool == "Glob":
			tried["the mount directory"]++
			if a.failed {
				t.Errorf("listing %s failed (%s): the run has a CA there, so the path is wrong", a.path, a.text)
			}
		case strings.HasPrefix(a.path, runspec.NATSMountDir+"/") && strings.HasSuffix(a.path, "/"+runspec.NATSCAKey):
			caRead = caRead || !a.failed && strings.Contains(a.text, "BEGIN CERTIFICATE")
		default:
			t.Errorf("the CLI found %s (refused: %v, %.100q): only the CA may be mounted", a.path, a.failed, a.text)
		}
	}
	for _, what := range []string{"the supervisor's environ", "PID 1's environ", "the supervisor's mem", "the supervisor's fd/1", "the mount directory"} {
		if tried[what] == 0 {
			t.Errorf("%s was never tried (attempts %d)", what, len(attempts))
		}
	}
	if !caRead {
		t.Errorf("the CLI never read the public CA at %s: the walk did not reach the mounts", runspec.NATSMountDir)
	}
}

// podLogs returns the init and agent container logs of ns's pods.
func podLogs(t *testing.T, ns string) map[string][]byte {
	t.Helper()
	pods, err := suite.Env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, p := range pods.Items {
		for _, c := range []string{"init", agentsv1alpha1.AgentContainerName} {
			raw, err := suite.Env.Kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c}).DoRaw(context.Background())
			if err != nil {
				t.Fatalf("log of %s/%s: %v", p.Name, c, err)
			}
			out[p.Name+"/"+c] = raw
		}
	}
	if len(out) == 0 {
		t.Fatal("no pod logs to search")
	}
	return out
}

func randomValue(t *testing.T, what string) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return what + "-secret-" + hex.EncodeToString(b)
}
