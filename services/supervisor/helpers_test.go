package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/lockedio"
	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks/sinkstest"
	"github.com/agentplane/agentplane/libs/testbin"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Binaries built once for every test: the supervisor itself and the
// mock vendor CLIs, linked under each vendor's name in mockDir.
var (
	supervisorBin string
	mockDir       string
)

// runTimeout bounds every supervisor a test starts; a hang fails the
// test instead of the CI job.
const runTimeout = 2 * time.Minute

func TestMain(m *testing.M) {
	testbin.Main("supervisor-test-", func(dir string) int {
		supervisorBin = filepath.Join(dir, "supervisor")
		mockDir = filepath.Join(dir, "mock")
		self := []string{"build", "-o", supervisorBin, "."}
		if os.Getenv("SUPERVISOR_TEST_RACE") != "" {
			// The supervisor's own goroutines under the race detector.
			self = []string{"build", "-race", "-o", supervisorBin, "."}
		}
		if err := testbin.Build(self, testbin.MockAgent("../../tools", dir)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := testbin.InstallMocks(dir, mockDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	})
}

// pod is one simulated run pod: its volumes and environment.
type pod struct {
	t         *testing.T
	agentDir  string
	workspace string
	env       map[string]string
	nats      *eventstest.Server
	// wrap runs the supervisor through another program (e.g. unshare).
	wrap []string
}

func newPod(t *testing.T, spec *runspec.Spec) *pod {
	t.Helper()
	p := &pod{t: t, agentDir: t.TempDir(), workspace: t.TempDir(), env: map[string]string{}}
	p.env["PATH"] = mockDir + ":/usr/local/bin:/usr/bin:/bin"
	p.env[runspec.EnvHome] = p.agentDir
	p.env[runspec.EnvWorkspaceDir] = p.workspace
	p.env[runspec.EnvAgentName] = "agent-" + strings.ToLower(strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
	p.env[runspec.EnvAgentNamespace] = "team-a"
	p.env[runspec.EnvAgentUID] = "uid-" + fmt.Sprint(time.Now().UnixNano())
	p.env[runspec.EnvStationName] = "station-1"
	p.env[runspec.EnvPodName] = "agent-job-" + p.env[runspec.EnvAgentName][len("agent-"):] + "-x7k2p"
	p.env["SUPERVISOR_CHOWN"] = noChown
	// Never the host's /dev/termination-log (localnode's host mode leaves
	// one as a mount point): a file nobody created, so nothing is written.
	p.env["SUPERVISOR_TERMINATION_LOG"] = filepath.Join(t.TempDir(), "termination-log")
	if spec != nil {
		p.setSpec(spec)
	}
	return p
}

func (p *pod) setSpec(spec *runspec.Spec) {
	p.t.Helper()
	s, err := runspec.Encode(spec)
	if err != nil {
		p.t.Fatal(err)
	}
	p.env[runspec.EnvName] = s
}

// withNATS starts an embedded JetStream server for the pod.
func (p *pod) withNATS() *pod {
	p.nats = eventstest.Start(p.t)
	p.env[runspec.EnvNATSURLOverride] = p.nats.URL()
	return p
}

// withSecuredNATS starts an embedded JetStream server that admits only
// credentials of a fresh authority, creates the event stream with the
// platform's own credential (as agent-controller does), and gives the pod
// the run's own credential the way the controller mounts it.
func (p *pod) withSecuredNATS() *pod {
	p.t.Helper()
	auth, err := natsauth.NewAuthority()
	if err != nil {
		p.t.Fatal(err)
	}
	p.nats = eventstest.StartSecured(p.t, auth)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := events.EnsureStream(ctx, p.nats.JetStream(), events.StreamConfig(0, 0, 0)); err != nil {
		p.t.Fatal(err)
	}
	run := natsauth.Run{Namespace: p.env[runspec.EnvAgentNamespace], Agent: p.env[runspec.EnvAgentName], UID: p.env[runspec.EnvAgentUID]}
	creds, err := auth.Issuer().RunCredentials(run, time.Now().Add(time.Hour))
	if err != nil {
		p.t.Fatal(err)
	}
	p.env[runspec.EnvNATSURL] = p.nats.URL()
	p.env[runspec.EnvNATSCreds] = string(creds)
	return p
}

// result is what one supervisor process did.
type result struct {
	code           int
	stdout, stderr []byte
	elapsed        time.Duration
}

// start runs `supervisor <cmd>` without waiting.
func (p *pod) start(cmd string) (*exec.Cmd, *lockedio.Buffer, *lockedio.Buffer) {
	p.t.Helper()
	c := p.command(cmd)
	out, errb := &lockedio.Buffer{}, &lockedio.Buffer{}
	c.Stdout, c.Stderr = out, errb
	if err := c.Start(); err != nil {
		p.t.Fatal(err)
	}
	return c, out, errb
}

// startToFile starts `supervisor <cmd>` with its stdout on a file, and
// returns a reader of that file. A buffer fills from a pipe through a
// goroutine of the test's, so what it holds lags what the supervisor has
// written; a file holds every write once the write returns, which is what
// a test of the order between stdout and another side effect needs.
func (p *pod) startToFile(cmd string) (*exec.Cmd, func() []byte, *lockedio.Buffer) {
	p.t.Helper()
	c := p.command(cmd)
	f, err := os.CreateTemp(p.t.TempDir(), "stdout")
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = f.Close() })
	errb := &lockedio.Buffer{}
	c.Stdout, c.Stderr = f, errb
	if err := c.Start(); err != nil {
		p.t.Fatal(err)
	}
	read := func() []byte {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			p.t.Errorf("reading the supervisor's stdout: %v", err)
		}
		return b
	}
	return c, read, errb
}

