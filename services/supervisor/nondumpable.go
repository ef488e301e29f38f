package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// exitDumpable is the exit code of `supervisor init` and `supervisor run`
// when they cannot make themselves non-dumpable (EX_OSERR): the run does
// not go on with its secrets readable by the CLI.
const exitDumpable = 71

// nonDumpable makes the supervisor non-dumpable (prctl(2)
// PR_SET_DUMPABLE). Why: the vendor CLI is the supervisor's child under
// the same uid (the run pod meets Pod Security "restricted", which drops
// CAP_SETUID, so the CLI cannot run under another uid), and a process of
// the same uid may otherwise read /proc/<pid>/environ (the run's NATS
// credential, a realtime run's token, sink and conversation store header
// secrets), open /proc/<pid>/mem or ptrace the supervisor. The /proc/<pid>
// files of a non-dumpable process belong to root, and the kernel's ptrace
// access check refuses every caller of another process without
// CAP_SYS_PTRACE (proc(5), ptrace(2)). The CLI is dumpable again: execve
// resets the flag. docs/security.md describes the control and its test.
// The supervisor is Linux-only (its CLI child also relies on Pdeathsig).
func nonDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
