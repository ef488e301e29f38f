package stack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/tools/internal/proc"
)

// process is one control-plane component started detached from kubestack, so
// it outlives the `up` command; its PID is recorded for `down`.
type process struct {
	Name   string `json:"name"`
	Binary string `json:"binary"`
	PID    int    `json:"pid"`
	Log    string `json:"log"`

	// done closes when a process started by this kubestack exits; nil for
	// one read back from a state file.
	done chan struct{}
}

// start launches binary with args in its own session, output to logPath.
func start(name, binary, logPath string, args []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, binary, err)
	}
	p := &process{Name: name, Binary: binary, PID: cmd.Process.Pid, Log: logPath, done: make(chan struct{})}
	// Reap the child when it exits so alive() sees it gone, not a zombie.
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// alive reports whether the recorded PID still runs the recorded binary, so
// a reused PID is never signalled.
func (p *process) alive() bool {
	if p == nil || p.PID <= 0 {
		return false
	}
	if p.done != nil {
		select {
		case <-p.done:
			return false
		default:
			return true
		}
	}
	return proc.Alive(p.PID, p.Binary)
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs.
func (p *process) stop(grace time.Duration) {
	if !p.alive() {
		return
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !p.alive() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	for i := 0; i < 50 && p.alive(); i++ {
		time.Sleep(100 * time.Millisecond)
	}
}

// logTail returns the last lines of the process log, for error messages.
func (p *process) logTail(lines int) string {
	raw, err := os.ReadFile(p.Log)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// reportEvery is how often a wait for a component says it still waits.
const reportEvery = 10 * time.Second

// waitHealthy polls check until it succeeds, the process dies, or timeout.
// A dead process is reported with the tail of its log, never as a hang. It
// says on log what it waits for before the first check, and again with the
// last check's error at least every reportEvery until the check succeeds.
func waitHealthy(ctx context.Context, log io.Writer, p *process, what string, timeout time.Duration, check func(context.Context) error) error {
	return waitHealthyReporting(ctx, log, p, what, timeout, reportEvery, check)
}

func waitHealthyReporting(ctx context.Context, log io.Writer, p *process, what string, timeout, every time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	fmt.Fprintf(log, "kubestack: waiting for %s (up to %s)\n", what, timeout)
	report := time.NewTicker(every)
	defer report.Stop()
	var last error
	for {
		if !p.alive() {
			return fmt.Errorf("%s exited during startup; last log lines:\n%s", p.Name, p.logTail(15))
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy after %s: %w (log: %s)", p.Name, timeout, last, p.Log)
		case <-report.C:
			fmt.Fprintf(log, "kubestack: still waiting for %s: %v, %s\n", what, last, time.Since(start).Round(time.Second))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// httpOK returns a check that GETs url and wants 200.
func httpOK(url string, client *http.Client, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
		}
		return nil
	}
}

// tlsClient trusts only the stack's CA.
func tlsClient(caPEM []byte) (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("CA certificate is not valid PEM")
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}, nil
}

// checkPortFree fails with a clear message when host:port is already bound.
func checkPortFree(host string, port int, what string) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("port %d on %s (for %s) is taken: %w; stop what holds it or pick another port", port, host, what, err)
	}
	return l.Close()
}

// Describe renders one line per recorded process with whether it runs.
func Describe(st *State) []string {
	var out []string
	for _, p := range st.Processes {
		state := "stopped"
		if p.alive() {
			state = "running"
		}
		out = append(out, fmt.Sprintf("%-24s pid %-7d %-8s log %s", p.Name, p.PID, state, p.Log))
	}
	return out
}
