package sinks

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/natsauth"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// natsSubjects returns the full subjects of the Set's recipe nats sinks,
// by member name.
func natsSubjects(s *Set) map[string]*NATSSubject {
	out := map[string]*NATSSubject{}
	for _, w := range s.workers {
		if n, ok := w.Payloads.(*NATSSubject); ok {
			out[w.Name] = n
		}
	}
	return out
}

func memberNames(s *Set) string {
	var names []string
	for _, st := range s.Stats() {
		names = append(names, st.Name)
	}
	return strings.Join(names, ",")
}

// TestBuildNATSSubjectSinks checks how Build turns nats entries into
// members: which connection and which subject a recipe's nats sink gets,
// and which entries it refuses. Configs are built by hand, as a caller
// that skips ParseSinks would, so Build's own checks are what is tested.
func TestBuildNATSSubjectSinks(t *testing.T) {
	srv := eventstest.Start(t)
	nc := srv.Connect()
	p := newPublisher(t, srv.URL(), nil)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	tests := []struct {
		name        string
		cfg         Config
		opts        BuildOptions
		wantMembers string
		wantSubject string     // of member nats-0; "" when there is none
		wantConn    *nats.Conn // of member nats-0
		wantErr     string
	}{
		{"a subject is published under the run namespace's prefix", Config{Type: TypeNATS, Subject: "ci.results"},
			BuildOptions{NATSConn: nc, Namespace: "team-a"}, "nats-0", "agentplane.sinks.team-a.ci.results", nc, ""},
		{"without a connection the Publisher's is used, and the stream stays a member", Config{Type: TypeNATS, Subject: "ci.results"},
			BuildOptions{Publisher: p, Namespace: "team-a"}, "nats-0,nats", "agentplane.sinks.team-a.ci.results", p.Conn(), ""},
		{"a given connection wins over the Publisher's", Config{Type: TypeNATS, Subject: "ci.results"},
			BuildOptions{Publisher: p, NATSConn: nc, Namespace: "team-a"}, "nats-0,nats", "agentplane.sinks.team-a.ci.results", nc, ""},
		{"a subject spelling another namespace's prefix stays below the run's own", Config{Type: TypeNATS, Subject: "agentplane.sinks.team-b.orders"},
			BuildOptions{NATSConn: nc, Namespace: "team-a"}, "nats-0", "agentplane.sinks.team-a.agentplane.sinks.team-b.orders", nc, ""},
		{"no subject is the platform stream, not a recipe sink", Config{Type: TypeNATS},
			BuildOptions{Publisher: p, Namespace: "team-a"}, "nats", "", nil, ""},
		{"a subject without a publisher or connection is refused", Config{Type: TypeNATS, Subject: "ci.results"},
			BuildOptions{Namespace: "team-a"}, "", "", nil, "without a NATS publisher"},
		{"a subject without the run's namespace is refused", Config{Type: TypeNATS, Subject: "ci.results"},
			BuildOptions{NATSConn: nc}, "", "", nil, "without the run's namespace"},
		{"a wildcard subject built by hand is refused", Config{Type: TypeNATS, Subject: "ci.>"},
			BuildOptions{NATSConn: nc, Namespace: "team-a"}, "", "", nil, "no wildcards"},
		{"an empty token built by hand is refused", Config{Type: TypeNATS, Subject: "..team-b.orders"},
			BuildOptions{NATSConn: nc, Namespace: "team-a"}, "", "", nil, "no wildcards, no empty tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Build([]Config{tt.cfg}, tt.opts)
			defer closeSet(t, set)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want %q", err, tt.wantErr)
			}
			if got := memberNames(set); got != tt.wantMembers {
				t.Fatalf("members %q, want %q", got, tt.wantMembers)
			}
			sink := natsSubjects(set)["nats-0"]
			if tt.wantSubject == "" {
				if sink != nil {
					t.Fatalf("a recipe nats sink on %s was built", sink.Subject())
				}
				return
			}
			if sink == nil || sink.Subject() != tt.wantSubject || sink.nc != tt.wantConn {
				t.Fatalf("sink %+v, want subject %s on the expected connection", sink, tt.wantSubject)
			}
		})
	}
}

// runFixture is a secured NATS server with the platform's stream, and the
// creds file of one run of namespace team-a.
type runFixture struct {
	srv    *eventstest.Server
	run    natsauth.Run
	client natsauth.Client
}

