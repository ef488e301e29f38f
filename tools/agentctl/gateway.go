package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentplane/agentplane/libs/grpcauth"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
)

// defaultAudience is the audience realtime-gateway requires of a caller's
// token unless its --token-audiences says otherwise.
const defaultAudience = "agentplane-realtime-gateway"

// tokenLifetime is how long a requested token lives: the apiserver's
// minimum, renewed by grpcauth.RequestedToken before it runs out, so a
// token that leaks is worth little for long.
const tokenLifetime = 10 * time.Minute

// gatewayFlags reach the realtime-gateway.
type gatewayFlags struct {
	addr, token, serviceAccount, audience string
	tls, insecure                         bool
	caFile, serverName                    string
}

// session is a connection to the gateway as one caller, for one Agent.
type session struct {
	client realtimev1.PromptServiceClient
	conn   *grpc.ClientConn
	ref    *realtimev1.AgentRef
}

// dialGateway checks the transport first (so a refusal comes before any
// token is asked for or sent), then finds the caller's token and the
// namespace, and builds the connection; grpc connects on the first call.
func (g *globals) dialGateway(ctx context.Context, f *gatewayFlags, agent string) (*session, error) {
	if f.addr == "" {
		return nil, errors.New("no gateway address: pass --gateway or set AGENTPLANE_GATEWAY")
	}
	transport, err := f.transport()
	if err != nil {
		return nil, err
	}
	ns, creds, err := g.caller(ctx, f)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(transport), grpc.WithPerRPCCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("gateway %s: %w", f.addr, err)
	}
	return &session{client: realtimev1.NewPromptServiceClient(conn), conn: conn, ref: &realtimev1.AgentRef{Namespace: ns, Name: agent}}, nil
}

// transport is TLS when asked for (--tls, --ca-file), else plaintext, which
// is refused for an address that is not loopback unless --insecure says
// so: the bearer token would cross the network in the clear.
func (f *gatewayFlags) transport() (credentials.TransportCredentials, error) {
	useTLS := f.tls || f.caFile != "" || f.serverName != ""
	if useTLS && f.insecure {
		return nil, errors.New("--insecure turns TLS off; it does not go with --tls, --ca-file or --tls-server-name")
	}
	if !useTLS {
		if !f.insecure && !isLoopback(f.addr) {
			return nil, fmt.Errorf("refusing plaintext gRPC to %s, which is not a loopback address: the bearer token would cross the network unencrypted. "+
				"Pass --tls (with --ca-file for a private CA), or --insecure to send it in plaintext anyway", f.addr)
		}
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.serverName}
	if f.caFile != "" {
		raw, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(raw) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", f.caFile)
		}
		cfg.RootCAs = pool
	}
	return credentials.NewTLS(cfg), nil
}

// isLoopback reports whether the gRPC target addr names this machine
// without a doubt: localhost, 127.0.0.0/8 or ::1, bare or after the dns
// or passthrough scheme, or a unix socket. Any other name counts as
// remote; it is never resolved, so nothing is sent before the refusal.
func isLoopback(addr string) bool {
	if strings.HasPrefix(addr, "unix:") || strings.HasPrefix(addr, "unix-abstract:") {
		return true
	}
	host := addr
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "dns" && u.Scheme != "passthrough") {
			return false
		}
		host = strings.TrimPrefix(u.Path, "/")
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// caller resolves the namespace and who calls: --token as given, or a
// token requested for --service-account with the kubeconfig (create on
// serviceaccounts/token). The first token is requested now, so a caller
// without that permission hears it before any prompt is sent.
func (g *globals) caller(ctx context.Context, f *gatewayFlags) (string, credentials.PerRPCCredentials, error) {
	switch {
	case f.token != "" && f.serviceAccount != "":
		return "", nil, errors.New("--token ($AGENTPLANE_TOKEN) and --service-account ($AGENTPLANE_SERVICE_ACCOUNT) both say who calls: give one")
	case f.token == "" && f.serviceAccount == "":
		return "", nil, fmt.Errorf("no caller: pass --service-account [NAMESPACE/]NAME (a token for audience %q is requested for it with your kubeconfig) "+
			"or --token TOKEN ($AGENTPLANE_SERVICE_ACCOUNT, $AGENTPLANE_TOKEN)", f.audience)
	}
	ns := g.namespace
	var cc clientcmd.ClientConfig
	if ns == "" || f.serviceAccount != "" {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if g.kubeconfig != "" {
			rules.ExplicitPath = g.kubeconfig
		}
		cc = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: g.context})
		if ns == "" {
			if ns, _, _ = cc.Namespace(); ns == "" {
				ns = "default"
			}
		}
	}
	if f.token != "" {
		return ns, staticToken(f.token), nil
	}
	saNS, saName := ns, f.serviceAccount
	if strings.Contains(f.serviceAccount, "/") {
		var err error
		if saNS, saName, err = grpcauth.ParseServiceAccount(f.serviceAccount); err != nil {
			return "", nil, fmt.Errorf("--service-account: %w", err)
		}
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return "", nil, fmt.Errorf("--service-account needs a kubeconfig to request its token: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", nil, fmt.Errorf("clientset: %w", err)
	}
	rt := grpcauth.NewRequestedToken(kube, saNS, saName, f.audience, tokenLifetime)
	if _, err := rt.Token(ctx); err != nil {
		return "", nil, fmt.Errorf("%s (your kubeconfig needs verb create on serviceaccounts/token for %s/%s)", status.Convert(err).Message(), saNS, saName)
	}
	return ns, rt, nil
}

// staticToken sends a --token as it is.
type staticToken string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (s staticToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{grpcauth.MetadataKey: "Bearer " + string(s)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials:
// transport enforces the policy on plaintext itself, with its loopback
// exception.
func (staticToken) RequireTransportSecurity() bool { return false }

func (s *session) close() { _ = s.conn.Close() }
