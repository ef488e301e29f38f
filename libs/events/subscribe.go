package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Filter selects the events a consumer reads. Empty fields match
// everything.
type Filter struct {
	// Namespace and Agent narrow the NATS subject; Agent needs Namespace.
	Namespace, Agent string
	// UID keeps only the events of one run of the Agent (names are reused
	// after a delete, uids are not). It is checked after decoding.
	UID string
}

// Subject returns the NATS subject filter: agents.<ns>.<agent>.>,
// agents.<ns>.> or agents.>.
func (f Filter) Subject() string {
	switch {
	case f.Namespace == "":
		return eventsv1.SubjectPrefix + ".>"
	case f.Agent == "":
		ns, _ := subjectTokens(f.Namespace, "x")
		return eventsv1.SubjectPrefix + "." + ns + ".>"
	default:
		ns, agent := subjectTokens(f.Namespace, f.Agent)
		return eventsv1.SubjectPrefix + "." + ns + "." + agent + ".>"
	}
}

// subjectTokens maps namespace and agent to subject tokens exactly as
// RunEvent.Subject does, by asking it, so the two can never disagree.
func subjectTokens(namespace, agent string) (string, string) {
	s := (&eventsv1.RunEvent{Run: &eventsv1.RunIdentity{Namespace: namespace, Agent: agent}}).Subject()
	parts := strings.Split(s, ".") // tokens never contain '.', see Subject
	return parts[1], parts[2]
}

// ErrStop ends a replay without error when a Replay handler returns it.
var ErrStop = errors.New("events: stop replay")

// ReplayOptions tunes Replay.
type ReplayOptions struct {
	// Follow keeps waiting for new events after the stored ones; without it
	// Replay returns once it has caught up with the stream.
	Follow bool
	// Logger receives notices about undecodable messages (never payloads).
	Logger *slog.Logger
}

// Replay reads the events matching f from the first stored one, in stream
// order, through an ordered consumer (ephemeral, recreated by the client on
// gaps), and calls fn for each. It returns when ctx ends, fn returns an
// error (ErrStop ends quietly), or, without Follow, when the events stored
// at the start have been read.
func Replay(ctx context.Context, js jetstream.JetStream, f Filter, opts ReplayOptions, fn func(*eventsv1.RunEvent) error) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	cons, err := js.OrderedConsumer(ctx, StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{f.Subject()},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("replay %s: %w", f.Subject(), err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("replay %s: consumer info: %w", f.Subject(), err)
	}
	if !opts.Follow && info.NumPending == 0 {
		return nil
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("replay %s: %w", f.Subject(), err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop) // unblocks Next when ctx ends
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("replay %s: %w", f.Subject(), err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("replay %s: metadata: %w", f.Subject(), err)
		}
		if err := handle(msg, f, log, fn); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
		if !opts.Follow && md.NumPending == 0 {
			return nil
		}
	}
}

// handle decodes one message and passes it to fn when it matches f.
func handle(msg jetstream.Msg, f Filter, log *slog.Logger, fn func(*eventsv1.RunEvent) error) error {
	ev, err := DecodeMessage(msg.Data(), msg.Headers())
	if err != nil {
		// Someone published garbage on our subjects; skip it rather than
		// wedge every consumer on it.
		log.Warn("skipping undecodable run event", "subject", msg.Subject(), "err", err)
		return nil
	}
	if f.UID != "" && ev.GetRun().GetUid() != f.UID {
		return nil
	}
	return fn(ev)
}

// ReadAll returns every stored event matching f, in stream order.
func ReadAll(ctx context.Context, js jetstream.JetStream, f Filter) ([]*eventsv1.RunEvent, error) {
	var out []*eventsv1.RunEvent
	err := Replay(ctx, js, f, ReplayOptions{}, func(ev *eventsv1.RunEvent) error {
		out = append(out, ev)
		return nil
	})
	return out, err
}