// command is `supervisor <cmd>` in the pod's environment, bounded by
// runTimeout.
func (p *pod) command(cmd string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	p.t.Cleanup(cancel)
	argv := append(append([]string(nil), p.wrap...), supervisorBin, cmd, "--supervisor-agent-dir", p.agentDir)
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	for k, v := range p.env {
		c.Env = append(c.Env, k+"="+v)
	}
	return c
}

// run runs `supervisor <cmd>` to the end.
func (p *pod) run(cmd string) result {
	p.t.Helper()
	began := time.Now()
	c, out, errb := p.start(cmd)
	_ = c.Wait()
	r := result{code: c.ProcessState.ExitCode(), stdout: out.Bytes(), stderr: errb.Bytes(), elapsed: time.Since(began)}
	checkLogLines(p.t, r.stderr)
	if p.t.Failed() || testing.Verbose() {
		p.t.Logf("supervisor %s exited %d after %v; stderr:\n%s", cmd, r.code, r.elapsed, lastBytes(r.stderr, 4000))
	}
	return r
}

// checkLogLines holds every JSON log line of a supervisor run to the log
// rules: each key once per line (a log shipper keeps only one of two), and
// errors under "err", never "error".
func checkLogLines(t *testing.T, stderr []byte) {
	t.Helper()
	for _, line := range bytes.Split(stderr, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("{")) {
			continue // the CLI's own stderr, prefixed "[agent] "
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Errorf("log line is not a JSON object: %s", line)
			continue
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Errorf("log line does not parse: %v: %s", err, line)
				break
			}
			key, _ := tok.(string)
			if seen[key] {
				t.Errorf("log line repeats the key %q: %s", key, line)
			}
			seen[key] = true
			if key == "error" {
				t.Errorf(`log line has an "error" key; errors go under "err": %s`, line)
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Errorf("log line does not parse: %v: %s", err, line)
				break
			}
		}
	}
}

// natsEvents returns the pod's events stored in JetStream, in stream order.
func (p *pod) natsEvents() []*eventsv1.RunEvent {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := events.ReadAll(ctx, p.nats.JetStream(), events.Filter{Namespace: p.env[runspec.EnvAgentNamespace], Agent: p.env[runspec.EnvAgentName]})
	if err != nil {
		p.t.Fatalf("read events: %v", err)
	}
	return evs
}

// checkStream asserts that evs is one run's stream stored exactly once
// and in order: sequences from..from+n-1, unique ids.
func checkStream(t *testing.T, evs []*eventsv1.RunEvent, from uint64) {
	t.Helper()
	seen := map[string]bool{}
	for i, ev := range evs {
		if want := from + uint64(i); ev.GetSequence() != want {
			t.Fatalf("event %d has sequence %d, want %d (stored out of order or twice)", i, ev.GetSequence(), want)
		}
		if seen[ev.GetId()] {
			t.Fatalf("event id %s stored twice", ev.GetId())
		}
		seen[ev.GetId()] = true
	}
}

// lifecycle returns "phase/status" of a lifecycle event, "" otherwise.
func lifecycle(ev *eventsv1.RunEvent) string {
	if lc := ev.GetLifecycle(); lc != nil {
		return lc.GetPhase() + "/" + lc.GetStatus()
	}
	return ""
}

