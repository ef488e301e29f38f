package natsauth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/natsauth"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// generous bounds waits that end far sooner; no duration is asserted.
const generous = 30 * time.Second

// refusal is how long a test waits to see that a refused request got no
// answer; the refusal itself is read from the server's error.
const refusal = 2 * time.Second

var (
	victim   = natsauth.Run{Namespace: "team-b", Agent: "payroll", UID: "uid-victim"}
	attacker = natsauth.Run{Namespace: "team-a", Agent: "intruder", UID: "uid-attacker"}
)

type fixture struct {
	srv *eventstest.Server
	iss *natsauth.Issuer
	js  jetstream.JetStream // the platform's, with full rights
}

func setup(t *testing.T) fixture {
	t.Helper()
	a, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := eventstest.StartSecured(t, a)
	js := srv.JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := events.EnsureStream(ctx, js, events.StreamConfig(0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	return fixture{srv: srv, iss: a.Issuer(), js: js}
}

// runConn connects as run r would: its own credential and inbox prefix.
// Errors the server sends (permission violations) are collected.
func (f fixture) runConn(t *testing.T, r natsauth.Run) (*nats.Conn, func() []error) {
	t.Helper()
	creds, err := f.iss.RunCredentials(r, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var errs []error
	c := natsauth.Client{CredsFile: eventstest.WriteCreds(t, creds), InboxPrefix: natsauth.InboxPrefix(r.UID)}
	nc, err := nats.Connect(f.srv.URL(), append(c.Options(), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}))...)
	if err != nil {
		t.Fatalf("connect as run %s/%s: %v", r.Namespace, r.Agent, err)
	}
	t.Cleanup(nc.Close)
	return nc, func() []error {
		_ = nc.Flush()
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}
}

func event(r natsauth.Run, seq uint64) *eventsv1.RunEvent {
	run := events.NewRun(&eventsv1.RunIdentity{Namespace: r.Namespace, Agent: r.Agent, Uid: r.UID})
	ev := run.Stamp(&eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Message{Message: &eventsv1.Message{Role: "assistant", Text: "hello"}}})
	ev.Sequence = seq
	ev.Id = ev.DedupeID()
	return ev
}

// stored counts the stream's messages on subject.
func (f fixture) stored(t *testing.T, subject string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	s, err := f.js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

func violated(errs []error) bool {
	for _, err := range errs {
		if errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			return true
		}
	}
	return false
}

