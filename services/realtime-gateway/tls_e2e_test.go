package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/servingcert/servingcerttest"
)

// runAgentctl runs the agentctl binary with args and returns its stdout,
// stderr and exit code.
func runAgentctl(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(agentctlBin, args...)
	cmd.Env = append(os.Environ(), "AGENTPLANE_TOKEN=", "AGENTPLANE_SERVICE_ACCOUNT=", "AGENTPLANE_GATEWAY=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	_ = cmd.Run()
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// TestTLSGatewayRefusesPlaintextAndFollowsItsCertificate: a gateway
// serving TLS from a Secret volume is out of reach of a plaintext client
// (the attack of reading tokens off the wire has nothing to read), is
// reached by agentctl --tls --ca-file trusting its private CA, and after
// the kubelet swaps the volume to a certificate of another CA presents
// that one, with no restart.
func TestTLSGatewayRefusesPlaintextAndFollowsItsCertificate(t *testing.T) {
	ns := env.Namespace(t)
	alice := caller(t, ns, "alice", "create")
	running(t, ns, "chat")
	first, second := servingcerttest.NewPair(t), servingcerttest.NewPair(t)
	vol := servingcerttest.NewVolume(t, first)
	g := startGatewayWith(t, 30*time.Second, "--tls-cert-file="+vol.CertFile(), "--tls-private-key-file="+vol.KeyFile())
	caFirst, caSecond := first.MustWriteCA(t), second.MustWriteCA(t)
	prompt := func(extra ...string) (string, string, int) {
		return runAgentctl(t, append([]string{"prompt", "-n", ns, "chat", "hello", "--gateway", g.addr, "--token", alice}, extra...)...)
	}

	t.Run("a plaintext gRPC client cannot call a TLS gateway", func(t *testing.T) {
		conn, err := grpc.NewClient(g.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		ctx, cancel := context.WithTimeout(bearer(alice), 10*time.Second)
		defer cancel()
		_, err = realtimev1.NewPromptServiceClient(conn).GetSession(ctx, &realtimev1.GetSessionRequest{Agent: &realtimev1.AgentRef{Namespace: ns, Name: "chat"}})
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("plaintext call: %v, want Unavailable", err)
		}
	})
	t.Run("agentctl in plaintext cannot either", func(t *testing.T) {
		if _, errOut, code := prompt(); code == 0 || !strings.Contains(errOut, "Unavailable") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
	t.Run("agentctl with --tls --ca-file of the gateway's CA prompts", func(t *testing.T) {
		if out, errOut, code := prompt("--tls", "--ca-file", caFirst); code != 0 || !strings.Contains(out, "turn_end") {
			t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
		}
	})
	t.Run("agentctl with --tls but another CA is refused by the handshake", func(t *testing.T) {
		if _, errOut, code := prompt("--tls", "--ca-file", caSecond); code == 0 || !strings.Contains(errOut, "certificate signed by unknown authority") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})

	t.Run("a rotated certificate is served without a restart", func(t *testing.T) {
		vol.Put(second)
		deadline := time.Now().Add(30 * time.Second)
		for {
			if c := servingcerttest.Presented(g.addr); c != nil && c.SerialNumber.Cmp(second.Leaf.SerialNumber) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the gateway still presents the first certificate 30s after the rotation")
			}
			time.Sleep(100 * time.Millisecond)
		}
		if out, errOut, code := prompt("--ca-file", caSecond); code != 0 || !strings.Contains(out, "turn_end") {
			t.Fatalf("with the new CA: exit %d\n%s\n%s", code, out, errOut)
		}
		if _, errOut, code := prompt("--ca-file", caFirst); code == 0 || !strings.Contains(errOut, "certificate signed by unknown authority") {
			t.Fatalf("with the replaced CA: exit %d: %s", code, errOut)
		}
	})
}
