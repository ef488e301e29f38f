package events_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/lockedio"
	"github.com/agentplane/agentplane/libs/natsauth"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// generous bounds a wait that should end far sooner; tests never assert
// how long anything took.
const generous = 60 * time.Second

func newRun(uid string) *events.Run {
	return events.NewRun(&eventsv1.RunIdentity{Namespace: "team", Agent: "fixer", Uid: uid})
}

func message(r *events.Run, i int) *eventsv1.RunEvent {
	return r.Stamp(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Message{
		Message: &eventsv1.Message{Role: "assistant", Text: "line " + strconv.Itoa(i)}}})
}

func newPublisher(t *testing.T, url string, mod func(*events.PublisherOptions)) *events.Publisher {
	t.Helper()
	opts := events.PublisherOptions{
		URL:            url,
		AttemptTimeout: time.Second,
		RetryBase:      10 * time.Millisecond,
		RetryMax:       200 * time.Millisecond,
		ConnectOptions: []nats.Option{
			nats.ReconnectWait(20 * time.Millisecond),
		},
	}
	if mod != nil {
		mod(&opts)
	}
	p, err := events.NewPublisher(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func closeWithin(t *testing.T, p *events.Publisher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// assertStoredOnceInOrder reads the run back and checks sequences 1..n,
// each exactly once, in stream order.
func assertStoredOnceInOrder(t *testing.T, js jetstream.JetStream, uid string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	got, err := events.ReadAll(ctx, js, events.Filter{Namespace: "team", Agent: "fixer", UID: uid})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("stored %d events, want exactly %d", len(got), n)
	}
	for i, ev := range got {
		if ev.GetSequence() != uint64(i+1) {
			t.Fatalf("event %d has sequence %d: stored out of order or duplicated", i, ev.GetSequence())
		}
	}
}

func TestPublisherStoresEveryEventOnceInOrder(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), nil)
	r := newRun("u-order")
	const n = 500
	for i := 1; i <= n; i++ {
		if !p.Publish(message(r, i)) {
			t.Fatalf("event %d dropped with an empty buffer", i)
		}
	}
	closeWithin(t, p)
	assertStoredOnceInOrder(t, srv.JetStream(), "u-order", n)
	if s := p.Stats(); s.Published != n || s.Dropped != 0 {
		t.Fatalf("stats %+v", s)
	}

	// The subject is agents.<namespace>.<agent>.<kind> and the header the dedupe id.
	js := srv.JetStream()
	stream, err := js.Stream(context.Background(), events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stream.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Subject != "agents.team.fixer.message" || raw.Header.Get(jetstream.MsgIDHeader) != "u-order-1" {
		t.Fatalf("subject %q msg id %q", raw.Subject, raw.Header.Get(jetstream.MsgIDHeader))
	}
	if ct := raw.Header.Get(events.ContentTypeHeader); ct != events.ContentTypeProtobuf {
		t.Fatalf("content type %q, want the binary encoding", ct)
	}
	if cfg := stream.CachedInfo().Config; cfg.Storage != jetstream.FileStorage || cfg.Duplicates <= 0 {
		t.Fatalf("stream created with %+v", cfg)
	}
}

// TestReplayReadsBothEncodings stores an event as a producer without the
// content-type header sent it (protojson, no header) between two the
// Publisher sends (protobuf): a reader gets all three, in order.
func TestReplayReadsBothEncodings(t *testing.T) {
	srv := eventstest.Start(t)
	r := newRun("u-mixed")
	p := newPublisher(t, srv.URL(), nil)
	p.Publish(message(r, 1))
	closeWithin(t, p)
	old := message(r, 2)
	data, err := events.Encode(old)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if _, err := srv.JetStream().Publish(ctx, old.Subject(), data, jetstream.WithMsgID(old.DedupeID())); err != nil {
		t.Fatal(err)
	}
	p = newPublisher(t, srv.URL(), nil)
	p.Publish(message(r, 3))
	closeWithin(t, p)
	assertStoredOnceInOrder(t, srv.JetStream(), "u-mixed", 3)
}

func TestDuplicateMsgIDStoredOnce(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), nil)
	r := newRun("u-dup")
	first, second := message(r, 1), message(r, 2)
	p.Publish(first)
	p.Publish(first) // a retried publish of the same event
	p.Publish(second)
	closeWithin(t, p)
	assertStoredOnceInOrder(t, srv.JetStream(), "u-dup", 2)
	if s := p.Stats(); s.Duplicates != 1 {
		t.Fatalf("want one duplicate ack, stats %+v", s)
	}
}

