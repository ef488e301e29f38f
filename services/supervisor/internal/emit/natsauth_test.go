package emit

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/natsauth"
	"github.com/agentplane/agentplane/libs/runspec"
	"github.com/agentplane/agentplane/libs/sinks"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/supervisor/internal/runenv"
)

// securedRun is a run of namespace team-a, Agent fix-1, against a NATS
// server that admits only credentials of its authority, whose stream the
// platform created with a service credential.
type securedRun struct {
	srv  *eventstest.Server
	auth *natsauth.Authority
	env  runenv.Env
}

func newSecuredRun(t *testing.T) *securedRun {
	t.Helper()
	auth, err := natsauth.NewAuthority()
	if err != nil {
		t.Fatal(err)
	}
	srv := eventstest.StartSecured(t, auth)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := events.EnsureStream(ctx, srv.JetStream(), events.StreamConfig(0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	env := runenv.Env{Getenv: func(string) string { return "" }}
	env.Namespace, env.Agent, env.UID, env.NATSURL = "team-a", "fix-1", "uid-fix-1", srv.URL()
	return &securedRun{srv: srv, auth: auth, env: env}
}

// withRunCredential gives the run its own credential in its
// environment, as the controller does.
func (r *securedRun) withRunCredential(t *testing.T) *securedRun {
	t.Helper()
	creds, err := r.auth.Issuer().RunCredentials(natsauth.Run{Namespace: r.env.Namespace, Agent: r.env.Agent, UID: r.env.UID}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	r.env.NATSCreds = string(creds)
	return r
}

// emitAndClose emits a run's start and end through a fresh Emitter,
// closes it within closeWithin and returns what it logged.
func (r *securedRun) emitAndClose(t *testing.T, closeWithin time.Duration) (*Emitter, string) {
	t.Helper()
	var logs bytes.Buffer
	e := New(Options{Env: r.env, Stdout: &bytes.Buffer{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	e.Lifecycle("agent", "started", "", nil, "")
	e.Lifecycle("agent", "succeeded", "", nil, "")
	if err := e.Close(closeWithin, ""); err != nil {
		t.Logf("close: %v", err)
	}
	return e, logs.String()
}

// stored reads the run's events from the stream with the platform's own
// credential.
func (r *securedRun) stored(t *testing.T) []*eventsv1.RunEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := events.ReadAll(ctx, r.srv.JetStream(), events.Filter{Namespace: r.env.Namespace, Agent: r.env.Agent})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestARunPublishesWithItsOwnCredential: with the credential the
// controller passes, a run's events are stored, though the credential may
// neither create nor look up the stream; their message ids are keyed with
// the credential, so no other client could have stored them first.
func TestARunPublishesWithItsOwnCredential(t *testing.T) {
	r := newSecuredRun(t).withRunCredential(t)
	e, logs := r.emitAndClose(t, 10*time.Second)
	evs := r.stored(t)
	if len(evs) != 2 || evs[0].GetLifecycle().GetStatus() != "started" || evs[1].GetLifecycle().GetStatus() != "succeeded" {
		t.Fatalf("stored %d events, want the run's 2; logs:\n%s", len(evs), logs)
	}
	if st := e.PublisherStats(); st.Published != 2 || st.Dropped != 0 {
		t.Errorf("publisher stats %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := r.srv.JetStream().Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if id := msg.Header.Get(jetstream.MsgIDHeader); id == "" || id == evs[0].DedupeID() {
		t.Errorf("Nats-Msg-Id %q is the event's own dedupe id, which anyone can predict", id)
	}
}

// TestARunWithoutACredentialIsRefused: on a secured server, a run the
// controller gave no credential publishes nothing (the run itself goes on).
func TestARunWithoutACredentialIsRefused(t *testing.T) {
	r := newSecuredRun(t)
	// Nothing will be delivered: the close need not wait long.
	_, logs := r.emitAndClose(t, time.Second)
	if evs := r.stored(t); len(evs) != 0 {
		t.Fatalf("an unauthenticated run stored %d events", len(evs))
	}
	if logs == "" {
		t.Error("nothing says the run's events went nowhere")
	}
}

// TestAnUnusableCredentialIsNamedNeverQuoted: a credential that does not
// parse leaves the run without NATS, saying which variable is at fault
// without any of its content.
func TestAnUnusableCredentialIsNamedNeverQuoted(t *testing.T) {
	r := newSecuredRun(t)
	const secret = "SUSECRETCONTENTOFABROKENCREDSFILE"
	r.env.NATSCreds = secret
	e, logs := r.emitAndClose(t, time.Second)
	if e.pub != nil {
		t.Error("a publisher was built on an unusable credential")
	}
	if !bytes.Contains([]byte(logs), []byte(runspec.EnvNATSCreds)) {
		t.Errorf("the log does not name the variable: %s", logs)
	}
	if bytes.Contains([]byte(logs), []byte(secret)) {
		t.Errorf("the log quotes the credential: %s", logs)
	}
}

// TestARecipesNATSSinkPublishesUnderItsNamespace: a recipe's nats sink
// sends the run's events, with the run's own credential, on its
// namespace's sink subject, where a platform subscriber gets them.
func TestARecipesNATSSinkPublishesUnderItsNamespace(t *testing.T) {
	r := newSecuredRun(t).withRunCredential(t)
	r.env.Getenv = func(k string) string {
		if k == sinks.EnvSinks {
			return `[{"type":"nats","subject":"alerts.high"}]`
		}
		return ""
	}
	sub, err := r.srv.Connect().SubscribeSync(natsauth.SinkSubject(r.env.Namespace, "alerts.high"))
	if err != nil {
		t.Fatal(err)
	}
	_, logs := r.emitAndClose(t, 10*time.Second)
	for i := range 2 {
		if _, err := sub.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("sink payload %d: %v; logs:\n%s", i+1, err, logs)
		}
	}
}
