package main

import (
	"fmt"

	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/service"
)

// name is the binary's name in its logs, errors and --version line.
const name = "supervisor"

// noChown is the --supervisor-chown value that skips handing the volumes
// over; an empty variable cannot say it, since an empty variable is unset.
const noChown = "none"

// options are the supervisor's own settings. Everything about the run
// comes from the Job's environment (libs/runspec), not from here.
type options struct {
	// AgentDir is the agent volume.
	AgentDir string
	// Chown is "uid:gid", or noChown.
	Chown string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// TerminationLog is the container's termination message file, which
	// receives the delivery summary at exit; empty writes none.
	TerminationLog string
}

// newFlagSet registers the flags `supervisor init` and `supervisor run`
// share: both containers get the same environment from the Job, so both
// read the same variables. Every flag is named supervisor-*, so its
// variable (SUPERVISOR_*) can collide neither with the run's variables nor
// with those a recipe sets for its CLI (a recipe's LOG_LEVEL, say).
func newFlagSet(getenv func(string) string) (*service.FlagSet, *options) {
	fs := service.NewFlagSet(name, getenv)
	o := &options{}
	fs.StringVar(&o.LogLevel, "supervisor-log-level", "info", "log level of the supervisor's JSON lines on stderr: debug, info, warn or error")
	fs.StringVar(&o.AgentDir, "supervisor-agent-dir", runspec.AgentDir, "agent volume: init copies the supervisor bundle there, run reads the init step's sequence file from it")
	fs.StringVar(&o.Chown, "supervisor-chown", "1000:1000", "init only, as root: uid:gid the volumes are handed to; "+noChown+" skips it")
	fs.StringVar(&o.TerminationLog, "supervisor-termination-log", runspec.DefaultTerminationLog,
		"file the delivery summary (events by kind, events lost) is written to at exit, for the agent-controller's metrics: the container's terminationMessagePath; written only when the file exists")
	// A malformed --supervisor-chown is the init step's to refuse, with its
	// own exit code and lifecycle reason (17, chown), like every step.
	fs.Check(func() error {
		if _, err := service.ParseLevel(o.LogLevel); err != nil {
			return fmt.Errorf("--supervisor-log-level / SUPERVISOR_LOG_LEVEL: %w", err)
		}
		if o.AgentDir == "" {
			return fmt.Errorf("--supervisor-agent-dir / SUPERVISOR_AGENT_DIR must not be empty")
		}
		return nil
	})
	return fs, o
}

// chown is the init step's Chown: "" skips it.
func (o *options) chown() string {
	if o.Chown == noChown {
		return ""
	}
	return o.Chown
}
