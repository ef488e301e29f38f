// Command supervisor is the program inside every run pod: `supervisor
// init` prepares the pod's volumes in the init container, and `supervisor
// run`, PID 1 of the agent container, runs the vendor CLI and streams its
// events to the recipe's sinks and the platform's NATS stream.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/libs/lockedio"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/service"
	"github.com/agentplane/agentplane/services/supervisor/internal/initstep"
	"github.com/agentplane/agentplane/services/supervisor/internal/repos"
	"github.com/agentplane/agentplane/services/supervisor/internal/run"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
)

const usage = `usage:
  supervisor init [flags]                prepare the run pod's volumes
  supervisor run  [flags]                run the agent CLI of AGENT_RUN_SPEC
  supervisor git-credential ENV get      git credential helper (token from $ENV)
  supervisor --version                   print version information

Flags of init and run (each falls back to the variable shown; see supervisor init --help):
  --supervisor-log-level, --supervisor-agent-dir, --supervisor-chown, --supervisor-termination-log
`

func main() {
	os.Exit(dispatch(os.Args[1:]))
}

// parse reads a subcommand's flags. done is true when the process should
// exit with code: after --version or --help (0) or a bad flag or variable
// (2, with the error on stderr).
func parse(cmd string, args []string) (o *options, code int, done bool) {
	fs, o := newFlagSet(os.Getenv)
	if code, done := service.ParseExit(fs.Parse(args, os.Stdout), name+" "+cmd, os.Stderr); done {
		return nil, code, true
	}
	return o, 0, false
}

func dispatch(args []string) int {
	start := time.Now()
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	if args[0] == runspec.CommandInit || args[0] == runspec.CommandRun {
		// First of all: the run's secrets are in this process's
		// environment, and the CLI will run under the same uid.
		if err := nonDumpable(); err != nil {
			fmt.Fprintf(os.Stderr, "supervisor %s: the run's secrets would be readable by the agent: %v\n", args[0], err)
			return exitDumpable
		}
	}
	// The logger and the CLI's forwarded stderr write whole lines; they
	// must never interleave mid-way.
	stderr := lockedio.NewWriter(os.Stderr)
	// A broken stdout (nobody reading the log) must not kill PID 1.
	signal.Ignore(syscall.SIGPIPE)

	switch args[0] {
	case "--version", "-version":
		fmt.Println(service.Version().String(name))
		return 0
	case "--help", "-help", "-h", "help":
		fmt.Print(usage)
		return 0
	case runspec.CommandInit:
		o, code, done := parse(args[0], args[1:])
		if done {
			return code
		}
		log := logger(o, args[0], stderr)
		ctx, stop := service.SignalContext()
		defer stop()
		return initstep.Main(ctx, initstep.Options{Env: runenv.Read(nil), AgentDir: o.AgentDir, Chown: o.chown(),
			TerminationLog: o.TerminationLog, Stdout: os.Stdout, Stderr: stderr, Logger: log})
	case runspec.CommandRun:
		o, code, done := parse(args[0], args[1:])
		if done {
			return code
		}
		log := logger(o, args[0], stderr)
		// PID 1 forwards SIGTERM to the CLI rather than just stopping.
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
		return run.Main(run.Options{Env: runenv.Read(nil), AgentDir: o.AgentDir, Stdout: os.Stdout,
			Stderr: stderr, Signals: sigs, Start: start, TerminationLog: o.TerminationLog, Logger: log})
	case repos.CredentialCommand:
		if len(args) != 3 {
			fmt.Fprint(os.Stderr, usage)
			return 2
		}
		if err := repos.CredentialHelper(args[1], args[2], os.Stdin, os.Stdout, os.Getenv); err != nil {
			// git shows this to whoever ran it; it names the variable only.
			fmt.Fprintf(os.Stderr, "supervisor git-credential: %v\n", err)
			return 1
		}
		return 0
	default:
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
}

// logger is the JSON logger of one subcommand; the level was checked when
// the flags were parsed.
func logger(o *options, cmd string, w io.Writer) *slog.Logger {
	log, err := service.NewLogger(name, o.LogLevel, w)
	if err != nil {
		log = slog.New(slog.NewJSONHandler(w, nil)).With("service", name)
	}
	return log.With("command", cmd)
}
