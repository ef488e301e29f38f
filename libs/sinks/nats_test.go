package sinks

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

func newPublisher(t testing.TB, url string, log *slog.Logger) *events.Publisher {
	t.Helper()
	p, err := events.NewPublisher(events.PublisherOptions{URL: url, Logger: log, Buffer: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNATSSinkStoresEveryEventUnfiltered(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), nil)
	set, err := Build(nil, BuildOptions{Publisher: p, Select: Select{{Event: "result"}}})
	if err != nil {
		t.Fatal(err)
	}
	run := events.NewRun(&eventsv1.RunIdentity{Namespace: "team", Agent: "fixer", Uid: "u-nats"})
	for _, ev := range []*eventsv1.RunEvent{lifecycle(), msg("assistant", "x"), rawLine(), result("ok")} {
		_ = set.Deliver(context.Background(), run.Stamp(ev))
	}
	closeSet(t, set)
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := events.ReadAll(ctx, srv.JetStream(), events.Filter{Namespace: "team", Agent: "fixer"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("the stream stores every event whatever select says: got %d", len(got))
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestHeadersSecretNeverLeaks(t *testing.T) {
	const secret = "TOPSECRET"
	env := map[string]string{
		// A dashed key, as Secret keys may be; one bad line that holds the
		// secret too, so the parse error path is covered.
		"hook-auth": "Authorization: Bearer " + secret + "-1\n" + secret + "-2 not a header\nX-Key: " + secret + "-3\n",
	}
	var mu sync.Mutex
	var seenAuth []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seenAuth = append(seenAuth, r.Header.Get("Authorization"))
		n := len(seenAuth)
		mu.Unlock()
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		// Fail the first event for good, then errors then success, so the
		// retry and failure paths log.
		switch {
		case n == 1:
			w.WriteHeader(http.StatusUnauthorized)
		case n%2 == 0:
			w.WriteHeader(http.StatusInternalServerError)
		}
		_, _ = w.Write([]byte(r.Header.Get("Authorization")))
	}))
	defer hook.Close()

	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), log)
	var stdout bytes.Buffer
	file := filepath.Join(t.TempDir(), "events.jsonl")
	cfgs, err := ParseSinks([]byte(`[{"type":"http","url":"` + hook.URL + `","headers_secret":"hook-auth"},{"type":"file","path":"` + file + `"}]`))
	if err != nil {
		t.Fatal(err)
	}
	set, buildErr := Build(cfgs, BuildOptions{Getenv: func(k string) string { return env[k] }, Stdout: &stdout,
		Publisher: p, Retry: fastRetry, Logger: log})
	if buildErr == nil {
		t.Fatal("the bad header line is reported")
	}
	run := events.NewRun(&eventsv1.RunIdentity{Namespace: "team", Agent: "fixer", Uid: "u-secret"})
	for _, ev := range []*eventsv1.RunEvent{lifecycle(), msg("assistant", "hello"), result("ok")} {
		_ = set.Deliver(context.Background(), run.Stamp(ev))
	}
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	closeErr := set.Close(ctx)
	pubErr := p.Close(ctx)
	stored, err := events.ReadAll(ctx, srv.JetStream(), events.Filter{UID: "u-secret"})
	if err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	if len(seenAuth) == 0 || seenAuth[0] != "Bearer "+secret+"-1" {
		t.Fatalf("the endpoint must get the secret header, got %q", seenAuth)
	}
	mu.Unlock()
	fileData, _ := os.ReadFile(file)
	var storedJSON []string
	for _, ev := range stored {
		b, _ := events.Encode(ev)
		storedJSON = append(storedJSON, string(b))
	}
	places := map[string]string{
		"build error":   errString(buildErr),
		"close error":   errString(closeErr),
		"publish error": errString(pubErr),
		"log":           logs.String(),
		"stdout":        stdout.String(),
		"file sink":     string(fileData),
		"nats events":   strings.Join(storedJSON, "\n"),
	}
	for where, text := range places {
		if strings.Contains(text, secret) {
			t.Errorf("secret found in %s:\n%s", where, text)
		}
	}
	if !strings.Contains(logs.String(), "sink delivery failed") || len(stored) != 3 {
		t.Fatalf("the failure paths were not exercised: %d stored, log:\n%s", len(stored), logs.String())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// BenchmarkPublish measures select + fan-out + JetStream publish of
// stamped events through a Set with a NATS member, end to end: the timer
// stops once the stream acknowledged every event. Queues are sized so
// nothing is dropped; ns/op is the sustained cost per event.
func BenchmarkPublish(b *testing.B) {
	srv := eventstest.Start(b)
	p, err := events.NewPublisher(events.PublisherOptions{URL: srv.URL(), Buffer: b.N + 1})
	if err != nil {
		b.Fatal(err)
	}
	set := NewSet([]Member{{Name: "nats", Sink: NewNATS(p), QueueSize: b.N + 1}},
		SetOptions{Select: Select{{Event: "message", Contains: "needle"}}})
	run := events.NewRun(&eventsv1.RunIdentity{Namespace: "team", Agent: "bench", Uid: "u-bench"})
	raw := []byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"a fairly ordinary line of model output"}]}}`)
	evs := make([]*eventsv1.RunEvent, b.N)
	for i := range evs {
		evs[i] = run.Stamp(msg("assistant", "a fairly ordinary line of model output"))
		evs[i].Raw = raw
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, ev := range evs {
		if err := set.Deliver(context.Background(), ev); err != nil {
			b.Fatal(err)
		}
	}
	if err := set.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if s := p.Stats(); s.Published != uint64(b.N) {
		b.Fatalf("published %d of %d", s.Published, b.N)
	}
}
