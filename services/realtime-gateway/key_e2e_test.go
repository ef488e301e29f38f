package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentplane/agentplane/libs/realtime"
)

// TestKeyRotationTakesEffectWithoutRestart: the gateway follows the key
// Secret, so the token it derives changes with it. A key the run pods'
// tokens were not made with is refused by the supervisor, which the caller
// sees as the platform's fault (Internal), not theirs; the key put back
// works again, with no restart in between.
func TestKeyRotationTakesEffectWithoutRestart(t *testing.T) {
	ns := env.Namespace(t)
	alice := caller(t, ns, "alice", "create")
	running(t, ns, "chat")
	g := startGateway(t, 30*time.Second)
	if _, err := g.prompt(alice, ns, "chat", "with the right key"); err != nil {
		t.Fatal(err)
	}
	setKey := func(k []byte) {
		t.Helper()
		ctx := context.Background()
		s, err := env.Kube.CoreV1().Secrets(gwNamespace).Get(ctx, realtime.KeySecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data[realtime.KeySecretKey] = k
		if _, err := env.Kube.CoreV1().Secrets(gwNamespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { setKey(testKey) })

	waitFor := func(want codes.Code, text string) error {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := g.prompt(alice, ns, "chat", text)
			if status.Code(err) == want {
				return err
			}
			if time.Now().After(deadline) {
				t.Fatalf("still %v after the key change, want %v", err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	setKey(bytes.Repeat([]byte("r"), realtime.MinKeyBytes))
	err := waitFor(codes.Internal, "with a rotated key")
	if !strings.Contains(status.Convert(err).Message(), "refused the gateway's run token") {
		t.Fatalf("got %v", err)
	}
	setKey(testKey)
	_ = waitFor(codes.OK, "with the key back")
}
