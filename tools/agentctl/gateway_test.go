package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/agentplane/agentplane/libs/testcerts"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
)

// writeKubeconfig writes a kubeconfig for the test apiserver, as an admin
// (token "") or as the holder of token, with namespace as the context's.
func writeKubeconfig(t *testing.T, token, namespace string) string {
	t.Helper()
	raw, err := env.KubeconfigFor("agentctl")
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	ctx.Namespace = namespace
	if token != "" {
		kc.AuthInfos[ctx.AuthInfo] = &clientcmdapi.AuthInfo{Token: token}
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// serviceAccount creates ServiceAccount ns/name.
func serviceAccount(t *testing.T, ns, name string) {
	t.Helper()
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// reviewedAs is who the apiserver says token belongs to when asked for
// audiences (none: its own), "" when it refuses the token.
func reviewedAs(t *testing.T, token string, audiences ...string) string {
	t.Helper()
	tr, err := env.Kube.AuthenticationV1().TokenReviews().Create(context.Background(),
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: audiences}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Status.Authenticated {
		return ""
	}
	return tr.Status.User.Username
}

// lifetime reads a JWT's exp minus iat, in seconds.
func lifetime(t *testing.T, token string) int64 {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct{ Exp, Iat int64 }
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	return claims.Exp - claims.Iat
}

// TestServiceAccountCallersSendAShortLivedTokenForTheGateway: with
// --service-account, the token that reaches the gateway is one the
// apiserver accepts only for the gateway's audience (or --audience), of
// that ServiceAccount, living ten minutes: never the kubeconfig's own.
func TestServiceAccountCallersSendAShortLivedTokenForTheGateway(t *testing.T) {
	ns := env.Namespace(t)
	serviceAccount(t, ns, "alice")
	kc := writeKubeconfig(t, "", ns)
	for _, tc := range []struct {
		name     string
		args     []string
		ref, aud string
	}{
		{"a bare name is a ServiceAccount of the namespace in use, the token for the gateway's audience",
			[]string{"--service-account", "alice"}, ns + "/chat-1", defaultAudience},
		{"namespace/name names the ServiceAccount wherever the Agent is",
			[]string{"--service-account", ns + "/alice", "-n", "elsewhere"}, "elsewhere/chat-1", defaultAudience},
		{"--audience changes the audience asked for",
			[]string{"--service-account", "alice", "--audience", "another-gateway"}, ns + "/chat-1", "another-gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, addr := startFakeGateway(t)
			t.Setenv("AGENTPLANE_TOKEN", "")
			args := append([]string{"prompt", "chat-1", "hi", "--kubeconfig", kc, "--gateway", addr}, tc.args...)
			if out, errOut, code := agentctlIn(t, "", args...); code != 0 {
				t.Fatalf("exit %d: %s %s", code, out, errOut)
			}
			if f.refs[0] != tc.ref {
				t.Fatalf("prompted %q, want %q", f.refs[0], tc.ref)
			}
			token, ok := strings.CutPrefix(f.auth[0], "Bearer ")
			if !ok {
				t.Fatalf("authorization %q", f.auth[0])
			}
			if who := reviewedAs(t, token, tc.aud); who != "system:serviceaccount:"+ns+":alice" {
				t.Fatalf("for audience %q the token is %q's", tc.aud, who)
			}
			if who := reviewedAs(t, token); who != "" {
				t.Fatalf("the token is a plain API token of %q", who)
			}
			if got := lifetime(t, token); got != int64(tokenLifetime.Seconds()) {
				t.Fatalf("the token lives %ds, want %v", got, tokenLifetime)
			}
		})
	}
}

// TestCallerErrorsAreClear: who calls must be said, once, and a kubeconfig
// that may not request the ServiceAccount's token hears which permission
// it lacks before anything reaches the gateway.
func TestCallerErrorsAreClear(t *testing.T) {
	ns := env.Namespace(t)
	serviceAccount(t, ns, "alice")
	serviceAccount(t, ns, "bob")
	bob, err := env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "bob", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, unprivileged := writeKubeconfig(t, "", ns), writeKubeconfig(t, bob.Status.Token, ns)
	t.Setenv("AGENTPLANE_TOKEN", "")
	t.Setenv("AGENTPLANE_SERVICE_ACCOUNT", "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no caller is refused, naming both ways", []string{"--kubeconfig", admin}, "no caller: pass --service-account"},
		{"a token and a ServiceAccount are refused together", []string{"--kubeconfig", admin, "--token", "t", "--service-account", "alice"}, "both say who calls"},
		{"a malformed ServiceAccount is refused", []string{"--kubeconfig", admin, "--service-account", "a/b/c"}, "--service-account"},
		{"a kubeconfig without create on serviceaccounts/token is told so", []string{"--kubeconfig", unprivileged, "--service-account", "alice"},
			"needs verb create on serviceaccounts/token for " + ns + "/alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, addr := startFakeGateway(t)
			_, errOut, code := agentctlIn(t, "", append([]string{"prompt", "chat-1", "hi", "--gateway", addr}, tc.args...)...)
			if code == 0 || !strings.Contains(errOut, tc.want) || len(f.prompts) != 0 {
				t.Fatalf("exit %d, %q, %d prompts; want a refusal containing %q before any prompt", code, errOut, len(f.prompts), tc.want)
			}
		})
	}
}

