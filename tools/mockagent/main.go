// Command mockagent stands in for the vendor agent CLIs (claude, codex,
// gemini, opencode) in tests and the demo. Invoked under a vendor's name
// (argv[0], e.g. through the symlinks `mockagent install DIR` makes) or with
// --vendor NAME, it reads that CLI's command line and prints that vendor's
// real JSON event lines for the prompt it got.
//
// The mode comes from a "mock:<mode>" directive in the prompt, else from
// MOCKAGENT_MODE, else success:
//
//	success    init, text, two tool call/result pairs (one failing), result; exit 0
//	fail       an error result, then exit MOCKAGENT_EXIT (default 1)
//	crash      some lines, then exit MOCKAGENT_EXIT (default 2) without a result
//	slow       success with MOCKAGENT_DELAY (default 500ms) between lines
//	big        MOCKAGENT_BYTES (default 10 MiB) of assistant text, then success
//	malformed  success with a plain-text line and a truncated JSON line inside
//	linger     success, then stays alive for MOCKAGENT_DELAY (default 1h), as
//	           real CLIs sometimes do after their result
//	hang       init and one message, then sleeps MOCKAGENT_DELAY (default 1h)
//	           without ever printing a result
//	snoop      the attack of a CLI on its supervisor's secrets: tries to read
//	           /proc/<parent>/environ and /proc/1/environ, to open
//	           /proc/<parent>/mem, and /proc/<parent>/fd/1 for writing
//	           (writing nothing), and to read every file under
//	           /var/run/agentplane (MOCKAGENT_SNOOP_DIR), each a Read (or Glob)
//	           tool call whose result is the error or what it got; then a
//	           successful result
//
// `mockagent omnia-runtime [--addr ADDR]` is instead a stand-in for the
// Omnia runtime image (omnia.go): it answers an agent pod's readiness
// probe, naming the pack version the pod was given. `mockagent
// omnia-facade [--host H] [--report-every D]` stands in for the facade
// container beside it (omnia_facade.go): it serves sessions and
// invocations (facade_invoke.go), drains them on the preStop hook,
// reports them to its AgentRuntime's status (activity.go) and exports
// them as Prometheus metrics (facade_metrics.go).
//
// MOCKAGENT_STEPS=N adds N assistant text lines ("Step i of N.") before
// the usual work of success, slow and malformed, so a slow run streams
// many events over a known time (fault tests cut NATS off meanwhile).
// MOCKAGENT_STDERR_LINES=N also prints N diagnostic lines to stderr while
// the events stream, and MOCKAGENT_IGNORE_TERM=1 makes the mock ignore
// SIGTERM, so only SIGKILL stops it.
//
// A resume flag (claude --resume, codex exec resume, gemini --resume,
// opencode --session) makes the session id that one; without a prompt the
// mock then just reports the resumed session. MOCKAGENT_SESSION fixes the
// id of a new session.
//
// As Claude Code does, the mock claude appends each prompt to its session's
// transcript, $HOME/.claude/projects/<project>/<session>.jsonl (<project>
// is the working directory with every character but letters and digits
// replaced by "-"); a fork (--resume X --fork-session --session-id Y)
// starts Y's transcript with a copy of X's. Nothing is written without
// HOME, and a transcript that cannot be written is reported on stderr
// without changing the run.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// vendorNames are the CLIs the mock can be; install links each of them.
var vendorNames = []string{"claude", "codex", "gemini", "opencode"}

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run is main without the exit, so tests can drive it in-process.
func run(args []string, stdout, stderr io.Writer) int {
	name := filepath.Base(args[0])
	rest := args[1:]
	if len(rest) >= 2 && rest[0] == "--vendor" {
		name, rest = rest[1], rest[2:]
	} else if len(rest) >= 1 && strings.HasPrefix(rest[0], "--vendor=") {
		name, rest = strings.TrimPrefix(rest[0], "--vendor="), rest[1:]
	}
	switch {
	case isVendor(name):
	case len(rest) >= 1 && rest[0] == "omnia-runtime":
		return omniaRuntime(rest[1:], stderr)
	case len(rest) >= 1 && rest[0] == "omnia-facade":
		return omniaFacade(rest[1:], stderr)
	case len(rest) >= 1 && rest[0] == "install":
		if len(rest) != 2 {
			fmt.Fprintln(stderr, "usage: mockagent install DIR")
			return 2
		}
		if err := install(rest[1]); err != nil {
			fmt.Fprintf(stderr, "mockagent: %v\n", err)
			return 1
		}
		return 0
	default:
		fmt.Fprintf(stderr, "mockagent: cannot tell which CLI to be from %q; run it as one of %s, or pass --vendor NAME\n",
			name, strings.Join(vendorNames, ", "))
		return 2
	}
	inv, err := parseArgs(name, rest)
	if err != nil {
		// Real CLIs refuse bad command lines the same way: stderr, exit 2.
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	cfg, err := configFromEnv(inv)
	if err != nil {
		fmt.Fprintf(stderr, "mockagent: %v\n", err)
		return 2
	}
	if os.Getenv("MOCKAGENT_IGNORE_TERM") != "" {
		// Lets tests check that a supervisor escalates to SIGKILL.
		signal.Ignore(syscall.SIGTERM)
	}
	e := newEmitter(name)
	if cfg.session == "" {
		cfg.session = e.newSession()
	}
	if name == "claude" {
		// Like Claude Code, keep the session's transcript under HOME, so a
		// conversation store has something real to save and restore.
		if err := recordClaudeSession(inv, cfg.session); err != nil {
			fmt.Fprintf(stderr, "mockagent: session file not written: %v\n", err)
		}
	}
	return play(e, inv, cfg, stdout, stderr)
}

func isVendor(name string) bool {
	for _, v := range vendorNames {
		if v == name {
			return true
		}
	}
	return false
}

// install puts a copy of this executable in dir as "mockagent" and links
// every vendor name to it, so putting dir first on PATH makes the mock
// answer for all of them. The copy keeps dir working after `go run`
// deletes its temporary binary. Existing links are replaced; other files
// are left alone and reported.
func install(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	target := filepath.Join(dir, "mockagent")
	if err := copyExecutable(self, target); err != nil {
		return err
	}
	for _, name := range vendorNames {
		link := filepath.Join(dir, name)
		if fi, err := os.Lstat(link); err == nil {
			if fi.Mode()&os.ModeSymlink == 0 {
				return fmt.Errorf("%s exists and is not a symlink; not replacing it", link)
			}
			if err := os.Remove(link); err != nil {
				return fmt.Errorf("replacing %s: %w", link, err)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("checking %s: %w", link, err)
		}
		// Relative, so the directory can be moved as a whole.
		if err := os.Symlink("mockagent", link); err != nil {
			return fmt.Errorf("linking %s: %w", link, err)
		}
	}
	return nil
}

// copyExecutable copies src to dst through a temporary file and a rename,
// so a running copy at dst is never truncated. Copying onto itself is a
// no-op.
func copyExecutable(src, dst string) (err error) {
	if a, errA := os.Stat(src); errA == nil {
		if b, errB := os.Stat(dst); errB == nil && os.SameFile(a, b) {
			return nil
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	defer func() { _ = in.Close() }()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".mockagent-*")
	if err != nil {
		return fmt.Errorf("copying to %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, in); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("copying to %s: %w", dst, err)
	}
	if err = tmp.Chmod(0o755); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("copying to %s: %w", dst, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("copying to %s: %w", dst, err)
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("copying to %s: %w", dst, err)
	}
	return nil
}
