package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/vendors"
)

// bin is the mock built once for the package's tests, and binDir the
// directory install linked the vendor names into.
var bin, binDir string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "mockagent-test-")
		if err != nil {
			panic(err)
		}
		defer func() { _ = os.RemoveAll(dir) }()
		// The mock claude keeps transcripts under HOME: never the real one.
		if err := os.Setenv("HOME", filepath.Join(dir, "home")); err != nil {
			panic(err)
		}
		bin = filepath.Join(dir, "mockagent")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			_, _ = os.Stderr.Write(out)
			return 1
		}
		binDir = filepath.Join(dir, "bin")
		if out, err := exec.Command(bin, "install", binDir).CombinedOutput(); err != nil {
			_, _ = os.Stderr.Write(out)
			return 1
		}
		return m.Run()
	}())
}

// outcome is a mock run read back through the vendor's parser.
type outcome struct {
	exit      int
	bytes     int
	lines     int
	events    []vendors.Event
	parseErrs int
	session   string
	elapsed   time.Duration
	stderr    string
}

func (o outcome) count(k vendors.Kind, isError bool) int {
	n := 0
	for _, e := range o.events {
		if e.Kind == k && e.IsError == isError {
			n++
		}
	}
	return n
}

func (o outcome) result() (vendors.Event, bool) {
	for i := len(o.events) - 1; i >= 0; i-- {
		if o.events[i].Kind == vendors.KindResult {
			return o.events[i], true
		}
	}
	return vendors.Event{}, false
}

