package scenario

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// RealtimeRun is the demo's realtime run: a session people prompt through
// realtime-gateway (docs/realtime.md) until they close it.
const RealtimeRun = "chat-tides"

// RealtimeCaller is the ServiceAccount the demo prompts as: the gateway
// admits a ServiceAccount token issued for its audience, and the caller
// needs create on agents/prompt (docs/realtime-gateway.md, "Calling it").
const RealtimeCaller = "demo-user"

// realtimeStation is the Station, and its AgentDefinition, of RealtimeRun.
const realtimeStation = "chatter"

// RealtimeTurns are the prompts of the session, one `agentctl prompt` each.
var RealtimeTurns = []string{"What makes the tides?", "And why are there two a day?"}

// RealtimeRunning is the stage RealtimeRun reaches before it is prompted.
var RealtimeRunning = Stage{"Running, its session waiting for a prompt",
	func(a *agentsv1alpha1.Agent) bool {
		return a.Status.Phase == agentsv1alpha1.PhaseRunning || a.Status.Phase.IsTerminal()
	},
	func(a *agentsv1alpha1.Agent) string {
		return fmt.Sprintf("%s as Job %s", a.Status.Phase, a.Status.JobName)
	}}

// RealtimeEnded is the stage RealtimeRun reaches once its session is
// closed.
var RealtimeEnded = Stage{"finished once the session was closed",
	func(a *agentsv1alpha1.Agent) bool { return a.Status.Phase.IsTerminal() },
	func(a *agentsv1alpha1.Agent) string {
		return fmt.Sprintf("%s, status.sessionId %s", a.Status.Phase, a.Status.SessionID)
	}}

// ApplyRealtime creates the realtime recipe, the caller RealtimeCaller
// with the right to prompt the Agents of ns, and launches RealtimeRun.
func ApplyRealtime(ctx context.Context, c client.Client, ns string, out io.Writer) error {
	def := &agentsv1alpha1.AgentDefinition{ObjectMeta: metav1.ObjectMeta{Name: realtimeStation, Namespace: ns},
		Spec: agentsv1alpha1.AgentDefinitionSpec{Model: "claude-opus-5-5", Prompt: "You answer questions about the sea.",
			Execution: agentsv1alpha1.ExecutionRealtime}}
	st := &agentsv1alpha1.Station{ObjectMeta: metav1.ObjectMeta{Name: realtimeStation, Namespace: ns},
		Spec: agentsv1alpha1.StationSpec{AgentDefRef: realtimeStation, DeadlineMinutes: 10,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{agentContainer()}}}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: RealtimeCaller, Namespace: ns}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: RealtimeCaller + "-prompt", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{agentsv1alpha1.GroupVersion.Group}, Resources: []string{"agents/prompt"}, Verbs: []string{"create", "get"}}}}
	bind := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: RealtimeCaller, Namespace: ns}}}
	a := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: RealtimeRun, Namespace: ns},
		Spec: agentsv1alpha1.AgentSpec{StationRef: realtimeStation, TaskID: "demo-" + RealtimeRun}}
	for _, obj := range []client.Object{def, st, sa, role, bind, a} {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, obj.GetName(), err)
		}
	}
	fmt.Fprintf(out, "  applied agentdefinition/%s (execution: realtime), station/%s, serviceaccount/%s (may prompt: role/%s)\n",
		def.Name, st.Name, sa.Name, role.Name)
	fmt.Fprintf(out, "  created agent/%s in Station %s — a session to prompt through realtime-gateway\n", a.Name, st.Name)
	return nil
}

// Agentctl runs agentctl's gateway commands against one namespace, as
// RealtimeCaller: Bin is the binary, Global its flags before the command
// (--kubeconfig, -n), Gateway the gateway's address.
type Agentctl struct {
	Bin, Gateway string
	Global       []string
	// GatewayFlags follow the gateway's address, e.g. --insecure for
	// plaintext to a gateway's ClusterIP, which is not loopback.
	GatewayFlags []string
}

// command is agentctl with args, its gateway flags after them.
func (ac Agentctl) command(ctx context.Context, args ...string) *exec.Cmd {
	all := append(append(append([]string{}, ac.Global...), args...), "--gateway", ac.Gateway, "--service-account", RealtimeCaller)
	all = append(all, ac.GatewayFlags...)
	return exec.CommandContext(ctx, ac.Bin, all...)
}

// Converse prompts RealtimeRun with each of RealtimeTurns through
// `agentctl prompt`, printing each command and its output on out, then
// closes the session with `agentctl chat` and no more lines. It returns the
// session id of each turn. A turn sent before the run's session serves is
// refused as Unavailable and sent again, for up to ready.
func Converse(ctx context.Context, ac Agentctl, ready time.Duration, out io.Writer) ([]string, error) {
	var sessions []string
	for i, text := range RealtimeTurns {
		fmt.Fprintf(out, "  $ agentctl prompt %s %q\n", RealtimeRun, text)
		deadline := time.Now().Add(ready)
		var outText string
		for {
			b, err := ac.command(ctx, "prompt", RealtimeRun, text).CombinedOutput()
			outText = string(b)
			if err == nil {
				break
			}
			if !strings.Contains(outText, "Unavailable") || time.Now().After(deadline) || ctx.Err() != nil {
				return sessions, fmt.Errorf("turn %d: agentctl prompt: %w\n%s", i+1, err, outText)
			}
			time.Sleep(time.Second)
		}
		indent(out, outText)
		id := sessionOf(outText)
		if id == "" {
			return sessions, fmt.Errorf("turn %d: agentctl prompt printed no session id:\n%s", i+1, outText)
		}
		sessions = append(sessions, id)
	}
	fmt.Fprintf(out, "  $ agentctl chat %s < /dev/null   # no more lines: close the session\n", RealtimeRun)
	cmd := ac.command(ctx, "chat", RealtimeRun)
	cmd.Stdin = bytes.NewReader(nil)
	b, err := cmd.CombinedOutput()
	indent(out, string(b))
	if err != nil {
		return sessions, fmt.Errorf("close: agentctl chat: %w", err)
	}
	return sessions, nil
}

// sessionOf is the session id of the turn_end line agentctl prints.
func sessionOf(output string) string {
	for _, line := range strings.Split(output, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "turn_end" && f[1] == "session" {
			return f[2]
		}
	}
	return ""
}

func indent(out io.Writer, text string) {
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(out, "    %s\n", line)
	}
}

// CheckRealtime compares the finished RealtimeRun with the promise: every
// turn in one session, kept across them, and the run Succeeded with that
// session's id.
func CheckRealtime(a *agentsv1alpha1.Agent, sessions []string) string {
	if len(sessions) != len(RealtimeTurns) {
		return fmt.Sprintf("%d turns answered, promised %d", len(sessions), len(RealtimeTurns))
	}
	for _, s := range sessions[1:] {
		if s != sessions[0] {
			return fmt.Sprintf("the turns ran in sessions %v, promised one session kept", sessions)
		}
	}
	if a.Status.Phase != agentsv1alpha1.PhaseSucceeded || a.Status.SessionID != sessions[0] {
		return fmt.Sprintf("%s: phase %s sessionId %q (reason %q), promised Succeeded with %q", a.Name, a.Status.Phase, a.Status.SessionID, a.Status.FailureReason, sessions[0])
	}
	return ""
}