// TestARunCredentialReachesOnlyItsOwnSubjects: a run's credential stores
// its own events, and every attack on the stream from it is refused.
func TestARunCredentialReachesOnlyItsOwnSubjects(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	ownSubject := event(attacker, 1).Subject()
	victimSubject := event(victim, 1).Subject()

	t.Run("publishes its own events", func(t *testing.T) {
		nc, errs := f.runConn(t, attacker)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		data, err := events.Encode(event(attacker, 1))
		if err != nil {
			t.Fatal(err)
		}
		actx, cancel := context.WithTimeout(ctx, generous)
		defer cancel()
		if _, err := js.Publish(actx, ownSubject, data); err != nil {
			t.Fatalf("the run could not publish its own event: %v (server: %v)", err, errs())
		}
		if n := f.stored(t, ownSubject); n != 1 {
			t.Fatalf("%d messages on %s, want 1", n, ownSubject)
		}
	})

	t.Run("cannot publish as another run", func(t *testing.T) {
		nc, errs := f.runConn(t, attacker)
		js, _ := jetstream.New(nc)
		data, _ := events.Encode(event(victim, 1))
		actx, cancel := context.WithTimeout(ctx, refusal)
		defer cancel()
		if _, err := js.Publish(actx, victimSubject, data); err == nil {
			t.Fatal("a forged event for another run was acknowledged")
		}
		if !violated(errs()) {
			t.Fatalf("no permissions violation reported: %v", errs())
		}
		if n := f.stored(t, victimSubject); n != 0 {
			t.Fatalf("the forged event was stored (%d)", n)
		}
	})

	t.Run("cannot subscribe to the events", func(t *testing.T) {
		nc, errs := f.runConn(t, attacker)
		sub, err := nc.SubscribeSync("agents.>")
		if err == nil {
			_ = nc.Flush()
			_ = f.srv.Connect().Publish(victimSubject, []byte("secret"))
			if _, err := sub.NextMsg(refusal); err == nil {
				t.Fatal("the run read another run's event")
			}
		}
		if !violated(errs()) {
			t.Fatalf("no permissions violation reported: %v", errs())
		}
	})

	t.Run("cannot read the stream", func(t *testing.T) {
		nc, errs := f.runConn(t, attacker)
		js, _ := jetstream.New(nc)
		actx, cancel := context.WithTimeout(ctx, refusal)
		defer cancel()
		if _, err := js.OrderedConsumer(actx, events.StreamName, jetstream.OrderedConsumerConfig{}); err == nil {
			t.Fatal("the run opened a consumer on the stream")
		}
		if !violated(errs()) {
			t.Fatalf("no permissions violation reported: %v", errs())
		}
	})

	t.Run("cannot delete the stream", func(t *testing.T) {
		nc, errs := f.runConn(t, attacker)
		js, _ := jetstream.New(nc)
		actx, cancel := context.WithTimeout(ctx, refusal)
		defer cancel()
		_ = js.DeleteStream(actx, events.StreamName)
		if !violated(errs()) {
			t.Fatalf("no permissions violation reported: %v", errs())
		}
		if _, err := f.js.Stream(ctx, events.StreamName); err != nil {
			t.Fatalf("the stream is gone: %v", err)
		}
	})

	t.Run("cannot listen on another run's inbox", func(t *testing.T) {
		nc, errs := f.runConn(t, attacker)
		if _, err := nc.SubscribeSync(natsauth.InboxPrefix(victim.UID) + ".>"); err == nil {
			_ = nc.Flush()
		}
		if !violated(errs()) {
			t.Fatalf("no permissions violation reported: %v", errs())
		}
	})

	t.Run("sinks publish under their own namespace only", func(t *testing.T) {
		own := natsauth.SinkSubject(attacker.Namespace, "orders")
		other := natsauth.SinkSubject(victim.Namespace, "orders")
		watch, err := f.srv.Connect().SubscribeSync(natsauth.SinkSubjectPrefix + ".>")
		if err != nil {
			t.Fatal(err)
		}
		nc, errs := f.runConn(t, attacker)
		for _, s := range []string{own, other} {
			if err := nc.Publish(s, []byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		msg, err := watch.NextMsg(generous)
		if err != nil || msg.Subject != own {
			t.Fatalf("first sink message %v, %v; want one on %s", msg, err, own)
		}
		if msg, err := watch.NextMsg(refusal); err == nil {
			t.Fatalf("a sink message reached another namespace's subject %s", msg.Subject)
		}
		if !violated(errs()) {
			t.Fatalf("no permissions violation reported: %v", errs())
		}
	})
}

// TestMessageIDsCannotBeTakenFirst: JetStream de-duplicates by
// Nats-Msg-Id across the stream, so a run that stores the ids another run
// will use gets that run's real events dropped. With the id keyed by the
// publisher's credential the victim's event is stored; with plain ids
// (the control) the attack works, which is why plain ids are not used.
func TestMessageIDsCannotBeTakenFirst(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keyed     bool
		wantDupes uint64
	}{
		{name: "ids keyed by the credential cannot be guessed", keyed: true, wantDupes: 0},
		{name: "plain ids can be taken first", keyed: false, wantDupes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			ctx, cancel := context.WithTimeout(context.Background(), generous)
			defer cancel()

			// The attacker stores the victim's first plain id on its own subject.
			nc, _ := f.runConn(t, attacker)
			js, _ := jetstream.New(nc)
			msg := nats.NewMsg(event(attacker, 1).Subject())
			msg.Data = []byte("squat")
			msg.Header.Set(jetstream.MsgIDHeader, event(victim, 1).DedupeID())
			if _, err := js.PublishMsg(ctx, msg); err != nil {
				t.Fatal(err)
			}

			creds, err := f.iss.RunCredentials(victim, time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			c := natsauth.Client{CredsFile: eventstest.WriteCreds(t, creds), InboxPrefix: natsauth.InboxPrefix(victim.UID)}
			var key []byte
			if tc.keyed {
				if key, err = c.MsgIDKey(); err != nil {
					t.Fatal(err)
				}
			}
			p, err := events.NewPublisher(events.PublisherOptions{URL: f.srv.URL(), ConnectOptions: c.Options(), NoStreamSetup: true, MsgIDKey: key})
			if err != nil {
				t.Fatal(err)
			}
			p.Publish(event(victim, 1))
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if s := p.Stats(); s.Published != 1 || s.Duplicates != tc.wantDupes {
				t.Fatalf("stats %+v, want 1 published and %d duplicates", s, tc.wantDupes)
			}
			if n, want := f.stored(t, event(victim, 1).Subject()), 1-tc.wantDupes; n != want {
				t.Fatalf("%d of the victim's events stored, want %d", n, want)
			}
		})
	}
}

// TestOnlyValidCredentialsConnect: no credential, one from another
// installation's authority and an expired one are all refused.
func TestOnlyValidCredentialsConnect(t *testing.T) {
	f := setup(t)
	other, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Issuer().ServiceCredentials("foreign", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	expired, err := f.iss.RunCredentials(attacker, time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{name: "no credential", opts: nil},
		{name: "another authority's credential", opts: []nats.Option{nats.UserCredentials(eventstest.WriteCreds(t, foreign))}},
		{name: "an expired credential", opts: []nats.Option{nats.UserCredentials(eventstest.WriteCreds(t, expired))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(f.srv.URL(), tc.opts...)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthExpired) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
				t.Fatalf("refused with %v, want an authorization error", err)
			}
		})
	}
}

// TestACredentialHeldInMemoryConnectsAsItsFileDoes: a client given its
// creds content (Creds) rather than a file, as a run's supervisor is,
// authenticates as that user, with the same message-id key, and the
// content wins over a file name.
func TestACredentialHeldInMemoryConnectsAsItsFileDoes(t *testing.T) {
	f := setup(t)
	creds, err := f.iss.RunCredentials(victim, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := (&natsauth.Client{CredsFile: eventstest.WriteCreds(t, creds)}).MsgIDKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rule   string
		client natsauth.Client
	}{
		{"the content alone connects", natsauth.Client{Creds: creds}},
		{"the content wins over a file name", natsauth.Client{Creds: creds, CredsFile: "/nonexistent/run.creds"}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			nc, err := nats.Connect(f.srv.URL(), tc.client.Options()...)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			nc.Close()
			key, err := tc.client.MsgIDKey()
			if err != nil || string(key) != string(fromFile) {
				t.Fatalf("message-id key %x (%v), the file's is %x", key, err, fromFile)
			}
		})
	}
	t.Run("content of another authority is refused", func(t *testing.T) {
		other, err := natsauth.NewAuthority()
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := other.Issuer().RunCredentials(victim, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if nc, err := nats.Connect(f.srv.URL(), (&natsauth.Client{Creds: foreign}).Options()...); err == nil {
			nc.Close()
			t.Fatal("connected")
		}
	})
}
