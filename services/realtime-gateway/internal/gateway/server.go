// Package gateway implements realtime.v1.PromptService: each call is
// authenticated, validated, authorised, routed to the Agent's run pod and
// forwarded to its supervisor.v1.SessionService with the run's token.
package gateway

import (
	"context"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/realtime"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/auth"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/metrics"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/route"
	"github.com/agentplane/agentplane/services/realtime-gateway/internal/validate"
)

// Deps are what the Server is built from.
type Deps struct {
	Authn   *auth.Authenticator
	Authz   *auth.Authorizer
	Router  *route.Router
	Pods    Pods
	Key     func() []byte
	Session SessionRecorder
	Metrics *metrics.Metrics
	Log     *slog.Logger
}

// Pods hands out connected clients of run pods' session servers.
type Pods interface {
	Get(ctx context.Context, addr string) (supervisorv1.SessionServiceClient, func(), error)
}

// SessionRecorder writes a session id revealed by a turn into the Agent's
// status.
type SessionRecorder interface {
	Record(ctx context.Context, a *agentsv1alpha1.Agent, id string) (bool, error)
}

// Server serves PromptService.
type Server struct {
	realtimev1.UnimplementedPromptServiceServer
	d Deps
	// draining is cancelled by Drain; open streams end with it.
	draining context.Context
	// Drain ends every stream still open with Unavailable "gateway
	// shutting down"; the app calls it once the shutdown grace ran out.
	Drain context.CancelFunc
}

// New returns a Server over d.
func New(d Deps) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{d: d, draining: ctx, Drain: cancel}
}

// errShuttingDown is what a stream ended by Drain gets.
var errShuttingDown = status.Error(codes.Unavailable, "gateway shutting down")

// call is one admitted call: who, which Agent, and its session server.
type call struct {
	user   auth.User
	target *route.Target
	client supervisorv1.SessionServiceClient
	token  string
	done   func()
}

// admit runs the checks every call goes through, in an order that tells
// an unauthenticated or unauthorised caller nothing about the Agent:
// authenticate, validate, authorise, route, connect.
func (s *Server) admit(ctx context.Context, ref *realtimev1.AgentRef, verb string, extra error) (*call, error) {
	u, err := s.d.Authn.Authenticate(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.Agent(ref); err != nil {
		return nil, err
	}
	if extra != nil {
		return nil, extra
	}
	if err := s.d.Authz.Authorize(ctx, u, verb, ref.GetNamespace(), ref.GetName()); err != nil {
		return nil, err
	}
	t, _, err := s.d.Router.Resolve(ctx, ref.GetNamespace(), ref.GetName())
	if err != nil {
		return nil, err
	}
	c, _, err := s.reach(ctx, u, t)
	return c, err
}

// reach connects to t's pod. When it does not answer, the Agent is read
// again from the apiserver before the pod is blamed: a cache a moment
// behind may still say Running for a run whose session just ended (then
// the caller hears that, and GetSession gets the finished Agent back), or
// name a pod since replaced.
func (s *Server) reach(ctx context.Context, u auth.User, t *route.Target) (*call, *agentsv1alpha1.Agent, error) {
	c, err := s.connect(ctx, u, t)
	if err == nil || status.Code(err) != codes.Unavailable {
		return c, nil, err
	}
	lt, la, lerr := s.d.Router.ResolveLive(ctx, t.Agent.Namespace, t.Agent.Name)
	switch {
	case lerr != nil:
		return nil, la, lerr
	case lt.Addr != t.Addr:
		c, err = s.connect(ctx, u, lt)
		return c, nil, err
	}
	return nil, nil, err
}

// connect derives the run's token and gets a client of its pod.
func (s *Server) connect(ctx context.Context, u auth.User, t *route.Target) (*call, error) {
	k := s.d.Key()
	if k == nil {
		return nil, status.Error(codes.Unavailable, "the gateway has no usable realtime key (Secret "+realtime.KeySecretName+")")
	}
	c, done, err := s.d.Pods.Get(ctx, t.Addr)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "Agent %s/%s: pod %s unreachable: %v", t.Agent.Namespace, t.Agent.Name, t.Pod, err)
	}
	return &call{user: u, target: t, client: c, token: realtime.Token(k, string(t.Agent.UID)), done: done}, nil
}

// record patches status.sessionId when id is new, logging rather than
// failing the call: the turn itself went well, and the controller reads
// the id from the log at the end anyway.
func (s *Server) record(ctx context.Context, c *call, id string) {
	if id == "" || id == c.target.Agent.Status.SessionID {
		return
	}
	wrote, err := s.d.Session.Record(ctx, c.target.Agent, id)
	if err != nil {
		s.d.Log.Warn("could not record the session id", "agent", c.target.Agent.Namespace+"/"+c.target.Agent.Name, "sessionId", id, "err", err)
		return
	}
	// Later messages of this call compare against what is now recorded.
	a := c.target.Agent.DeepCopy()
	a.Status.SessionID = id
	c.target.Agent = a
	if wrote {
		s.d.Log.Info("session id recorded", "agent", a.Namespace+"/"+a.Name, "sessionId", id)
	}
}
