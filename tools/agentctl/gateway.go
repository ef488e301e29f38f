package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"k8s.io/client-go/tools/clientcmd"

	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
)

// gatewayFlags reach the realtime-gateway.
type gatewayFlags struct {
	addr, token string
	tls         bool
}

// session is a connection to the gateway as one caller, for one Agent.
type session struct {
	client realtimev1.PromptServiceClient
	conn   *grpc.ClientConn
	ref    *realtimev1.AgentRef
	token  string
}

// dialGateway resolves the namespace and the caller's token the way the
// other commands resolve their kubeconfig, and connects to the gateway.
// The kubeconfig is only needed for what the flags do not give.
func (g *globals) dialGateway(f *gatewayFlags, agent string) (*session, error) {
	if f.addr == "" {
		return nil, errors.New("no gateway address: pass --gateway or set AGENTPLANE_GATEWAY")
	}
	ns, token := g.namespace, f.token
	if ns == "" || token == "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if g.kubeconfig != "" {
			rules.ExplicitPath = g.kubeconfig
		}
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: g.context})
		if ns == "" {
			if ns, _, _ = cc.Namespace(); ns == "" {
				ns = "default"
			}
		}
		if token == "" {
			cfg, err := cc.ClientConfig()
			if err != nil {
				return nil, fmt.Errorf("no --token and no kubeconfig to take one from: %w", err)
			}
			token = cfg.BearerToken
			if token == "" && cfg.BearerTokenFile != "" {
				raw, err := os.ReadFile(cfg.BearerTokenFile)
				if err != nil {
					return nil, fmt.Errorf("kubeconfig token file: %w", err)
				}
				token = strings.TrimSpace(string(raw))
			}
			if token == "" {
				return nil, errors.New("the kubeconfig in use has no bearer token: pass --token or set AGENTPLANE_TOKEN")
			}
		}
	}
	creds := insecure.NewCredentials()
	if f.tls {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", f.addr, err)
	}
	return &session{client: realtimev1.NewPromptServiceClient(conn), conn: conn, ref: &realtimev1.AgentRef{Namespace: ns, Name: agent}, token: token}, nil
}

// ctx carries the caller's token to the gateway.
func (s *session) ctx(parent context.Context) context.Context {
	return metadata.AppendToOutgoingContext(parent, "authorization", "Bearer "+s.token)
}

func (s *session) close() { _ = s.conn.Close() }
