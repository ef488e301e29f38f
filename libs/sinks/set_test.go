package sinks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/sinks/sinkstest"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

const generous = 60 * time.Second

// recorder is a Sink that remembers what it got.
type recorder struct {
	mu  sync.Mutex
	got []*eventsv1.RunEvent
}

func (r *recorder) Deliver(_ context.Context, ev *eventsv1.RunEvent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, ev)
	return nil
}
func (r *recorder) Close(context.Context) error { return nil }
func (r *recorder) len() int                    { r.mu.Lock(); defer r.mu.Unlock(); return len(r.got) }

// payloads is a PayloadSink that remembers what it got.
type payloads struct {
	mu  sync.Mutex
	got [][]byte
}

func (p *payloads) DeliverPayload(_ context.Context, b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, bytes.Clone(b))
	return nil
}
func (p *payloads) Close(context.Context) error { return nil }

func closeSet(t *testing.T, s *Set) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestSlowSinkStallsNeitherCallerNorOthers(t *testing.T) {
	// A real http endpoint that hangs: the sink is slow, not failing.
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer slow.Close()
	defer close(release)
	h, err := NewHTTP(HTTPOptions{URL: slow.URL, Retry: fastRetry, Timeout: generous})
	if err != nil {
		t.Fatal(err)
	}
	fast := &recorder{}
	const queue, n = 4, 100
	set := NewSet([]Member{{Name: "slow", Payloads: h}, {Name: "fast", Sink: fast, QueueSize: n}}, SetOptions{QueueSize: queue})
	for range n { // would hang here if the slow sink stalled the caller
		_ = set.Deliver(context.Background(), stamped())
	}
	// The fast sink gets everything while the slow one is still stuck.
	deadline := time.Now().Add(generous)
	for fast.len() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if fast.len() != n {
		t.Fatalf("fast sink got %d of %d", fast.len(), n)
	}
	st := set.Stats()
	// One in flight plus a full queue at most; the rest counted as drops.
	if st[0].Dropped < n-queue-1 || st[1].Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := set.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("close with a stuck sink: %v", err)
	}
}

func TestSetAppliesSelectToPayloadSinksOnly(t *testing.T) {
	gated, all := &payloads{}, &recorder{}
	set := NewSet([]Member{{Name: "gated", Payloads: gated}, {Name: "all", Sink: all}},
		SetOptions{Select: Select{{Event: "result"}}})
	for _, ev := range []*eventsv1.RunEvent{lifecycle(), msg("assistant", "x"), rawLine(), result("ok"), fileEvent()} {
		_ = set.Deliver(context.Background(), ev)
	}
	closeSet(t, set)
	if len(gated.got) != 3 || all.len() != 5 {
		t.Fatalf("gated got %d (want lifecycle, result, file), event sink got %d of 5", len(gated.got), all.len())
	}
	for _, p := range gated.got {
		sinkstest.Check(t, p)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(set)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

func TestSetDeliversInOrderPerSink(t *testing.T) {
	rec := &recorder{}
	set := NewSet([]Member{{Name: "r", Sink: rec}}, SetOptions{QueueSize: 1000})
	run := events.NewRun(&eventsv1.RunIdentity{Uid: "u"})
	for range 500 {
		_ = set.Deliver(context.Background(), run.Stamp(msg("assistant", "x")))
	}
	closeSet(t, set) // Close flushes the queue
	for i, ev := range rec.got {
		if ev.GetSequence() != uint64(i+1) {
			t.Fatalf("event %d has sequence %d", i, ev.GetSequence())
		}
	}
	if len(rec.got) != 500 {
		t.Fatalf("got %d", len(rec.got))
	}
}

func TestFileSinkAppendsOneJSONObjectPerLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, []byte("existing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := NewFile(path)
	run := events.NewRun(&eventsv1.RunIdentity{Uid: "u"})
	for _, ev := range []*eventsv1.RunEvent{msg("assistant", "multi\nline"), lifecycle()} {
		if err := f.DeliverPayload(context.Background(), mustPayload(t, run.Stamp(ev))); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) != 3 || string(lines[0]) != "existing" {
		t.Fatalf("file must be appended to, one event per line:\n%s", b)
	}
	for i, l := range lines[1:] {
		var p struct{ Sequence uint64 }
		if err := json.Unmarshal(l, &p); err != nil || p.Sequence != uint64(i+1) {
			t.Fatalf("line %d: %s: %v", i+1, l, err)
		}
		sinkstest.Check(t, l)
	}

	created := filepath.Join(t.TempDir(), "new.jsonl")
	nf := NewFile(created)
	if err := nf.DeliverPayload(context.Background(), mustPayload(t, stamped())); err != nil {
		t.Fatal(err)
	}
	_ = nf.Close(context.Background())
	if st, err := os.Stat(created); err != nil || st.Mode().Perm() != FileMode {
		t.Fatalf("created file mode %v, %v", st.Mode(), err)
	}
	if err := NewFile(filepath.Join(t.TempDir(), "no", "dir")).DeliverPayload(context.Background(), mustPayload(t, stamped())); err == nil {
		t.Fatal("a missing directory is an error")
	}
}

func TestStdoutSinkPrintsBareLines(t *testing.T) {
	var out bytes.Buffer
	s := NewStdout(&out)
	cli := stamped()
	cli.Raw = []byte(`{"type":"assistant","message":{}}`)
	noRaw := stamped()
	life := lifecycle()
	life.Raw = []byte(`ignored`) // lifecycle events are always their event object
	for _, ev := range []*eventsv1.RunEvent{cli, noRaw, life} {
		if err := s.Deliver(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(&out)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 3 || lines[0] != string(cli.Raw) {
		t.Fatalf("a CLI event prints the CLI's own line: %q", lines)
	}
	if lines[1] != `{"kind":"message","role":"assistant","text":"hello"}` ||
		lines[2] != `{"kind":"lifecycle","phase":"agent","status":"started"}` {
		t.Fatalf("events without a CLI line print their event object, bare: %q", lines[1:])
	}
}

func TestBuildCollapsesStdoutAndNamesMembers(t *testing.T) {
	var out bytes.Buffer
	cfgs, err := ParseSinks([]byte(`[{"type":"stdout"},{"type":"stdout"},{"type":"file","path":"` +
		filepath.Join(t.TempDir(), "e") + `"},{"type":"nats"}]`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := Build(cfgs, BuildOptions{Stdout: &out})
	if err == nil {
		t.Fatal("a nats entry without a publisher is reported")
	}
	var names []string
	for _, st := range set.Stats() {
		names = append(names, st.Name)
	}
	if len(names) != 2 || names[0] != "file-2" || names[1] != "stdout" {
		t.Fatalf("members %v", names)
	}
	_ = set.Deliver(context.Background(), stamped())
	closeSet(t, set)
	if bytes.Count(out.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("stdout printed %q", out.String())
	}
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{
		EnvSinks:     `[{"type":"file","path":"/p"}]`,
		EnvNotifyURL: "https://notify/x",
		EnvSelect:    `[{"event":"result"},{"event":"nope"}]`,
	}
	cfgs, sel, err := FromEnv(func(k string) string { return env[k] })
	if len(cfgs) != 2 || cfgs[1].Type != TypeHTTP || len(sel) != 1 || err == nil {
		t.Fatalf("%+v %+v %v", cfgs, sel, err)
	}
}
