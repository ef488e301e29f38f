package main

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
)

// agentPID reads the CLI's pid from the supervisor's "agent started" log.
func agentPID(t *testing.T, stderr []byte) int {
	t.Helper()
	return int(logRecord(t, stderr, "agent started")["pid"].(float64))
}

// assertGone checks that the CLI's whole process group is dead.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process group %d still exists (kill 0: %v)", pid, err)
	}
}

// TestRunDeadlineKillsAStubbornCLI: a CLI that ignores SIGTERM and never
// finishes is SIGKILLed after the grace, and the run exits 124.
func TestRunDeadlineKillsAStubbornCLI(t *testing.T) {
	t.Parallel()
	p := newPod(t, jobSpec(vendorModels["claude"], "mock:hang")).withNATS()
	p.env["MOCKAGENT_IGNORE_TERM"] = "1"
	p.env[runspec.EnvDeadlineMS] = "1500"
	p.env[runspec.EnvExitGraceMS] = "500"
	r := p.run("run")
	if r.code != 124 {
		t.Fatalf("exit %d, want 124", r.code)
	}
	assertGone(t, agentPID(t, r.stderr))
	evs := p.natsEvents()
	lc := evs[len(evs)-1].GetLifecycle()
	if lc.GetStatus() != "failed" || lc.GetReason() != "deadline" || lc.GetExitCode() != 124 {
		t.Fatalf("terminal event %v", lc)
	}
}

// TestRunForwardsSIGTERM: SIGTERM to the supervisor reaches the CLI's
// group; the CLI's death by signal becomes 128+n.
func TestRunForwardsSIGTERM(t *testing.T) {
	tests := []struct {
		name       string
		ignoreTerm bool
		code       int
	}{
		{name: "a CLI that honours SIGTERM dies of it", code: 128 + 15},
		{name: "a CLI that ignores SIGTERM is SIGKILLed after the grace", ignoreTerm: true, code: 128 + 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPod(t, jobSpec(vendorModels["codex"], "mock:hang")).withNATS()
			p.env[runspec.EnvExitGraceMS] = "500"
			if tt.ignoreTerm {
				p.env["MOCKAGENT_IGNORE_TERM"] = "1"
			}
			c, _, errb := p.start("run")
			waitFor(t, func() bool { return bytes.Contains(errb.Bytes(), []byte(`"msg":"agent started"`)) })
			// The mock must have installed its handler before the signal.
			time.Sleep(300 * time.Millisecond)
			if err := c.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			_ = c.Wait()
			if got := c.ProcessState.ExitCode(); got != tt.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", got, tt.code, errb.Bytes())
			}
			assertGone(t, agentPID(t, errb.Bytes()))
			evs := p.natsEvents()
			if lc := evs[len(evs)-1].GetLifecycle(); lc.GetReason() != "terminated" || lc.GetExitCode() != int32(tt.code) {
				t.Fatalf("terminal event %v", lc)
			}
		})
	}
}

// execSpec runs a shell script as the exec vendor; the rendered prompt is
// its last argument ($0 of the script).
func execSpec(script, prompt string) *runspec.Spec {
	return &runspec.Spec{Model: "exec", Command: []string{"sh", "-c", script}, Prompt: prompt, Execution: "job", PermissionMode: "auto"}
}

const resultLine = `{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s1"}`

// TestRunEchoesLinesVerbatim: odd lines (not JSON, unicode, spaces, an
// empty line, a last line without newline) reach stdout byte for byte.
func TestRunEchoesLinesVerbatim(t *testing.T) {
	t.Parallel()
	transcript := "plain text  \n\n{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"héllo ✓\"}]}}\n\t{\"type\":\"system\"}\n" + resultLine
	p := newPod(t, execSpec(`printf '%s' "$0"`, transcript))
	r := p.run("run")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	cliLines, own := stdoutEvents(t, r.stdout)
	if got := string(bytes.Join(cliLines, []byte("\n"))); got != transcript {
		t.Fatalf("stdout CLI lines:\n%q\nwant\n%q", got, transcript)
	}
	if len(own) != 2 {
		t.Fatalf("want 2 lifecycle lines, got %d", len(own))
	}
}

