// Package run is `supervisor run`, PID 1 of a run pod's agent container:
// it starts the vendor CLI, turns its output into the log tail and the
// run's events, enforces the run's deadline, forwards termination, and
// exits with the CLI's exit code.
package run

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks"
	"github.com/agentplane/agentplane/libs/vendors"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/supervisor/internal/cli"
	"github.com/agentplane/agentplane/services/supervisor/internal/emit"
	"github.com/agentplane/agentplane/services/supervisor/internal/repos"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
	"github.com/agentplane/agentplane/services/supervisor/internal/watch"
)

// Exit codes of `supervisor run` besides the CLI's own. See the README of
// the service for the full table.
const (
	// ExitUsage: AGENT_RUN_SPEC missing or invalid, or no command line
	// could be built from it.
	ExitUsage = 2
	// ExitNoResult: the CLI exited 0 without printing a result line, so
	// nothing says the task was done.
	ExitNoResult = 1
	// ExitDeadline: the run's deadline (AGENT_DEADLINE_MS) fired.
	ExitDeadline = 124
	// ExitSpawn: the CLI was found but could not be started.
	ExitSpawn = 126
	// ExitNotFound: the CLI is not on PATH.
	ExitNotFound = 127
)

// Lifecycle reasons of agent/failed.
const (
	ReasonSpec       = "spec"
	ReasonNotFound   = "not-found"
	ReasonSpawn      = "spawn"
	ReasonExit       = "exit-code"
	ReasonSignal     = "signal"
	ReasonDeadline   = "deadline"
	ReasonNoResult   = "no-result"
	ReasonResultErr  = "result-error"
	ReasonTerminated = "terminated"
)

// readerGrace bounds the wait for the CLI's stdout to reach EOF after it
// exited: a grandchild may still hold the pipe open.
const readerGrace = 2 * time.Second

// flushTimeout bounds delivery of what the sinks still hold at exit, and
// of NATS when no more time is left. It is short because at the deadline
// the Job's own deadline is only seconds away (the controller leaves 10 s).
const flushTimeout = 5 * time.Second

// maxNATSFlush bounds the wait for NATS at exit when the run ended well
// inside its deadline: events an outage kept back (up to
// emit.PublishBuffer of them) reach the stream when NATS is back within
// this long, instead of being dropped after flushTimeout.
const maxNATSFlush = time.Minute

// natsFlush is how long the exit flush may wait for NATS: maxNATSFlush,
// cut so that it ends a second before the Job's own deadline
// (runspec.DeadlineMargin after the run's, counted from origin), never
// under flushTimeout; flushTimeout alone once the pod is being stopped,
// whose grace period is the kubelet's.
func natsFlush(now, origin time.Time, deadline time.Duration, terminated bool) time.Duration {
	if terminated {
		return flushTimeout
	}
	d := maxNATSFlush
	if deadline > 0 {
		d = min(d, origin.Add(deadline+runspec.DeadlineMargin-time.Second).Sub(now))
	}
	return max(d, flushTimeout)
}

// Options configures Main.
type Options struct {
	Env runenv.Env
	// AgentDir holds the sequence file the init step left.
	AgentDir string
	// Stdout is the log tail; Stderr receives the CLI's stderr.
	Stdout, Stderr io.Writer
	// Signals delivers SIGTERM/SIGINT sent to the supervisor.
	Signals <-chan os.Signal
	// Start is when the supervisor started; the deadline counts from it.
	Start time.Time
	// TerminationLog receives the run's delivery summary (emit.Options).
	TerminationLog string
	Logger         *slog.Logger
}

