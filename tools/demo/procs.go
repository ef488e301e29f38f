package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	procutil "github.com/agentplane/agentplane/tools/internal/proc"
)

// proc is a background process the demo started and `down` stops.
type proc struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	Bin  string `json:"bin"`
	Log  string `json:"log"`
}

// spawn starts bin detached (own session), output to logs/<name>.log, and
// records it in the state file.
func spawn(state, name, bin string, args []string, env []string) (*proc, error) {
	logPath := filepath.Join(state, "logs", name+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	defer func() { _ = f.Close() }()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	p := &proc{Name: name, PID: cmd.Process.Pid, Bin: bin, Log: logPath}
	procs, _ := readProcs(state)
	procs = append(procs, p)
	return p, writeProcs(state, procs)
}

func procsFile(state string) string { return filepath.Join(state, "procs.json") }

func readProcs(state string) ([]*proc, error) {
	raw, err := os.ReadFile(procsFile(state))
	if err != nil {
		return nil, err
	}
	var ps []*proc
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, fmt.Errorf("corrupt %s: %w", procsFile(state), err)
	}
	return ps, nil
}

func writeProcs(state string, ps []*proc) error {
	raw, err := json.MarshalIndent(ps, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(procsFile(state), raw, 0o644)
}

// alive reports whether the PID still runs the recorded binary.
func (p *proc) alive() bool { return procutil.Alive(p.PID, p.Bin) }

func (p *proc) stop() {
	if !p.alive() {
		return
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	for i := 0; i < 100 && p.alive(); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if p.alive() {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
}

// stopAll stops every recorded process, newest first, and forgets them.
func stopAll(state string) error {
	ps, err := readProcs(state)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for i := len(ps) - 1; i >= 0; i-- {
		ps[i].stop()
	}
	return os.Remove(procsFile(state))
}
