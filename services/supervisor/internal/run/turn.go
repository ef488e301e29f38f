package run

import (
	"os/exec"
	"time"

	"github.com/agentplane/agentplane/libs/vendors"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/supervisor/internal/cli"
)

// ReasonSessionEnded is a turn's reason when the session ended (Close,
// idle limit, deadline, SIGTERM) before the turn gave its result.
const ReasonSessionEnded = "session-ended"

// turnOutcome is how one turn of a realtime session ended.
type turnOutcome struct {
	// sessionID is the id the turn's CLI reported, empty if none.
	sessionID string
	isError   bool
	reason    string
	// exitCode is the CLI's exit code, nil when no process ran.
	exitCode *int32
}

// turnArgv is the command line of one turn: the definition's invocation
// with this turn's text, resuming resume when it is set. A pin only
// applies to the session's first turn; later turns continue whatever id
// that one got.
func turnArgv(plan *cli.Plan, text, resume string, first bool) ([]string, error) {
	inv := plan.Invocation
	inv.Prompt, inv.ResumeID = text, resume
	if !first {
		inv.PinID = ""
	}
	p := *plan
	p.Invocation = inv
	return p.Argv()
}

// runTurn runs the CLI for one turn and supervises it until it exits by
// itself, lingers past its result (stopped after the grace, as in a Job
// run), or stop is closed because the session ends. Its output goes to the
// log tail, the sinks and NATS through the run's Emitter, and each event
// also to tap.
func (r *runner) runTurn(v vendors.Vendor, argv []string, tap func(*eventsv1.RunEvent), stop <-chan struct{}) turnOutcome {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		// Checked at start; only a CLI removed since gets here.
		r.log.Error("agent not found for this turn", "cli", argv[0], "err", err)
		return turnOutcome{isError: true, reason: ReasonNotFound}
	}
	c, err := start(path, argv, childEnv(r.opts.Env), workDir(r.opts.Env.Workspace))
	if err != nil {
		r.log.Error("agent could not be started for this turn", "err", err)
		return turnOutcome{isError: true, reason: ReasonSpawn}
	}
	r.log.Info("turn started", "pid", c.cmd.Process.Pid)
	p := newPipeline(r.em, v, r.log)
	p.tap = tap
	readDone := make(chan struct{})
	go func() { defer close(readDone); p.consume(c.stdout) }()
	errDone := make(chan struct{})
	go func() { defer close(errDone); forwardStderr(c.stderr, r.opts.Stderr) }()

	grace := r.opts.Env.ExitGrace
	var afterResult <-chan time.Time
	resultErr, stopped, lingered := false, false, false
	code := -1
	for code < 0 {
		select {
		case <-c.exited:
			code = c.exitCode()
		case isErr := <-p.result:
			resultErr = isErr
			t := time.NewTimer(grace)
			defer t.Stop()
			afterResult = t.C
		case <-afterResult:
			r.log.Warn("agent still running after its result; stopping it", "grace", grace)
			c.stop(grace)
			code, lingered = c.exitCode(), true
		case <-stop:
			r.log.Info("session ending; stopping the running turn", "grace", grace)
			c.stop(grace)
			code, stopped = c.exitCode(), true
		}
	}
	r.drain(c, readDone, errDone)
	out := turnVerdict(code, p.gotRes, resultErr, stopped, lingered)
	out.sessionID = p.parser.SessionID()
	r.log.Info("turn ended", "exit_code", code, "is_error", out.isError, "reason", out.reason,
		"session_id", out.sessionID, "lines", p.lines, "events", p.events)
	return out
}

// turnVerdict judges a turn as a Job run judges its CLI: the result line
// is the answer, a CLI stopped while lingering after a successful result
// succeeded, and no result is a failure whatever the exit code.
func turnVerdict(code int, gotRes, resultErr, stopped, lingered bool) turnOutcome {
	c32 := int32(code)
	out := turnOutcome{exitCode: &c32}
	switch {
	case gotRes && resultErr:
		out.isError, out.reason = true, ReasonResultErr
	case gotRes && (code == 0 || lingered || stopped):
		// The answer was complete; how the process was put down after it
		// does not change that.
	case stopped:
		out.isError, out.reason = true, ReasonSessionEnded
	case code == 0 && !gotRes:
		out.isError, out.reason = true, ReasonNoResult
	case code > 128:
		out.isError, out.reason = true, ReasonSignal
	default:
		out.isError, out.reason = true, ReasonExit
	}
	return out
}
