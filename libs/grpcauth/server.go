package grpcauth

import (
	"context"
	"slices"
	"strings"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Guard admits a call when its token is accepted and its caller is
// allowed; the methods Open names need neither.
type Guard struct {
	// Authn reviews the call's token.
	Authn *Authenticator
	// Authorize refuses an authenticated caller (PermissionDenied);
	// AllowUsers builds the usual one.
	Authorize func(ctx context.Context, u User) error
	// Open reports the full method names every caller may reach without
	// a token (HealthAndReflection); nil guards every method.
	Open func(fullMethod string) bool
}

// userKey is the context key of the admitted caller.
type userKey struct{}

// UserFrom returns the caller a Guard admitted on ctx.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}

// admit authenticates and authorises the call on ctx.
func (g Guard) admit(ctx context.Context) (context.Context, error) {
	u, err := g.Authn.Authenticate(ctx)
	if err != nil {
		return nil, err
	}
	if g.Authorize != nil {
		if err := g.Authorize(ctx, u); err != nil {
			return nil, err
		}
	}
	return context.WithValue(ctx, userKey{}, u), nil
}

func (g Guard) guarded() selector.Matcher {
	return selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
		return g.Open == nil || !g.Open(c.FullMethod())
	})
}

// UnaryServerInterceptor checks every unary call but the open ones.
func (g Guard) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(g.admit), g.guarded())
}

// StreamServerInterceptor checks every stream but the open ones, so a
// streaming method added later is guarded too.
func (g Guard) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return selector.StreamServerInterceptor(auth.StreamServerInterceptor(g.admit), g.guarded())
}

// ServerOptions are both interceptors as options of grpc.NewServer; they
// run after the options given before them (metrics, logging, recovery).
func (g Guard) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(g.StreamServerInterceptor()),
	}
}

// AllowUsers admits exactly the given usernames (for a ServiceAccount,
// system:serviceaccount:<namespace>:<name>); any other caller is
// PermissionDenied.
func AllowUsers(names ...string) func(context.Context, User) error {
	allowed := slices.Clone(names)
	return func(_ context.Context, u User) error {
		if slices.Contains(allowed, u.Name) {
			return nil
		}
		return status.Errorf(codes.PermissionDenied, "%s may not call this service", u.Name)
	}
}

// openServices are the services probes and tools reach without a token:
// gRPC health (no data) and server reflection (the public schema).
var openServices = []string{"/grpc.health.v1.Health/", "/grpc.reflection.v1.ServerReflection/", "/grpc.reflection.v1alpha.ServerReflection/"}

// HealthAndReflection reports the methods of gRPC health and server
// reflection, for Guard.Open.
func HealthAndReflection(fullMethod string) bool {
	for _, p := range openServices {
		if strings.HasPrefix(fullMethod, p) {
			return true
		}
	}
	return false
}
