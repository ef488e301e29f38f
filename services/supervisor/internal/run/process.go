package run

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is the vendor CLI, started as the leader of its own process group
// so that signals reach every process it spawned (shells, tools, MCP
// servers), not just the CLI.
type child struct {
	cmd    *exec.Cmd
	stdout *os.File // read ends; the write ends belong to the child only
	stderr *os.File
	exited chan struct{}
	status syscall.WaitStatus // set before exited is closed
}

// start runs argv with stdin on /dev/null and stdout/stderr on pipes. The
// pipes are plain *os.File so exec does not copy them through goroutines
// of its own: the process is reaped when it exits, even if a grandchild
// still holds a pipe open, and the readers stay ours to stop.
func start(path string, argv, env []string, dir string) (*child, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = outR.Close()
		_ = outW.Close()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path: path, Args: argv, Env: env, Dir: dir,
		Stdout: outW, Stderr: errW, // Stdin nil is /dev/null
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid: true,
			// If the supervisor itself is killed, the CLI must not run on
			// unsupervised.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	err = cmd.Start()
	_ = outW.Close()
	_ = errW.Close()
	if err != nil {
		_ = outR.Close()
		_ = errR.Close()
		return nil, err
	}
	c := &child{cmd: cmd, stdout: outR, stderr: errR, exited: make(chan struct{})}
	go c.wait(os.Getpid() == 1)
	return c, nil
}

// wait reaps the CLI and records its status. As PID 1 of a container the
// supervisor also inherits every orphan (a tool that daemonised, a
// grandchild whose parent died); nobody else will reap them, so as PID 1
// it reaps any child, keeps the CLI's status, and goes on reaping the
// rest until none is left. cmd.Wait is not used: its wait would race
// with the reaper for the CLI's status.
func (c *child) wait(reapAll bool) {
	pid := c.cmd.Process.Pid
	target := pid
	if reapAll {
		target = -1
	}
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(target, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			// ECHILD: the CLI is gone and was reaped elsewhere; report a
			// failure rather than hang.
			c.status = syscall.WaitStatus(1 << 8)
			close(c.exited)
			return
		}
		if got == pid {
			c.status = ws
			close(c.exited)
			if reapAll {
				go reapOrphans()
			}
			return
		}
	}
}

// reapOrphans reaps whatever children are left until there are none.
func reapOrphans() {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return
		}
	}
}

// signal sends sig to the whole process group. A group that is already
// gone is not an error.
func (c *child) signal(sig syscall.Signal) {
	if err := syscall.Kill(-c.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = c.cmd.Process.Signal(sig) // at least the CLI itself
	}
}

// stop sends SIGTERM to the group, waits up to grace for the CLI to exit,
// then SIGKILLs the group. It reports whether SIGKILL was needed.
func (c *child) stop(grace time.Duration) bool {
	c.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.exited:
		// The CLI is gone; whatever it left behind in its group goes too.
		c.signal(syscall.SIGKILL)
		return false
	case <-t.C:
	}
	c.signal(syscall.SIGKILL)
	<-c.exited // SIGKILL cannot be ignored
	return true
}

// exitCode is the CLI's exit code; a death by signal n is 128+n, as a
// shell reports it.
func (c *child) exitCode() int {
	if c.status.Signaled() {
		return 128 + int(c.status.Signal())
	}
	return c.status.ExitStatus()
}