// Main runs the CLI, or in a realtime run serves its session, and returns
// the supervisor's exit code.
func Main(opts Options) int {
	log := opts.Logger
	r := &runner{opts: opts, log: log}
	plan, err := cli.Load(opts.Env)
	if err != nil {
		return r.failEarly("", ReasonSpec, ExitUsage, err)
	}
	vendor := plan.Vendor.Name()
	if resume := plan.Invocation.ResumeID; plan.StartFresh(opts.AgentDir) {
		log.Warn("the conversation to continue was not restored; starting a fresh one", "conversation", resume)
	}
	if opts.Env.Realtime() || plan.Spec.Execution == runspec.ExecutionRealtime {
		// A realtime run serves prompts on :8090 until its session ends.
		return r.realtime(plan)
	}
	argv, err := plan.Argv()
	if err != nil {
		return r.failEarly(vendor, ReasonSpec, ExitUsage, err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return r.failEarly(vendor, ReasonNotFound, ExitNotFound, fmt.Errorf("agent not found: %s: %w", argv[0], err))
	}
	r.open(vendor)
	c, err := start(path, argv, childEnv(opts.Env), workDir(opts.Env.Workspace))
	if err != nil {
		return r.finish(ExitSpawn, ReasonSpawn, fmt.Errorf("start %s: %w", argv[0], err))
	}
	log.Info("agent started", "vendor", vendor, "pid", c.cmd.Process.Pid)
	r.em.Lifecycle("agent", "started", "", nil, "")
	return r.supervise(c, plan.Vendor)
}

// runner holds one run's state.
type runner struct {
	opts Options
	log  *slog.Logger
	em   *emit.Emitter
}

func (r *runner) open(vendor string) {
	seq := emit.ReadSequence(filepath.Join(r.opts.AgentDir, emit.SequenceFile))
	r.em = emit.New(emit.Options{Env: r.opts.Env, Vendor: vendor, Stdout: r.opts.Stdout,
		StartSequence: seq, TerminationLog: r.opts.TerminationLog, Logger: r.log})
}

// failEarly reports a failure before the CLI started.
func (r *runner) failEarly(vendor, reason string, code int, err error) int {
	if r.em == nil {
		r.open(vendor)
	}
	return r.finish(code, reason, err)
}

// finish emits the terminal lifecycle event, flushes and returns code.
func (r *runner) finish(code int, reason string, err error) int {
	c32 := int32(code)
	if code == 0 {
		r.em.Lifecycle("agent", "succeeded", "", &c32, "")
	} else {
		if err != nil {
			fmt.Fprintf(r.opts.Stderr, "supervisor: %s: %v\n", reason, err)
		}
		r.log.Error("agent failed", "reason", reason, "exit_code", code)
		r.em.Lifecycle("agent", "failed", reason, &c32, "")
	}
	r.closeEvents(reason)
	return code
}

// closeEvents flushes the sinks (flushTimeout) and NATS (natsFlush) after
// the terminal event.
func (r *runner) closeEvents(reason string) {
	origin := deadlineOrigin(r.opts.Start, filepath.Join(r.opts.AgentDir, emit.StartedFile))
	nats := natsFlush(time.Now(), origin, r.opts.Env.Deadline, reason == ReasonTerminated)
	if err := r.em.CloseWithin(flushTimeout, nats, ""); err != nil {
		r.log.Warn("not every event was delivered", "err", err)
	}
}

// supervise waits for the CLI to end: by itself, after its result line
// (with grace), at the deadline, or on a forwarded SIGTERM.
func (r *runner) supervise(c *child, v vendors.Vendor) int {
	p := newPipeline(r.em, v, r.log)
	readDone := make(chan struct{})
	go func() { defer close(readDone); p.consume(c.stdout) }()
	errDone := make(chan struct{})
	go func() { defer close(errDone); forwardStderr(c.stderr, r.opts.Stderr) }()

	grace := r.opts.Env.ExitGrace
	var deadline <-chan time.Time
	if d := r.opts.Env.Deadline; d > 0 {
		origin := deadlineOrigin(r.opts.Start, filepath.Join(r.opts.AgentDir, emit.StartedFile))
		t := time.NewTimer(max(stopAt(d, grace)-time.Since(origin), 0))
		defer t.Stop()
		deadline = t.C
	}
	var afterResult <-chan time.Time
	var resultErr *bool
	code, reason := -1, ""
	for code < 0 {
		select {
		case <-c.exited:
			code = c.exitCode()
		case isErr := <-p.result:
			resultErr = &isErr
			t := time.NewTimer(grace)
			defer t.Stop()
			afterResult = t.C
		case <-afterResult:
			// Real CLIs sometimes linger after their result; the result
			// is the answer, so stop the process and report that.
			r.log.Warn("agent still running after its result; stopping it", "grace", grace)
			c.stop(grace)
			code, reason = 0, ""
			if *resultErr {
				code, reason = 1, ReasonResultErr
			}
		case <-deadline:
			r.log.Warn("run deadline reached; stopping the agent", "grace", grace)
			fmt.Fprintln(r.opts.Stderr, "supervisor: run deadline expired; forcing the agent down")
			c.stop(grace)
			code, reason = ExitDeadline, ReasonDeadline
		case sig := <-r.opts.Signals:
			r.log.Info("signal received; stopping the agent", "signal", sig.String(), "grace", grace)
			c.stop(grace)
			code, reason = c.exitCode(), ReasonTerminated
		}
	}
	r.drain(c, readDone, errDone)
	if reason == "" && code != 0 {
		reason = ReasonExit
		if code > 128 {
			reason = ReasonSignal
		}
	}
	switch {
	case code == 0 && reason == "" && !p.gotRes:
		code, reason = ExitNoResult, ReasonNoResult
	case code == 0 && reason == ReasonTerminated && !p.gotRes:
		// Stopped before its answer: not a success, whatever the CLI's
		// own exit code says.
		code = 128 + int(syscall.SIGTERM)
	}
	r.log.Info("agent ended", "exit_code", code, "lines", p.lines, "events", p.events,
		"malformed", p.malformed, "oversized", p.oversized)
	r.watchFiles()
	// Whatever the outcome: the pinned session is what a later run
	// continues, a failed one included.
	r.saveConversation(v, r.opts.Env.ConversationPin, reason == ReasonTerminated)
	var err error
	if reason == ReasonNoResult {
		err = fmt.Errorf("the agent exited 0 without a result line")
	}
	return r.finish(code, reason, err)
}

// drain waits for the output readers, briefly: a grandchild may hold the
// pipes open, in which case its group is killed and the reads cut off.
func (r *runner) drain(c *child, readDone, errDone chan struct{}) {
	wait := func() bool {
		t := time.NewTimer(readerGrace)
		defer t.Stop()
		for _, ch := range []chan struct{}{readDone, errDone} {
			select {
			case <-ch:
			case <-t.C:
				return false
			}
		}
		return true
	}
	if wait() {
		return
	}
	c.signal(syscall.SIGKILL) // whatever is left of the group
	if wait() {
		return
	}
	r.log.Warn("agent output still open after the agent exited; cutting it off")
	_ = c.stdout.SetReadDeadline(time.Now())
	_ = c.stderr.SetReadDeadline(time.Now())
	<-readDone
	<-errDone
}

// stopAt is when, after the deadline's origin, the CLI is sent SIGTERM:
// one grace before the deadline, so that even a CLI that ignores SIGTERM
// is gone (SIGKILL) by the deadline itself, and the 124 exit lands before
// the Job's. A grace longer than half the deadline is cut to half.
func stopAt(deadline, grace time.Duration) time.Duration {
	return max(deadline-grace, deadline/2)
}

// deadlineOrigin is when the pod's run began: the init container's start
// when it recorded one (the Job's deadline also counts the init
// container's time, e.g. a long clone), else the supervisor's own start.
func deadlineOrigin(start time.Time, startedFile string) time.Time {
	if t, ok := emit.ReadStarted(startedFile); ok && t.Before(start) && start.Sub(t) < 24*time.Hour {
		return t
	}
	return start
}

// watchFiles emits one file event per output.watch entry.
func (r *runner) watchFiles() {
	entries, err := watch.Parse(r.opts.Env.WatchJSON)
	if err != nil {
		r.log.Warn("output.watch unusable", "err", err)
		return
	}
	for _, e := range entries {
		fe, err := watch.Collect(r.opts.Env.Workspace, e)
		if err != nil {
			r.log.Warn("output.watch entry skipped", "event", e.Event, "err", err)
			continue
		}
		r.em.Event(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_File{File: fe}})
	}
}