// kinds counts events by kind token.
func kinds(evs []*eventsv1.RunEvent) map[string]int {
	m := map[string]int{}
	for _, ev := range evs {
		m[ev.GetKind().SubjectToken()]++
	}
	return m
}

// stdoutEvents splits the supervisor's stdout into the CLI's lines and
// the lifecycle and file events it printed itself (their event objects,
// read back into RunEvents).
func stdoutEvents(t *testing.T, out []byte) (cli [][]byte, own []*eventsv1.RunEvent) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 32<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		if ev, ok := ownEvent(t, line); ok {
			own = append(own, ev)
			continue
		}
		cli = append(cli, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cli, own
}

// eventObject is the documented event object of the run's own events
// (docs/events.md), as a receiver reads it.
type eventObject struct {
	Kind     string `json:"kind"`
	Phase    string `json:"phase"`
	Status   string `json:"status"`
	Tool     string `json:"tool"`
	Reason   string `json:"reason"`
	ExitCode *int32 `json:"exitCode"`
	Message  string `json:"message"`
	Event    string `json:"event"`
	Path     string `json:"path"`
	Content  string `json:"content"`
}

// ownEvent reads a line the supervisor printed for its own lifecycle or
// file event.
func ownEvent(t *testing.T, line []byte) (*eventsv1.RunEvent, bool) {
	t.Helper()
	if !bytes.HasPrefix(line, []byte(`{"kind":"lifecycle"`)) && !bytes.HasPrefix(line, []byte(`{"kind":"file"`)) {
		return nil, false
	}
	var o eventObject
	if err := json.Unmarshal(line, &o); err != nil {
		t.Fatalf("own event on stdout does not decode: %v", err)
	}
	if o.Kind == "file" {
		return &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_FILE, Payload: &eventsv1.RunEvent_File{File: &eventsv1.FileEvent{
			Event: o.Event, Path: o.Path, Content: o.Content, Reason: o.Reason}}}, true
	}
	return &eventsv1.RunEvent{Kind: eventsv1.EventKind_EVENT_KIND_LIFECYCLE, Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{
		Phase: o.Phase, Status: o.Status, Tool: o.Tool, Reason: o.Reason, ExitCode: o.ExitCode, Message: o.Message}}}, true
}

// payload is one sink payload as a receiver written against
// docs/events.md reads it.
type payload struct {
	Source struct {
		Agent, Station, Task, Pod, Namespace, UID string
	} `json:"source"`
	Event    json.RawMessage `json:"event"`
	ID       string          `json:"id"`
	Sequence uint64          `json:"sequence"`
}

// kind is the payload's event kind: lifecycle, file or batch for the run's
// own events, "line" for a CLI line.
func (p payload) kind() string {
	var o struct{ Kind string }
	if json.Unmarshal(p.Event, &o) == nil && (o.Kind == "lifecycle" || o.Kind == "file" || o.Kind == "batch") {
		return o.Kind
	}
	return "line"
}

// readFileSink reads a file sink's payloads, each checked against the
// published schema.
func readFileSink(t *testing.T, path string) []payload {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []payload
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 32<<20)
	for sc.Scan() {
		sinkstest.Check(t, sc.Bytes())
		var p payload
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("file sink line %q: %v", strings.TrimSpace(sc.Text())[:min(80, len(sc.Text()))], err)
		}
		out = append(out, p)
	}
	return out
}

// lineKinds returns the kinds of the events of the CLI line whose first
// event has id, from the NATS stream.
func lineKinds(evs []*eventsv1.RunEvent, id string) []string {
	for i, ev := range evs {
		if ev.GetId() != id {
			continue
		}
		out := []string{ev.GetKind().SubjectToken()}
		for _, next := range evs[i+1:] {
			if len(next.GetRaw()) > 0 || !events.IsCLIEvent(next) {
				break
			}
			out = append(out, next.GetKind().SubjectToken())
		}
		return out
	}
	return nil
}

// logRecord finds the supervisor's JSON log line with msg.
func logRecord(t *testing.T, stderr []byte, msg string) map[string]any {
	t.Helper()
	for _, line := range bytes.Split(stderr, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["msg"] == msg {
			return m
		}
	}
	t.Fatalf("no log line %q in:\n%s", msg, lastBytes(stderr, 4000))
	return nil
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func mustWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
