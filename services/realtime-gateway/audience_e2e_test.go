package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/config"
)

// TestOnlyTokensForTheGatewaysAudienceGetIn is the attack of a caller
// handing the gateway a token good for the whole API (or meant for
// another service), checked by the real apiserver's TokenReview: by
// default the gateway takes only tokens requested for its audience, and
// its refusal names the audience to ask for. --token-audiences lists
// others, and an explicit empty value goes back to plain API tokens.
func TestOnlyTokensForTheGatewaysAudienceGetIn(t *testing.T) {
	ns := env.Namespace(t)
	bound := caller(t, ns, "alice", "create", "get")
	ctx := context.Background()
	plain, err := saToken(ctx, ns, "alice")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := saToken(ctx, ns, "alice", "agentplane-batch-poller")
	if err != nil {
		t.Fatal(err)
	}
	other, err := saToken(ctx, ns, "alice", "other-gateway")
	if err != nil {
		t.Fatal(err)
	}
	running(t, ns, "chat")
	ref := &realtimev1.AgentRef{Namespace: ns, Name: "chat"}
	byDefault := startGateway(t, 30*time.Second)
	listed := startGatewayWith(t, 30*time.Second, "--token-audiences="+config.DefaultTokenAudience+",other-gateway")
	open := startGatewayWith(t, 30*time.Second, "--token-audiences=")
	const named = `a token issued for audience "` + config.DefaultTokenAudience + `" is expected`

	for _, tc := range []struct {
		name  string
		g     *liveGateway
		token string
		code  codes.Code
		msg   string
	}{
		{"a plain API token of an allowed caller is refused, naming the audience", byDefault, plain, codes.Unauthenticated, named},
		{"a token for another service's audience is refused", byDefault, batch, codes.Unauthenticated, named},
		{"a token requested for the gateway's audience is accepted", byDefault, bound, codes.OK, ""},
		{"a token for any listed audience is accepted", listed, other, codes.OK, ""},
		{"a plain API token is refused by a gateway with a list of audiences", listed, plain, codes.Unauthenticated, "other-gateway"},
		{"an empty audience list accepts a plain API token", open, plain, codes.OK, ""},
		{"an empty audience list refuses a token for the gateway's audience", open, bound, codes.Unauthenticated, "not accepted by Kubernetes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := getSession(tc.g, ref)(bearer(tc.token))
			if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
}