// childEnv is the supervisor's environment minus what only the supervisor
// needs (sink and conversation headers, the NATS server, credential and
// CA, and a realtime run's token: the agent runs arbitrary tools and has
// no use for them), plus the git token aliases.
func childEnv(env runenv.Env) []string {
	// The run's NATS connection and its session's token are the
	// supervisor's alone.
	drop := map[string]bool{
		runspec.EnvNATSURL: true, runspec.EnvNATSURLOverride: true,
		runspec.EnvNATSCreds: true, runspec.EnvNATSCAFile: true,
		realtime.EnvToken: true,
	}
	cfgs, _ := sinks.ParseSinks([]byte(env.Getenv(sinks.EnvSinks)))
	for _, c := range cfgs {
		if c.HeadersSecret != "" {
			drop[c.HeadersSecret] = true
		}
	}
	if env.ConversationAuth != "" {
		drop[env.ConversationAuth] = true
	}
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] {
			out = append(out, kv)
		}
	}
	// The clones' credential helper reads the tokens under shell-safe
	// aliases (see repos.TokenAlias), so the agent can push.
	if list, err := repos.Parse(env.ReposJSON); err == nil {
		out = append(out, repos.AliasEnv(list, env.Getenv)...)
	}
	return out
}

// workDir is the workspace when it exists, so the CLI works on the clones.
func workDir(ws string) string {
	if fi, err := os.Stat(ws); err == nil && fi.IsDir() {
		return ws
	}
	return ""
}