// runMock runs the argv a vendor builds for inv through the installed link
// with env added to a clean environment, and parses every line it prints.
func runMock(t *testing.T, vendor string, inv vendors.Invocation, env ...string) outcome {
	t.Helper()
	v, ok := vendors.ByName(vendor)
	if !ok {
		t.Fatalf("no vendor %s", vendor)
	}
	argv, err := v.Argv(inv)
	if err != nil {
		t.Fatal(err)
	}
	path := argv[0]
	if !filepath.IsAbs(path) {
		path = filepath.Join(binDir, path)
	}
	cmd := exec.Command(path, argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MOCKAGENT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var o outcome
	p := v.NewParser()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		o.lines++
		o.bytes += len(sc.Bytes()) + 1
		evs, err := p.Parse(sc.Bytes())
		if err != nil {
			o.parseErrs++
		}
		for _, e := range evs {
			e.ToolInput = append([]byte(nil), e.ToolInput...)
			o.events = append(o.events, e)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	o.elapsed = time.Since(start)
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		o.exit = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	o.session, o.stderr = p.SessionID(), stderr.String()
	return o
}

var mockVendors = []string{vendors.NameClaude, vendors.NameCodex, vendors.NameGemini, vendors.NameOpenCode}

// TestModes runs every mode under every vendor name and reads the output
// back with the vendor's parser from libs/vendors.
func TestModes(t *testing.T) {
	tests := []struct {
		name  string
		inv   vendors.Invocation
		env   []string
		check func(t *testing.T, o outcome)
	}{
		{"success has tool call and result pairs and a successful result", vendors.Invocation{Prompt: "fix it"}, nil,
			func(t *testing.T, o outcome) {
				r, ok := o.result()
				if o.exit != 0 || !ok || r.IsError || o.parseErrs != 0 {
					t.Errorf("exit %d, result %v %+v, parse errors %d", o.exit, ok, r, o.parseErrs)
				}
				if o.count(vendors.KindToolCall, false) != 2 || o.count(vendors.KindToolResult, false) != 1 ||
					o.count(vendors.KindToolResult, true) != 1 {
					t.Errorf("want 2 tool calls, 1 ok and 1 failed tool result; events %+v", o.events)
				}
				if o.session == "" {
					t.Error("no session id")
				}
			}},
		{"fail ends with an error result and exit 1", vendors.Invocation{Prompt: "mock:fail please"}, nil,
			func(t *testing.T, o outcome) {
				if r, ok := o.result(); o.exit != 1 || !ok || !r.IsError {
					t.Errorf("exit %d, result %v %+v", o.exit, ok, r)
				}
			}},
		{"MOCKAGENT_EXIT sets the failing exit code", vendors.Invocation{Prompt: "x"}, []string{"MOCKAGENT_MODE=fail", "MOCKAGENT_EXIT=7"},
			func(t *testing.T, o outcome) {
				if o.exit != 7 {
					t.Errorf("exit %d, want 7", o.exit)
				}
			}},
		{"crash exits 2 without a result", vendors.Invocation{Prompt: "mock:crash"}, nil,
			func(t *testing.T, o outcome) {
				if _, ok := o.result(); o.exit != 2 || ok || o.lines == 0 {
					t.Errorf("exit %d, result %v, lines %d", o.exit, ok, o.lines)
				}
			}},
		{"slow sleeps MOCKAGENT_DELAY after each line", vendors.Invocation{Prompt: "mock:slow"}, []string{"MOCKAGENT_DELAY=20ms"},
			func(t *testing.T, o outcome) {
				// A lower bound only: sleeps never end early.
				if min := time.Duration(o.lines) * 20 * time.Millisecond; o.elapsed < min || o.exit != 0 {
					t.Errorf("%d lines took %v, want at least %v; exit %d", o.lines, o.elapsed, min, o.exit)
				}
			}},
		{"big prints at least 10 MiB and still succeeds", vendors.Invocation{Prompt: "mock:big"}, nil,
			func(t *testing.T, o outcome) {
				if r, ok := o.result(); o.bytes < 10<<20 || !ok || r.IsError || o.parseErrs != 0 {
					t.Errorf("bytes %d, result %v %+v, parse errors %d", o.bytes, ok, r, o.parseErrs)
				}
			}},
		{"malformed prints two bad lines the parser counts, then succeeds", vendors.Invocation{Prompt: "mock:malformed"}, nil,
			func(t *testing.T, o outcome) {
				if r, ok := o.result(); o.parseErrs != 2 || !ok || r.IsError || o.exit != 0 {
					t.Errorf("parse errors %d, result %v %+v, exit %d", o.parseErrs, ok, r, o.exit)
				}
			}},
		{"resume without a prompt reports the resumed session id", vendors.Invocation{ResumeID: "sess-resume-1"}, nil,
			func(t *testing.T, o outcome) {
				if r, ok := o.result(); o.session != "sess-resume-1" || !ok || r.IsError || o.exit != 0 {
					t.Errorf("session %q, result %v %+v, exit %d", o.session, ok, r, o.exit)
				}
			}},
		{"resume with a prompt keeps the session id", vendors.Invocation{Prompt: "go on", ResumeID: "sess-resume-2"}, nil,
			func(t *testing.T, o outcome) {
				if r, ok := o.result(); o.session != "sess-resume-2" || !ok || r.IsError {
					t.Errorf("session %q, result %v %+v", o.session, ok, r)
				}
			}},
		{"prompt directive wins over MOCKAGENT_MODE", vendors.Invocation{Prompt: "mock:success"}, []string{"MOCKAGENT_MODE=fail"},
			func(t *testing.T, o outcome) {
				if o.exit != 0 {
					t.Errorf("exit %d, want 0", o.exit)
				}
			}},
		{"MOCKAGENT_SESSION fixes a new session's id", vendors.Invocation{Prompt: "x"}, []string{"MOCKAGENT_SESSION=fixed-id"},
			func(t *testing.T, o outcome) {
				if o.session != "fixed-id" {
					t.Errorf("session %q", o.session)
				}
			}},
		{"stderr lines are printed alongside the events", vendors.Invocation{Prompt: "x"}, []string{"MOCKAGENT_STDERR_LINES=3"},
			func(t *testing.T, o outcome) {
				if o.exit != 0 || strings.Count(o.stderr, "diagnostic line") != 3 {
					t.Errorf("exit %d, stderr %q", o.exit, o.stderr)
				}
			}},
		{"hang stops after MOCKAGENT_DELAY without a result", vendors.Invocation{Prompt: "mock:hang"}, []string{"MOCKAGENT_DELAY=10ms"},
			func(t *testing.T, o outcome) {
				if _, ok := o.result(); ok || o.lines == 0 {
					t.Errorf("result %v, lines %d", ok, o.lines)
				}
			}},
		{"linger prints its result, then stays for MOCKAGENT_DELAY", vendors.Invocation{Prompt: "mock:linger"}, []string{"MOCKAGENT_DELAY=10ms"},
			func(t *testing.T, o outcome) {
				if r, ok := o.result(); !ok || r.IsError || o.exit != 0 || o.elapsed < 10*time.Millisecond {
					t.Errorf("result %v %+v, exit %d, elapsed %v", ok, r, o.exit, o.elapsed)
				}
			}},
		{"unknown mode is refused with exit 2", vendors.Invocation{Prompt: "mock:nonsense"}, nil,
			func(t *testing.T, o outcome) {
				if o.exit != 2 || !strings.Contains(o.stderr, "unknown mode") {
					t.Errorf("exit %d, stderr %q", o.exit, o.stderr)
				}
			}},
	}
	for _, tt := range tests {
		for _, vendor := range mockVendors {
			t.Run(tt.name+"/"+vendor, func(t *testing.T) {
				tt.check(t, runMock(t, vendor, tt.inv, tt.env...))
			})
		}
	}
}

// TestRefusesWrongArgv checks that the mock, like the real CLIs, refuses a
// command line missing what the CLI insists on.
func TestRefusesWrongArgv(t *testing.T) {
	tests := []struct {
		name string
		argv []string
	}{
		{"claude stream-json needs --verbose", []string{"claude", "--print", "--output-format", "stream-json", "--", "x"}},
		{"claude resume with session-id needs fork-session", []string{"claude", "--print", "--verbose", "--output-format", "stream-json", "--resume", "a", "--session-id", "b", "--", "x"}},
		{"codex needs exec", []string{"codex", "--json", "x"}},
		{"codex needs --json", []string{"codex", "exec", "x"}},
		{"gemini needs stream-json", []string{"gemini", "--prompt=x"}},
		{"opencode needs --format json", []string{"opencode", "run", "x"}},
		{"a prompt or a resume is required", []string{"claude", "--print", "--verbose", "--output-format", "stream-json"}},
		{"an unknown name needs --vendor", []string{"mockagent", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(binDir, tt.argv[0])
			if tt.argv[0] == "mockagent" {
				path = bin
			}
			err := exec.Command(path, tt.argv[1:]...).Run()
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
				t.Errorf("err = %v, want exit 2", err)
			}
		})
	}
}

// TestExecVendor checks that the mock serves as an exec vendor program:
// tool_config.command runs it as claude, and the exec parser reads it.
func TestExecVendor(t *testing.T) {
	inv := vendors.Invocation{Model: "exec", Prompt: "-leading dash prompt",
		ExecCommand: []string{bin, "--vendor", "claude", "--print", "--verbose", "--output-format", "stream-json", "--"}}
	o := runMock(t, vendors.NameExec, inv)
	if r, ok := o.result(); o.exit != 0 || !ok || r.IsError || r.Vendor != vendors.NameExec || o.parseErrs != 0 {
		t.Errorf("exit %d, result %v %+v, parse errors %d, stderr %s", o.exit, ok, r, o.parseErrs, o.stderr)
	}
}

// TestIgnoreTerm checks that MOCKAGENT_IGNORE_TERM leaves only SIGKILL to
// stop a hanging mock, the case a supervisor's escalation must handle.
func TestIgnoreTerm(t *testing.T) {
	cmd := exec.Command(filepath.Join(binDir, "claude"), "--print", "--verbose", "--output-format", "stream-json", "--", "mock:hang")
	cmd.Env = append(os.Environ(), "MOCKAGENT_IGNORE_TERM=1", "MOCKAGENT_DELAY=30s")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first line means the signal disposition is set.
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("mock exited on SIGTERM: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	_ = cmd.Process.Kill()
	if err := <-exited; err == nil {
		t.Error("killed mock reported success")
	}
}

// TestVendorFlag checks that --vendor picks the CLI whatever the mock is called.
func TestVendorFlag(t *testing.T) {
	out, err := exec.Command(bin, "--vendor", "codex", "exec", "--json", "--", "hi").Output()
	if err != nil || !bytes.HasPrefix(out, []byte(`{"type":"thread.started"`)) {
		t.Errorf("err %v, output %.80s", err, out)
	}
}

// TestInstall checks the PATH helper.
func TestInstall(t *testing.T) {
	t.Run("copies the mock and links every vendor name to the copy", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "new", "bin")
		if out, err := exec.Command(bin, "install", dir).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		want := filepath.Join(dir, "mockagent")
		for _, name := range vendorNames {
			got, err := filepath.EvalSymlinks(filepath.Join(dir, name))
			if err != nil || got != want {
				t.Errorf("%s -> %q (%v), want %q", name, got, err, want)
			}
		}
	})
	t.Run("replaces existing links, so it can be run again", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Symlink("/nonexistent", filepath.Join(dir, "claude")); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, "install", dir).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if got, err := filepath.EvalSymlinks(filepath.Join(dir, "claude")); err != nil || filepath.Base(got) != "mockagent" {
			t.Errorf("claude -> %q (%v)", got, err)
		}
	})
	t.Run("installing from the installed copy keeps it", func(t *testing.T) {
		dir := t.TempDir()
		for i := 0; i < 2; i++ {
			if out, err := exec.Command(bin, "install", dir).CombinedOutput(); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			bin := filepath.Join(dir, "mockagent")
			if out, err := exec.Command(bin, "install", dir).CombinedOutput(); err != nil {
				t.Fatalf("reinstalling from the copy: %v: %s", err, out)
			}
		}
		if out, err := exec.Command(filepath.Join(dir, "codex"), "exec", "--json", "--", "x").Output(); err != nil || len(out) == 0 {
			t.Errorf("codex link: %v", err)
		}
	})
	t.Run("refuses to replace a regular file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "gemini"), []byte("real"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := exec.Command(bin, "install", dir).Run(); err == nil {
			t.Error("install replaced a regular file")
		}
	})
	t.Run("the links answer on PATH", func(t *testing.T) {
		t.Setenv("PATH", binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := exec.Command("gemini", "--output-format", "stream-json", "--prompt=hi").Output()
		if err != nil || !bytes.HasPrefix(out, []byte(`{"type":"init"`)) {
			t.Errorf("err %v, output %.80s", err, out)
		}
	})
}