func TestServerRestartMidRun(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), nil)
	r := newRun("u-restart")
	const n = 300
	i := 1
	for ; i <= n/3; i++ {
		p.Publish(message(r, i))
	}
	srv.Stop()
	for ; i <= 2*n/3; i++ { // NATS is away: these queue
		if !p.Publish(message(r, i)) {
			t.Fatalf("event %d dropped while NATS is away and the buffer has room", i)
		}
	}
	srv.Restart()
	for ; i <= n; i++ {
		p.Publish(message(r, i))
	}
	closeWithin(t, p)
	assertStoredOnceInOrder(t, srv.JetStream(), "u-restart", n)
	if s := p.Stats(); s.Dropped != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestBufferFullDropsAndNeverBlocks(t *testing.T) {
	// A port nobody listens on: NATS is away for the whole test.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	_ = l.Close()

	const buffer, n = 8, 1000
	p := newPublisher(t, url, func(o *events.PublisherOptions) { o.Buffer = buffer })
	r := newRun("u-full")
	accepted := 0
	for i := 1; i <= n; i++ { // would hang here if Publish blocked
		if p.Publish(message(r, i)) {
			accepted++
		}
	}
	s := p.Stats()
	if accepted > buffer+1 || s.Dropped != uint64(n-accepted) {
		t.Fatalf("accepted %d with buffer %d, stats %+v", accepted, buffer, s)
	}
	if got := metricValue(t, p, "agentplane_events_dropped_total"); got != float64(n-accepted) {
		t.Fatalf("dropped counter = %v", got)
	}

	// Close cannot flush to an absent server: it gives up when its
	// context ends and counts the rest as dropped.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = p.Close(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("close error %v", err)
	}
	if s := p.Stats(); s.Dropped != n || s.Published != 0 {
		t.Fatalf("after close %+v", s)
	}
	if p.Publish(message(r, n+1)) {
		t.Fatal("publish after close must report a drop")
	}
}

// metricValue registers p on a fresh registry (as a caller would) and
// returns the named counter or gauge.
func metricValue(t *testing.T, p *events.Publisher, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not collected", name)
	return 0
}

func TestCloseFlushes(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), func(o *events.PublisherOptions) { o.Buffer = 5000 })
	r := newRun("u-flush")
	const n = 2000
	for i := 1; i <= n; i++ {
		p.Publish(message(r, i))
	}
	closeWithin(t, p) // returns only once the buffer is empty
	if s := p.Stats(); s.Published != n || s.Buffered != 0 {
		t.Fatalf("stats %+v", s)
	}
	assertStoredOnceInOrder(t, srv.JetStream(), "u-flush", n)
	if err := p.Close(context.Background()); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
}

func TestOversizedRawIsShed(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), nil)
	r := newRun("u-big")
	ev := message(r, 1)
	ev.Raw = make([]byte, 2<<20) // over the 1 MiB max payload
	p.Publish(ev)
	closeWithin(t, p)
	got, err := events.ReadAll(context.Background(), srv.JetStream(), events.Filter{UID: "u-big"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0].GetRaw()) != 0 || got[0].GetMessage().GetText() != "line 1" {
		t.Fatalf("want the event without raw, got %d events", len(got))
	}
	if len(ev.GetRaw()) == 0 {
		t.Fatal("the caller's event must not be modified")
	}
}

func TestBatchNotices(t *testing.T) {
	srv := eventstest.Start(t)
	nc := srv.Connect()
	got := make(chan *eventsv1.RunEvent, 1)
	sub, err := events.SubscribeBatchNotices(nc, "team", "", func(ev *eventsv1.RunEvent) { got <- ev })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ev := newRun("u-b").Stamp(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Batch{
		Batch: &eventsv1.BatchEvent{Provider: "anthropic", BatchId: "b1", Status: "succeeded"}}})
	if err := events.PublishBatchNotice(srv.Connect(), ev); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n.GetBatch().GetBatchId() != "b1" || n.GetKind() != eventsv1.EventKind_EVENT_KIND_BATCH {
			t.Fatalf("notice %v", n)
		}
	case <-time.After(generous):
		t.Fatal("no batch notice")
	}
}

func TestReplayFollowStopsOnErrStop(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), nil)
	r := newRun("u-follow")
	p.Publish(message(r, 1))
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	// A consumer can start before any producer created the stream.
	if err := events.EnsureStream(ctx, srv.JetStream(), events.StreamConfig(0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		seen := 0
		done <- events.Replay(ctx, srv.JetStream(), events.Filter{Namespace: "team"}, events.ReplayOptions{Follow: true},
			func(*eventsv1.RunEvent) error {
				if seen++; seen == 3 {
					return events.ErrStop
				}
				return nil
			})
	}()
	p.Publish(message(r, 2))
	p.Publish(message(r, 3))
	if err := <-done; err != nil {
		t.Fatalf("replay: %v", err)
	}
}