func TestRunFailsBeforeStart(t *testing.T) {
	tests := []struct {
		name   string
		spec   *runspec.Spec
		env    map[string]string
		code   int
		reason string
	}{
		{name: "exit 0 without a result line is a failure", spec: execSpec(`echo '{"type":"assistant"}'`, "x"), code: 1, reason: "no-result"},
		{name: "a CLI not on PATH exits 127", spec: execSpec("", "x"), env: map[string]string{"PATH": "/nonexistent"}, code: 127, reason: "not-found"},
		{name: "realtime without its token fails before serving", spec: &runspec.Spec{Model: "claude-x", Prompt: "p", Execution: "realtime"},
			env: map[string]string{realtime.EnvToken: ""}, code: 78, reason: "realtime-setup"},
		{name: "realtime with a vendor that cannot resume is a usage error", spec: &runspec.Spec{Model: "exec", Command: []string{"true"}, Prompt: "p", Execution: "realtime"},
			code: 2, reason: "spec"},
		{name: "a missing run spec is a usage error", code: 2, reason: "spec"},
		{name: "exec without a usable command is a usage error", spec: &runspec.Spec{Model: "exec", Command: []string{""}, Prompt: "p"}, code: 2, reason: "spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPod(t, tt.spec).withNATS()
			for k, v := range tt.env {
				p.env[k] = v
			}
			r := p.run("run")
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d", r.code, tt.code)
			}
			if !bytes.Contains(r.stderr, []byte("supervisor: "+tt.reason)) {
				t.Fatalf("stderr lacks the reason %q:\n%s", tt.reason, r.stderr)
			}
			evs := p.natsEvents()
			lc := evs[len(evs)-1].GetLifecycle()
			if lc.GetStatus() != "failed" || lc.GetReason() != tt.reason || lc.GetExitCode() != int32(tt.code) {
				t.Fatalf("terminal event %v", lc)
			}
		})
	}
}

// TestRunWatchFiles: output.watch files become file events after the CLI
// exited and before the terminal event; escaping paths give none.
func TestRunWatchFiles(t *testing.T) {
	t.Parallel()
	script := `mkdir -p out && printf '# report\n' > out/report.md && head -c 200000 /dev/zero > big.bin && echo '` + resultLine + `'`
	p := newPod(t, execSpec(script, "x")).withNATS()
	p.env[runspec.EnvWatch] = `[{"event":"report","path":"out/report.md"},{"event":"gone","path":"nope.md"},` +
		`{"event":"big","path":"big.bin"},{"event":"escape","path":"../../etc/passwd"},{"event":"abs","path":"/etc/hostname"}]`
	r := p.run("run")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	evs := p.natsEvents()
	var got []string
	for _, ev := range evs {
		if f := ev.GetFile(); f != nil {
			got = append(got, f.GetEvent()+":"+f.GetReason()+":"+f.GetContent())
		}
	}
	want := []string{"report::# report\n", "gone:missing:", "big:too-large:"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("file events %q, want %q", got, want)
	}
	n := len(evs)
	if evs[n-2].GetFile() == nil || lifecycle(evs[n-1]) != "agent/succeeded" {
		t.Fatal("file events must come right before the terminal event")
	}
	_, own := stdoutEvents(t, r.stdout)
	if len(own) != 5 {
		t.Fatalf("stdout has %d own lines, want started + 3 files + succeeded", len(own))
	}
}

// TestRunStderrIsForwarded: the CLI's stderr reaches ours, tagged, and a
// chatty stderr does not deadlock the run.
func TestRunStderrIsForwarded(t *testing.T) {
	t.Parallel()
	p := newPod(t, jobSpec(vendorModels["gemini"], "go"))
	p.env["MOCKAGENT_STDERR_LINES"] = "5000"
	r := p.run("run")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	if n := bytes.Count(r.stderr, []byte("[agent] mockagent: diagnostic line")); n != 5000 {
		t.Fatalf("%d stderr lines forwarded, want 5000", n)
	}
	if bytes.Contains(r.stdout, []byte("diagnostic line")) {
		t.Fatal("stderr leaked into the stdout event stream")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunReapsOrphansAsPID1: as PID 1 (here of a fresh PID namespace, as
// in a container) the supervisor reaps orphans the CLI leaves behind, so
// they do not pile up as zombies during a long run.
func TestRunReapsOrphansAsPID1(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot make a PID namespace here (needs root and unshare): %v %s", err, out)
	}
	script := `(sleep 0.1 &); sleep 0.6; ` +
		`z=$(cat /proc/[0-9]*/stat 2>/dev/null | awk '$3=="Z"' | wc -l); ` +
		`echo "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"zombies=$z pid1=$(cat /proc/1/comm)\"}]}}"; ` +
		`echo '` + resultLine + `'`
	p := newPod(t, execSpec(script, "x"))
	p.wrap = []string{"unshare", "--pid", "--fork", "--mount-proc"}
	r := p.run("run")
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	if !bytes.Contains(r.stdout, []byte("zombies=0 pid1=supervisor")) {
		t.Fatalf("orphan not reaped by PID 1:\n%s", r.stdout)
	}
}
