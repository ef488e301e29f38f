package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
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
