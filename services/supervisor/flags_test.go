package main

import (
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/service/servicetest"
)

func TestFlagRules(t *testing.T) {
	cases := []struct {
		rule    string
		args    []string
		env     map[string]string
		wantErr string
		check   func(*options) bool
	}{
		{"the defaults are the run pod's", nil, nil, "", func(o *options) bool {
			return o.AgentDir == runspec.AgentDir && o.Chown == "1000:1000" && o.chown() == "1000:1000" && o.LogLevel == "info" &&
				o.TerminationLog == "/dev/termination-log"
		}},
		{"SUPERVISOR_TERMINATION_LOG moves the summary", nil, map[string]string{"SUPERVISOR_TERMINATION_LOG": "/tmp/t"}, "", func(o *options) bool { return o.TerminationLog == "/tmp/t" }},
		{"SUPERVISOR_AGENT_DIR moves the agent volume", nil, map[string]string{"SUPERVISOR_AGENT_DIR": "/tmp/a"}, "", func(o *options) bool { return o.AgentDir == "/tmp/a" }},
		{"the flag beats the variable", []string{"--supervisor-agent-dir=/x"}, map[string]string{"SUPERVISOR_AGENT_DIR": "/tmp/a"}, "", func(o *options) bool { return o.AgentDir == "/x" }},
		{"SUPERVISOR_CHOWN=none skips the chown", nil, map[string]string{"SUPERVISOR_CHOWN": "none"}, "", func(o *options) bool { return o.chown() == "" }},
		{"a recipe's LOG_LEVEL is not the supervisor's", nil, map[string]string{"LOG_LEVEL": "verbose"}, "", func(o *options) bool { return o.LogLevel == "info" }},
		{"SUPERVISOR_LOG_LEVEL sets the level", nil, map[string]string{"SUPERVISOR_LOG_LEVEL": "debug"}, "", func(o *options) bool { return o.LogLevel == "debug" }},
		{"an unknown level is refused by flag and variable", nil, map[string]string{"SUPERVISOR_LOG_LEVEL": "verbose"}, "--supervisor-log-level / SUPERVISOR_LOG_LEVEL", nil},
		{"the old --agent-dir is gone", []string{"--agent-dir=/x"}, nil, "agent-dir", nil},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			fs, o := newFlagSet(func(k string) string { return c.env[k] })
			err := fs.Parse(c.args, io.Discard)
			servicetest.CheckParsed(t, o, err, c.wantErr, c.check)
		})
	}
}

// TestNoFlagReadsARunVariable: the supervisor's variables share the pod's
// environment with the controller's and the recipe's, so each is
// SUPERVISOR_* and none is a name the controller writes.
func TestNoFlagReadsARunVariable(t *testing.T) {
	fs, _ := newFlagSet(nil)
	for _, f := range fs.Flags() {
		if !strings.HasPrefix(f.Env, "SUPERVISOR_") || slices.Contains(runspec.Reserved(), f.Env) {
			t.Errorf("--%s reads %s, which a run's environment may hold for another purpose", f.Name, f.Env)
		}
	}
}

// TestTheDocsListEveryFlag keeps docs/supervisor.md's flag table generated
// from the flags (AGENTPLANE_UPDATE_DOCS=1 rewrites it).
func TestTheDocsListEveryFlag(t *testing.T) {
	fs, _ := newFlagSet(nil)
	servicetest.CheckDocTable(t, fs, "../../docs/supervisor.md")
}

func TestVersionAndBadFlagsExit(t *testing.T) {
	cases := []struct {
		rule string
		args []string
		env  []string
		code int
		out  string
	}{
		{"the binary prints its version", []string{"--version"}, nil, 0, "supervisor version "},
		{"init prints its version", []string{"init", "--version"}, nil, 0, "supervisor version "},
		{"run prints its version", []string{"run", "--version"}, nil, 0, "supervisor version "},
		{"a bad level stops init with 2, naming the variable", []string{"init"}, []string{"SUPERVISOR_LOG_LEVEL=verbose"}, 2, "SUPERVISOR_LOG_LEVEL"},
		{"an unknown flag stops run with 2", []string{"run", "--agent-dir=/x"}, nil, 2, "agent-dir"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			cmd := exec.Command(supervisorBin, c.args...)
			cmd.Env = c.env
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != c.code || !strings.Contains(string(out), c.out) {
				t.Fatalf("exit %d, output %q; want %d and %q", code, out, c.code, c.out)
			}
		})
	}
}
