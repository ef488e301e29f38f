package grpcauth

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// staticToken is per-RPC credentials with a fixed token.
type staticToken string

func (s staticToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return bearer(string(s)), nil
}
func (staticToken) RequireTransportSecurity() bool { return false }

// TestGuardAdmitsOnlyAllowedCallersAndLeavesHealthOpen serves the health
// service behind a Guard whose Open leaves only Watch open, so both a
// guarded and an open method are reached over a real connection.
func TestGuardAdmitsOnlyAllowedCallersAndLeavesHealthOpen(t *testing.T) {
	r := newReviewer()
	g := Guard{
		Authn:     NewAuthenticator(r.kube, Options{Audiences: []string{"batch"}}),
		Authorize: AllowUsers(ServiceAccountUsername("ns", "good")),
		Open:      func(m string) bool { return m == "/grpc.health.v1.Health/List" },
	}
	srv := grpc.NewServer(g.ServerOptions()...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	dial := func(t *testing.T, token string) healthpb.HealthClient {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(staticToken(token)))
		}
		conn, err := grpc.NewClient(lis.Addr().String(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return healthpb.NewHealthClient(conn)
	}
	cases := []struct {
		name  string
		token string
		code  codes.Code
	}{
		{"no token is unauthenticated", "", codes.Unauthenticated},
		{"a token without the audience is unauthenticated", "plain", codes.Unauthenticated},
		{"a forged token is unauthenticated", "forged", codes.Unauthenticated},
		{"the allowed ServiceAccount is served", "good", codes.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, tc.token)
			if _, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{}); status.Code(err) != tc.code {
				t.Errorf("Check = %v, want %v", err, tc.code)
			}
			if _, err := c.List(t.Context(), &healthpb.HealthListRequest{}); err != nil {
				t.Errorf("the open method refused: %v", err)
			}
		})
	}
	t.Run("another authenticated identity is permission denied", func(t *testing.T) {
		other := Guard{Authn: g.Authn, Authorize: AllowUsers("system:serviceaccount:ns:someone-else")}
		_, err := other.admit(withAuthorization("Bearer good"))
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("err = %v, want PermissionDenied", err)
		}
	})
	t.Run("a guarded stream is refused without a token", func(t *testing.T) {
		st, err := dial(t, "").Watch(t.Context(), &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("Watch = %v, want Unauthenticated", err)
		}
	})
}

func TestHealthAndReflectionAreTheOpenMethods(t *testing.T) {
	cases := []struct {
		name   string
		method string
		open   bool
	}{
		{"health checks are open", "/grpc.health.v1.Health/Check", true},
		{"health watches are open", "/grpc.health.v1.Health/Watch", true},
		{"reflection is open", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", true},
		{"the older reflection is open", "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", true},
		{"an application method is guarded", "/agentplane.batch.v1.BatchService/Submit", false},
		{"a look-alike prefix is guarded", "/grpc.health.v1.HealthX/Check", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := HealthAndReflection(tc.method); got != tc.open {
				t.Errorf("HealthAndReflection(%s) = %v", tc.method, got)
			}
		})
	}
}
