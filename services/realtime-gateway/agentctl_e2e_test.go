package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestAgentctlChatThroughTheGateway: `agentctl prompt` and `agentctl chat`
// (the real binary) talk to a real gateway in front of a real supervisor:
// each turn streams readable lines, the end of stdin closes the session,
// and the run pod then exits 0.
func TestAgentctlChatThroughTheGateway(t *testing.T) {
	ns := env.Namespace(t)
	alice := caller(t, ns, "alice", "create")
	r := running(t, ns, "chat")
	g := startGateway(t, 30*time.Second)
	agentctl := func(stdin string, args ...string) (string, string, int) {
		cmd := exec.Command(agentctlBin, args...)
		cmd.Env = append(os.Environ(), "AGENTPLANE_GATEWAY="+g.addr, "AGENTPLANE_TOKEN="+alice)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		_ = cmd.Run()
		return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
	}

	out, errOut, code := agentctl("", "prompt", "-n", ns, "chat", "a single question")
	if code != 0 || !strings.Contains(out, "message") || !strings.Contains(out, "turn_end") {
		t.Fatalf("prompt: exit %d\n%s\n%s", code, out, errOut)
	}
	_, errOut, code = agentctl("", "prompt", "-n", ns, "nobody", "hi")
	if code == 0 || !strings.Contains(errOut, "NotFound: Agent "+ns+"/nobody not found") {
		t.Fatalf("prompt to a missing Agent: exit %d\n%s", code, errOut)
	}

	out, errOut, code = agentctl("second question\nthird question\n", "chat", "-n", ns, "chat")
	if code != 0 || strings.Count(out, "turn_end") != 2 || !strings.Contains(out, "closed after 3 turns") {
		t.Fatalf("chat: exit %d\n%s\n%s", code, out, errOut)
	}
	select {
	case <-r.exited:
		if c := r.sup.ProcessState.ExitCode(); c != 0 {
			t.Fatalf("supervisor exit %d after the chat closed, want 0", c)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("supervisor still running after the chat closed the session")
	}
}

// TestAgentctlPromptsAsAServiceAccount: a person whose kubeconfig may
// create tokens of a ServiceAccount (the RoleBinding docs/realtime-gateway.md
// shows) prompts as it with --service-account; agentctl requests a token
// for the gateway's audience. Handing the gateway the kubeconfig's own API
// token instead is refused, naming the audience; a kubeconfig without the
// permission hears which one it lacks.
func TestAgentctlPromptsAsAServiceAccount(t *testing.T) {
	ns := env.Namespace(t)
	caller(t, ns, "alice", "create")
	caller(t, ns, "dave")
	running(t, ns, "chat")
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "prompt-as-alice"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"alice"}, Verbs: []string{"create"},
	}}}
	if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caller(t, ns, "carol")
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prompt-as-alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "carol", Namespace: ns}}}
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfigOf := func(name string) (path, token string) {
		t.Helper()
		tok, err := saToken(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		kc := clientcmdapi.NewConfig()
		kc.Clusters["c"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok}
		kc.Contexts[name] = &clientcmdapi.Context{Cluster: "c", AuthInfo: name, Namespace: ns}
		kc.CurrentContext = name
		path = filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*kc, path); err != nil {
			t.Fatal(err)
		}
		return path, tok
	}
	carolKC, carolTok := kubeconfigOf("carol")
	daveKC, _ := kubeconfigOf("dave")
	g := startGateway(t, 30*time.Second)

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a kubeconfig allowed to create alice's tokens prompts as alice", []string{"--kubeconfig", carolKC, "--service-account", "alice"}, 0, "turn_end"},
		{"the kubeconfig's own API token is refused, naming the audience", []string{"--kubeconfig", carolKC, "--token", carolTok}, 1,
			`Unauthenticated: the bearer token was not accepted by Kubernetes: a token issued for audience "agentplane-realtime-gateway" is expected`},
		{"a kubeconfig without create on serviceaccounts/token is told so", []string{"--kubeconfig", daveKC, "--service-account", "alice"}, 1,
			"needs verb create on serviceaccounts/token for " + ns + "/alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runAgentctl(t, append([]string{"prompt", "chat", "hello", "--gateway", g.addr}, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Fatalf("exit %d, want %d containing %q\n%s\n%s", code, tc.code, tc.want, out, errOut)
			}
		})
	}
}
