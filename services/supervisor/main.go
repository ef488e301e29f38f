// Command supervisor is the program inside every run pod: `supervisor
// init` prepares the pod's volumes in the init container, and `supervisor
// run`, PID 1 of the agent container, runs the vendor CLI and streams its
// events to the recipe's sinks and the platform's NATS stream.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/services/supervisor/internal/initstep"
	"github.com/agentplane/agentplane/services/supervisor/internal/repos"
	"github.com/agentplane/agentplane/services/supervisor/internal/run"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
)

const usage = `usage:
  supervisor init [--agent-dir DIR] [--chown UID:GID]   prepare the run pod's volumes
  supervisor run  [--agent-dir DIR]                     run the agent CLI of AGENT_RUN_SPEC
  supervisor git-credential ENV get                     git credential helper (token from $ENV)
`

func main() {
	os.Exit(dispatch(os.Args[1:]))
}

// lockedWriter serialises whole-line writes to stderr from the logger and
// the CLI's forwarded stderr, so lines never interleave mid-way.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func dispatch(args []string) int {
	start := time.Now()
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	stderr := &lockedWriter{w: os.Stderr}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: logLevel()})).
		With("component", "supervisor", "command", args[0])
	slog.SetDefault(log)
	// A broken stdout (nobody reading the log) must not kill PID 1.
	signal.Ignore(syscall.SIGPIPE)

	switch args[0] {
	case "init":
		fs := flag.NewFlagSet("init", flag.ContinueOnError)
		agentDir := fs.String("agent-dir", envOr("SUPERVISOR_AGENT_DIR", runenv.DefaultAgentDir), "agent volume the bundle is copied to (env SUPERVISOR_AGENT_DIR)")
		chown := fs.String("chown", envOr("SUPERVISOR_CHOWN", "1000:1000"), "uid:gid the volumes are handed to when running as root; empty skips (env SUPERVISOR_CHOWN)")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		return initstep.Main(ctx, initstep.Options{Env: runenv.Read(nil), AgentDir: *agentDir, Chown: *chown,
			Stdout: os.Stdout, Stderr: stderr, Logger: log})
	case "run":
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		agentDir := fs.String("agent-dir", envOr("SUPERVISOR_AGENT_DIR", runenv.DefaultAgentDir), "agent volume holding the init step's sequence file (env SUPERVISOR_AGENT_DIR)")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
		return run.Main(run.Options{Env: runenv.Read(nil), AgentDir: *agentDir, Stdout: os.Stdout,
			Stderr: stderr, Signals: sigs, Start: start, Logger: log})
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

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("SUPERVISOR_LOG_LEVEL"))); err != nil {
		return slog.LevelInfo
	}
	return l
}