// TestPlaintextIsRefusedOffLoopback is the attack of sending a bearer
// token in the clear across the network: agentctl refuses plaintext to an
// address that is not loopback before dialing or requesting a token,
// naming --insecure; --insecure builds the connection, and loopback (the
// local stack, a port-forward) stays allowed.
func TestPlaintextIsRefusedOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		name, addr string
		tls, ins   bool
		refused    string
	}{
		{"plaintext to a private address is refused", "10.0.0.1:9443", false, false, "--insecure"},
		{"plaintext to a host name is refused", "gateway.example.com:9443", false, false, "not a loopback address"},
		{"plaintext to a dns target is refused", "dns:///gateway.example.com:9443", false, false, "--tls"},
		{"a name that merely starts like localhost is refused", "localhost.example.com:9443", false, false, "--insecure"},
		{"--insecure allows plaintext to a private address", "10.0.0.1:9443", false, true, ""},
		{"TLS to a private address is allowed", "10.0.0.1:9443", true, false, ""},
		{"--insecure with --tls is refused", "10.0.0.1:9443", true, true, "does not go with --tls"},
		{"plaintext to 127.0.0.1 is allowed", "127.0.0.1:9443", false, false, ""},
		{"plaintext to elsewhere in 127.0.0.0/8 is allowed", "127.1.2.3:9443", false, false, ""},
		{"plaintext to localhost is allowed", "localhost:9443", false, false, ""},
		{"plaintext to ::1 is allowed", "[::1]:9443", false, false, ""},
		{"plaintext to a passthrough loopback target is allowed", "passthrough:///127.0.0.1:9443", false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &globals{namespace: "team-a"}
			s, err := g.dialGateway(context.Background(), &gatewayFlags{addr: tc.addr, token: "tok", audience: defaultAudience, tls: tc.tls, insecure: tc.ins}, "chat-1")
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) || s != nil {
					t.Fatalf("dialGateway = %v, %v; want a refusal containing %q", s, err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("dialGateway: %v", err)
			}
			defer s.close()
			// Built, not dialed: grpc connects on the first call.
			if st := s.conn.GetState(); st != connectivity.Idle {
				t.Fatalf("connection %v before any call", st)
			}
		})
	}

	// Through the command, with a ServiceAccount whose kubeconfig does not
	// even exist: the refusal comes first, so no token is requested.
	_, errOut, code := agentctlIn(t, "", "prompt", "chat-1", "hi", "--gateway", "10.0.0.1:9443", "-n", "team-a",
		"--service-account", "alice", "--kubeconfig", filepath.Join(t.TempDir(), "none"))
	if code != exitError || !strings.Contains(errOut, "refusing plaintext gRPC to 10.0.0.1:9443") || !strings.Contains(errOut, "--insecure") {
		t.Fatalf("exit %d, %q", code, errOut)
	}
}

// startFakeTLSGateway is startFakeGateway serving TLS with a certificate
// for 127.0.0.1 and localhost from a CA of its own, whose PEM file it
// returns.
func startFakeTLSGateway(t *testing.T) (f *fakeGateway, addr, caFile string) {
	t.Helper()
	pair := testcerts.Must(t)
	caFile = pair.MustWriteCA(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f = &fakeGateway{}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair.TLS}, MinVersion: tls.VersionTLS12})))
	realtimev1.RegisterPromptServiceServer(srv, f)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return f, l.Addr().String(), caFile
}

// TestTLSTrustsWhatItIsTold: --ca-file trusts a private CA (cert-manager's,
// say); without it the system roots do not know the gateway's certificate;
// plaintext to a TLS gateway fails; a CA file without a certificate is
// refused before dialing.
func TestTLSTrustsWhatItIsTold(t *testing.T) {
	f, addr, caFile := startFakeTLSGateway(t)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"--tls with --ca-file reaches the gateway", []string{"--tls", "--ca-file", caFile}, ""},
		{"--ca-file alone implies TLS", []string{"--ca-file", caFile}, ""},
		{"--tls-server-name checks the certificate for that name", []string{"--ca-file", caFile, "--tls-server-name", "localhost"}, ""},
		{"a name the certificate lacks is refused", []string{"--ca-file", caFile, "--tls-server-name", "gateway.example.com"}, "Unavailable"},
		{"the system roots do not trust a private CA", []string{"--tls"}, "certificate signed by unknown authority"},
		{"plaintext to a TLS gateway fails", nil, "Unavailable"},
		{"a CA file without a certificate is refused", []string{"--ca-file", garbage}, "holds no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.prompts)
			_, errOut, code := agentctlIn(t, "", append([]string{"prompt", "chat-1", "hi", "--gateway", addr, "--token", "tok", "-n", "team-a"}, tc.args...)...)
			if tc.want == "" {
				if code != 0 || len(f.prompts) != before+1 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				return
			}
			if code == 0 || !strings.Contains(errOut, tc.want) || len(f.prompts) != before {
				t.Fatalf("exit %d, %q; want a failure containing %q", code, errOut, tc.want)
			}
		})
	}
}
