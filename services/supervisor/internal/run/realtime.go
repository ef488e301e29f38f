package run

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/agentplane/agentplane/libs/realtime"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
	"github.com/agentplane/agentplane/services/supervisor/internal/cli"
	"github.com/agentplane/agentplane/services/supervisor/internal/emit"
)

// How a realtime session ends, as the reason of its terminal lifecycle
// event. A session that ends by Close, its idle limit or its deadline ran
// as intended: agent/succeeded, exit 0, so the Job completes and the
// controller reads the session id from the log.
const (
	ReasonClosed = "closed"
	ReasonIdle   = "idle"
	// ReasonRealtimeSetup: the token or the listen address is
	// unusable, so no session could be served.
	ReasonRealtimeSetup = "realtime-setup"
)

// errNoResume says the vendor cannot continue a session, which every turn
// after the first needs.
var errNoResume = errors.New("cannot resume a session, which a realtime run needs for every turn after the first")

// ExitRealtimeSetup is the exit code for ReasonRealtimeSetup (EX_CONFIG).
const ExitRealtimeSetup = 78

// stopTimeout bounds how long open RPCs may take to finish once the
// session ended; the turn was stopped already, so they end at once unless
// a caller stopped reading.
const stopTimeout = 5 * time.Second

// runToken is the run's token from the supervisor's environment (the
// controller passes it from the run's token Secret, docs/realtime.md).
// Surrounding whitespace is dropped: a Secret written by hand often ends
// in a newline.
func runToken(value string) (string, error) {
	tok := strings.TrimSpace(value)
	if tok == "" {
		return "", fmt.Errorf("realtime token: %s is unset or empty", realtime.EnvToken)
	}
	return tok, nil
}

// realtime serves the session until Close, the idle limit, the deadline or
// SIGTERM ends it, and returns the exit code.
func (r *runner) realtime(plan *cli.Plan) int {
	env := r.opts.Env
	vendor := plan.Vendor.Name()
	if !plan.Vendor.CanResume() {
		return r.failEarly(vendor, ReasonSpec, ExitUsage, fmt.Errorf("%s %w", vendor, errNoResume))
	}
	token, err := runToken(env.RealtimeToken)
	if err != nil {
		return r.failEarly(vendor, ReasonRealtimeSetup, ExitRealtimeSetup, err)
	}
	// The CLI is looked up now, not at the first prompt, so a missing one
	// fails the run as it does a Job run.
	probe, err := turnArgv(plan, "probe", "", true)
	if err != nil {
		return r.failEarly(vendor, ReasonSpec, ExitUsage, err)
	}
	if _, err := exec.LookPath(probe[0]); err != nil {
		return r.failEarly(vendor, ReasonNotFound, ExitNotFound, fmt.Errorf("agent not found: %s: %w", probe[0], err))
	}
	lis, err := net.Listen("tcp", env.RealtimeAddr)
	if err != nil {
		return r.failEarly(vendor, ReasonRealtimeSetup, ExitRealtimeSetup, fmt.Errorf("listen for prompts: %w", err))
	}
	r.open(vendor)

	s := newSession(plan.Invocation.ResumeID, time.Now(), func(t *turn) turnOutcome {
		argv, err := turnArgv(plan, t.text, t.resume, t.first)
		if err != nil {
			r.log.Error("no command line for this turn", "err", err)
			return turnOutcome{isError: true, reason: ReasonSpec}
		}
		var tap func(*eventsv1.RunEvent)
		if t.q != nil {
			tap = t.q.push
		}
		return r.runTurn(plan.Vendor, argv, tap, t.stop)
	})
	closed := make(chan struct{}, 1)
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		// The gateway keeps one connection per session open through long
		// idle stretches and may ping to keep it alive; the default
		// policy (5 min) would answer its pings with GOAWAY.
		MinTime: 10 * time.Second, PermitWithoutStream: true,
	}))
	supervisorv1.RegisterSessionServiceServer(srv, &sessionService{token: token, s: s, closed: closed})
	hs := health.NewServer()
	hs.SetServingStatus(supervisorv1.SessionService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	reflection.Register(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()

	r.em.Lifecycle("agent", "started", "", nil, "")
	if plan.Invocation.Prompt != "" {
		// The definition's prompt is the first turn; a resumed session
		// has none and waits for the first Prompt instead.
		if _, err := s.begin(plan.Invocation.Prompt, nil); err != nil {
			r.log.Error("initial prompt not started", "err", err)
		}
	}
	// Logged once the initial turn (if any) has begun, so whoever reads
	// the log and then asks Info sees it.
	r.log.Info("realtime session serving", "addr", lis.Addr().String(), "vendor", vendor,
		"resume_session", plan.Invocation.ResumeID, "idle_limit", env.RealtimeIdle)

	code, reason := r.awaitEnd(s, closed, served)
	id, turns := s.end()
	hs.Shutdown()
	stopServer(srv, stopTimeout)
	r.log.Info("realtime session ended", "reason", reason, "session_id", id, "turns", turns)
	r.watchFiles()
	if turns > 0 {
		// Saved under the session id the Agent's status reports, which a
		// later Agent's resumeSession restores. A session in which no turn
		// ran changed nothing.
		r.saveConversation(plan.Vendor, id, reason == ReasonTerminated)
	}
	c32 := int32(code)
	if code == 0 {
		r.em.Lifecycle("agent", "succeeded", reason, &c32, "")
	} else {
		fmt.Fprintf(r.opts.Stderr, "supervisor: %s: realtime session ended\n", reason)
		r.em.Lifecycle("agent", "failed", reason, &c32, "")
	}
	r.closeEvents(reason)
	return code
}

// awaitEnd waits for whatever ends the session first and returns the exit
// code and reason for it.
func (r *runner) awaitEnd(s *session, closed <-chan struct{}, served <-chan error) (int, string) {
	env := r.opts.Env
	var deadline <-chan time.Time
	if d := env.Deadline; d > 0 {
		origin := deadlineOrigin(r.opts.Start, filepath.Join(r.opts.AgentDir, emit.StartedFile))
		t := time.NewTimer(max(stopAt(d, env.ExitGrace)-time.Since(origin), 0))
		defer t.Stop()
		deadline = t.C
	}
	limit := env.RealtimeIdle
	idle := time.NewTimer(limit)
	defer idle.Stop()
	for {
		select {
		case <-closed:
			r.log.Info("session closed by its caller")
			return 0, ReasonClosed
		case <-idle.C:
			free, since := s.idle(time.Now())
			switch {
			case !free:
				// A running turn is not idleness; the limit counts again
				// from its end.
				idle.Reset(limit)
				continue
			case since < limit:
				idle.Reset(limit - since)
				continue
			}
			r.log.Info("no prompt within the idle limit; ending the session", "idle_limit", limit)
			return 0, ReasonIdle
		case <-deadline:
			r.log.Warn("run deadline reached; ending the session")
			return 0, ReasonDeadline
		case sig := <-r.opts.Signals:
			r.log.Info("signal received; ending the session", "signal", sig.String())
			return 128 + int(syscall.SIGTERM), ReasonTerminated
		case err := <-served:
			if err == nil || errors.Is(err, grpc.ErrServerStopped) {
				err = errors.New("server stopped")
			}
			r.log.Error("prompt server failed", "err", err)
			return ExitRealtimeSetup, ReasonRealtimeSetup
		}
	}
}

// stopServer lets open RPCs finish, then cuts off whatever is left.
func stopServer(srv *grpc.Server, timeout time.Duration) {
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		srv.Stop()
		<-done
	}
}