func newRunFixture(t *testing.T) runFixture {
	t.Helper()
	a, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	srv := eventstest.StartSecured(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := events.EnsureStream(ctx, srv.JetStream(), events.StreamConfig(0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	run := natsauth.Run{Namespace: "team-a", Agent: "fixer", UID: "uid-team-a-fixer"}
	creds, err := a.Issuer().RunCredentials(run, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return runFixture{srv: srv, run: run,
		client: natsauth.Client{CredsFile: eventstest.WriteCreds(t, creds), InboxPrefix: natsauth.InboxPrefix(run.UID)}}
}

// serverErrors collects the errors the server sends a connection (its
// permission violations arrive this way, after the publish returned).
type serverErrors struct {
	mu   sync.Mutex
	errs []error
}

func (s *serverErrors) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, err)
}

func (s *serverErrors) all() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// violationFor waits until the server has reported a publish permission
// violation naming subject.
func (s *serverErrors) violationFor(subject string) bool {
	deadline := time.Now().Add(generous)
	for time.Now().Before(deadline) {
		for _, err := range s.all() {
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
				return true
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestNATSSinkPublishesOnlyUnderItsNamespace runs a recipe's nats sink as a
// run pod does, on the connection of a Publisher holding the run's own
// credential, and shows that the selected events reach a subscriber of
// agentplane.sinks.<ns>.<subject> as sink payloads. The attack: with that
// same credential, hand-crafted publishes to sink subjects outside the
// run's namespace are refused by the server and reach no one.
func TestNATSSinkPublishesOnlyUnderItsNamespace(t *testing.T) {
	f := newRunFixture(t)
	service := f.srv.Connect()
	own := natsauth.SinkSubject(f.run.Namespace, "ci.results")
	sub, err := service.SubscribeSync(own)
	if err != nil {
		t.Fatal(err)
	}
	// Every sink subject of every namespace, to see where anything lands.
	watch, err := service.SubscribeSync(natsauth.SinkSubjectPrefix + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := service.Flush(); err != nil {
		t.Fatal(err)
	}
	key, err := f.client.MsgIDKey()
	if err != nil {
		t.Fatal(err)
	}
	var serr serverErrors
	p, err := events.NewPublisher(events.PublisherOptions{URL: f.srv.URL(), NoStreamSetup: true, MsgIDKey: key,
		ConnectOptions: append(f.client.Options(), nats.ErrorHandler(serr.handler))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })

	t.Run("selected events reach the namespace's subject as sink payloads", func(t *testing.T) {
		cfgs, err := ParseSinks([]byte(`[{"type":"nats","subject":"ci.results"}]`))
		if err != nil {
			t.Fatal(err)
		}
		set, err := Build(cfgs, BuildOptions{Publisher: p, Namespace: f.run.Namespace, Select: Select{{Event: "result"}}})
		if err != nil {
			t.Fatal(err)
		}
		stamp := events.NewRun(&eventsv1.RunIdentity{Namespace: f.run.Namespace, Agent: f.run.Agent, Uid: f.run.UID})
		evs := []*eventsv1.RunEvent{stamp.Stamp(lifecycle()), stamp.Stamp(msg("assistant", "not selected")), stamp.Stamp(result("done"))}
		for _, ev := range evs {
			_ = set.Deliver(context.Background(), ev)
		}
		closeSet(t, set)
		for _, ev := range []*eventsv1.RunEvent{evs[0], evs[2]} {
			want := mustPayload(t, ev)
			m, err := sub.NextMsg(generous)
			if err != nil {
				t.Fatalf("waiting for %s: %v (server errors: %v)", want, err, serr.all())
			}
			if !bytes.Equal(m.Data, want) {
				t.Fatalf("got %s\nwant %s", m.Data, want)
			}
			if w, err := watch.NextMsg(generous); err != nil || w.Subject != own {
				t.Fatalf("a sink message on %v (%v), want %s", w, err, own)
			}
		}
		if errs := serr.all(); len(errs) != 0 {
			t.Fatalf("the server refused the sink: %v", errs)
		}
	})

	attacks := []struct {
		name    string
		subject string
	}{
		{"another namespace's sink subject is refused", natsauth.SinkSubject("team-b", "ci.results")},
		{"a namespace whose name extends the run's is refused", natsauth.SinkSubject("team-ab", "ci.results")},
		{"the bare prefix of the run's own namespace is refused", natsauth.SinkSubjectPrefix + "." + f.run.Namespace},
		{"the sink prefix itself is refused", natsauth.SinkSubjectPrefix},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			catch, err := service.SubscribeSync(a.subject)
			if err != nil {
				t.Fatal(err)
			}
			if err := service.Flush(); err != nil {
				t.Fatal(err)
			}
			nc := p.Conn()
			if err := nc.Publish(a.subject, []byte("forged")); err != nil {
				t.Fatal(err)
			}
			// A message the run may send, after the forged one: the
			// server delivers one connection's messages in order, so
			// when this one arrives the forged one would have too.
			if err := nc.Publish(own, []byte("marker")); err != nil {
				t.Fatal(err)
			}
			m, err := watch.NextMsg(generous)
			if err != nil {
				t.Fatal(err)
			}
			if m.Subject != own || string(m.Data) != "marker" {
				t.Fatalf("the forged publish reached %s", m.Subject)
			}
			if _, err := sub.NextMsg(generous); err != nil {
				t.Fatal(err) // the marker, on the sink's own subscriber too
			}
			// catch shares the service connection, which read the
			// forged message, had it come, before the marker.
			if n, _, err := catch.Pending(); err != nil || n != 0 {
				t.Fatalf("the forged publish reached %s (%d, %v)", a.subject, n, err)
			}
			if !serr.violationFor(a.subject) {
				t.Fatalf("no permissions violation for %s reported: %v", a.subject, serr.all())
			}
		})
	}
}