// Every behaviour above also holds with a publish window, except that
// stream order is only guaranteed while nothing fails (see MaxInFlight).
func TestPipelinedPublisherStoresEveryEventOnceInOrder(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), func(o *events.PublisherOptions) { o.MaxInFlight = 64 })
	r := newRun("u-window")
	const n = 3000
	var first *eventsv1.RunEvent
	for i := 1; i <= n; i++ {
		ev := message(r, i)
		if i == 1 {
			first = ev
		}
		p.Publish(ev)
		if i == 10 {
			p.Publish(first) // a retried publish inside a window
		}
	}
	closeWithin(t, p)
	assertStoredOnceInOrder(t, srv.JetStream(), "u-window", n)
	if s := p.Stats(); s.Duplicates != 1 || s.Dropped != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestPipelinedPublisherSurvivesRestart(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), func(o *events.PublisherOptions) { o.MaxInFlight = 64 })
	r := newRun("u-wrestart")
	const n = 3000
	for i := 1; i <= n; i++ {
		if i == n/3 {
			srv.Stop()
		}
		if i == 2*n/3 {
			srv.Restart()
		}
		p.Publish(message(r, i))
	}
	closeWithin(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	got, err := events.ReadAll(ctx, srv.JetStream(), events.Filter{UID: "u-wrestart"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, ev := range got {
		if seen[ev.GetSequence()] {
			t.Fatalf("sequence %d stored twice", ev.GetSequence())
		}
		seen[ev.GetSequence()] = true
	}
	s := p.Stats()
	if len(seen) != n {
		t.Fatalf("stored %d distinct events of %d, stats %+v", len(seen), n, s)
	}
	if s.Reordered == 0 {
		assertStoredOnceInOrder(t, srv.JetStream(), "u-wrestart", n)
	}
	t.Logf("stats %+v", s)
}

func TestEnsureStreamLeavesAnExistingStreamAlone(t *testing.T) {
	srv := eventstest.Start(t)
	js := srv.JetStream()
	ctx := context.Background()
	cfg := events.StreamConfig(0, 0, 0)
	cfg.Subjects = []string{"agents.team.>"}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := events.EnsureStream(ctx, js, events.StreamConfig(0, 0, 0)); !errors.Is(err, events.ErrStreamSubjects) {
		t.Fatalf("a stream missing agents.> is reported: %v", err)
	}
	// The publisher still uses it rather than losing every event.
	p := newPublisher(t, srv.URL(), nil)
	p.Publish(message(newRun("u-op"), 1))
	closeWithin(t, p)
	if s := p.Stats(); s.Published != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// awaitPublished waits until p has had n acks.
func awaitPublished(t *testing.T, p *events.Publisher, n uint64) {
	t.Helper()
	deadline := time.Now().Add(generous)
	for p.Stats().Published < n {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, want %d published", p.Stats(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPipelinedPublisherRecreatesADeletedStream: with the stream gone, a
// window is answered "no responders"; its events go one at a time, which
// sets the stream up again, and none is lost.
func TestPipelinedPublisherRecreatesADeletedStream(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), func(o *events.PublisherOptions) { o.MaxInFlight = 64 })
	r := newRun("u-nostream")
	const n = 1000
	for i := 1; i <= n/2; i++ {
		p.Publish(message(r, i))
	}
	awaitPublished(t, p, n/2)
	if err := srv.JetStream().DeleteStream(context.Background(), events.StreamName); err != nil {
		t.Fatal(err)
	}
	for i := n/2 + 1; i <= n; i++ {
		p.Publish(message(r, i))
	}
	closeWithin(t, p)
	got, err := events.ReadAll(context.Background(), srv.JetStream(), events.Filter{UID: "u-nostream"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n/2 || got[0].GetSequence() != n/2+1 {
		t.Fatalf("the new stream holds %d events from sequence %d, want the %d published after the delete", len(got), got[0].GetSequence(), n/2)
	}
	if s := p.Stats(); s.Published != n || s.Dropped != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestPipelinedPublisherShedsRawTheStreamRefuses: a stream whose message
// size limit is below an event's raw line answers the window with an
// error ack; the events then go one at a time and are stored without raw,
// in order, as unwindowed publishing does.
func TestPipelinedPublisherShedsRawTheStreamRefuses(t *testing.T) {
	srv := eventstest.Start(t)
	cfg := events.StreamConfig(0, 0, 0)
	cfg.MaxMsgSize = 4096
	if _, err := srv.JetStream().CreateStream(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, srv.URL(), func(o *events.PublisherOptions) { o.MaxInFlight = 64 })
	r := newRun("u-limit")
	const n = 300
	for i := 1; i <= n; i++ {
		ev := message(r, i)
		if i > 1 { // the first sets the stream up, one at a time
			ev.Raw = make([]byte, 8192)
		}
		p.Publish(ev)
	}
	closeWithin(t, p)
	assertStoredOnceInOrder(t, srv.JetStream(), "u-limit", n)
	got, err := events.ReadAll(context.Background(), srv.JetStream(), events.Filter{UID: "u-limit"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range got {
		if len(ev.GetRaw()) != 0 {
			t.Fatalf("event %d stored with its raw line", ev.GetSequence())
		}
	}
	if s := p.Stats(); s.Published != n || s.Dropped != 0 || s.Reordered != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// TestPipelinedPublisherLetsGoOfAServerGoneForGood: windows sent as the
// server goes away never hang the Publisher; Close gives up when its
// context ends and counts what is left as dropped.
func TestPipelinedPublisherLetsGoOfAServerGoneForGood(t *testing.T) {
	srv := eventstest.Start(t)
	p := newPublisher(t, srv.URL(), func(o *events.PublisherOptions) { o.MaxInFlight = 64 })
	r := newRun("u-gone")
	const n = 3000
	for i := 1; i <= n; i++ {
		if i == n/3 {
			srv.Stop()
		}
		p.Publish(message(r, i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := p.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close: %v", err)
	}
	if s := p.Stats(); s.Published+s.Dropped != n || s.Dropped == 0 {
		t.Fatalf("stats %+v: every event is published or dropped", s)
	}
}

// TestPipelinedPublisherWithARunCredential: a run's credential may
// subscribe only under its own inbox prefix, and the windows' acks come
// there.
func TestPipelinedPublisherWithARunCredential(t *testing.T) {
	auth, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	srv := eventstest.StartSecured(t, auth)
	if err := events.EnsureStream(context.Background(), srv.JetStream(), events.StreamConfig(0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	run := natsauth.Run{Namespace: "team", Agent: "fixer", UID: "u-cred"}
	creds, err := auth.Issuer().RunCredentials(run, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var asyncErrs atomic.Int64
	p := newPublisher(t, srv.URL(), func(o *events.PublisherOptions) {
		o.MaxInFlight = 64
		o.NoStreamSetup = true
		o.ConnectOptions = append(o.ConnectOptions,
			nats.UserCredentials(eventstest.WriteCreds(t, creds)),
			nats.CustomInboxPrefix(natsauth.InboxPrefix(run.UID)),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				asyncErrs.Add(1)
				t.Logf("nats: %v", err)
			}))
	})
	r := newRun(run.UID)
	const n = 1000
	for i := 1; i <= n; i++ {
		p.Publish(message(r, i))
	}
	closeWithin(t, p)
	assertStoredOnceInOrder(t, srv.JetStream(), run.UID, n)
	if s := p.Stats(); s.Published != n || s.Duplicates != 0 || s.Retried != 0 || asyncErrs.Load() != 0 {
		t.Fatalf("stats %+v, %d asynchronous errors (a refused subscription is one)", s, asyncErrs.Load())
	}
}

// TestEachOutageIsLoggedOnce: a server away at the first connect is
// told once (nats.go retries in the background and reports every failed
// attempt), its arrival once, and a later outage once more, however many
// attempts each takes; the events published meanwhile are stored.
func TestEachOutageIsLoggedOnce(t *testing.T) {
	srv := eventstest.Start(t)
	url := srv.URL()
	srv.Stop()
	var logs lockedio.Buffer
	p := newPublisher(t, url, func(o *events.PublisherOptions) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	count := func(msg string) int { return strings.Count(logs.String(), `msg="`+msg) }
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(generous)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s; logs:\n%s", what, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("the first connect's failure was not logged", func() bool { return count("nats unreachable") == 1 })
	// Many more attempts fail (every 20 ms here) without another line.
	time.Sleep(300 * time.Millisecond)
	if n := count("nats unreachable"); n != 1 {
		t.Fatalf("the first outage was logged %d times", n)
	}
	r := newRun("u-outage")
	p.Publish(message(r, 1))
	srv.Restart()
	waitFor("the connection made at last was not logged", func() bool { return count("nats connected") == 1 })
	awaitPublished(t, p, 1)

	srv.Stop()
	waitFor("the second outage was not logged", func() bool { return count("nats disconnected") == 1 })
	time.Sleep(300 * time.Millisecond)
	if n, m := count("nats disconnected"), count("nats unreachable"); n != 1 || m != 1 {
		t.Fatalf("the second outage was logged %d times as a disconnect and %d more as unreachable", n, m-1)
	}
	srv.Restart()
	waitFor("the reconnect was not logged", func() bool { return count("nats reconnected") == 1 })
	p.Publish(message(r, 2))
	closeWithin(t, p)
	assertStoredOnceInOrder(t, srv.JetStream(), "u-outage", 2)
}