// TestClaudeKeepsSessionTranscripts: the mock claude appends each prompt to
// $HOME/.claude/projects/<project>/<session>.jsonl, the project named
// after the working directory; a resume appends to the same transcript,
// and a fork starts the pinned session's transcript with a copy of the
// resumed one's. The other vendors write nothing under HOME.
func TestClaudeKeepsSessionTranscripts(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	project := filepath.Join(home, ".claude", "projects", projectName(work))
	claude := func(args ...string) {
		t.Helper()
		argv := append([]string{"--print", "--verbose", "--output-format", "stream-json"}, args...)
		cmd := exec.Command(filepath.Join(binDir, "claude"), argv...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "HOME="+home)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("claude %q: %v\n%s", args, err, out)
		}
	}
	prompts := func(session string) []string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(project, session+".jsonl"))
		if err != nil {
			t.Fatalf("transcript of %s: %v", session, err)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m struct {
				Message struct{ Content string }
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("transcript line %q: %v", line, err)
			}
			got = append(got, m.Message.Content)
		}
		return got
	}

	claude("--session-id", "sess-a", "--", "first")
	claude("--resume", "sess-a", "--", "second")
	if got := prompts("sess-a"); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("sess-a holds %q, want both prompts in order", got)
	}
	claude("--resume", "sess-a", "--fork-session", "--session-id", "sess-b", "--", "third")
	if got := prompts("sess-b"); !slices.Equal(got, []string{"first", "second", "third"}) {
		t.Fatalf("the fork sess-b holds %q, want sess-a's prompts then its own", got)
	}
	if got := prompts("sess-a"); len(got) != 2 {
		t.Fatalf("the fork changed sess-a: %q", got)
	}

	other := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "codex"), "exec", "--json", "--", "x")
	cmd.Env = append(os.Environ(), "HOME="+other)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Fatalf("codex wrote under HOME: %v", entries)
	}
}

// projectName is Claude Code's project name for a working directory.
func projectName(dir string) string {
	var b strings.Builder
	for _, r := range dir {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}
