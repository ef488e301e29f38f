package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamName is the JetStream stream that stores every run event.
const StreamName = "AGENT_EVENTS"

// StreamSubjects are the subjects the stream captures.
var StreamSubjects = []string{"agents.>"}

// Defaults of the stream created when it is missing. Limits discard the
// oldest events, never new ones, so a full stream can never make a
// producer retry forever.
const (
	DefaultStreamMaxAge     = 7 * 24 * time.Hour
	DefaultStreamMaxBytes   = 1 << 30
	DefaultStreamMaxMsgSize = 1 << 20
	// DefaultDuplicateWindow bounds how late a retried publish is still
	// recognised as a duplicate. Publishers retry every few seconds, so
	// minutes leave ample room for a NATS restart.
	DefaultDuplicateWindow = 5 * time.Minute
)

// StreamConfig returns the configuration the stream is created with.
// Zero arguments take the defaults above.
func StreamConfig(maxAge time.Duration, maxBytes int64, duplicates time.Duration) jetstream.StreamConfig {
	if maxAge <= 0 {
		maxAge = DefaultStreamMaxAge
	}
	if maxBytes <= 0 {
		maxBytes = DefaultStreamMaxBytes
	}
	if duplicates <= 0 {
		duplicates = DefaultDuplicateWindow
	}
	return jetstream.StreamConfig{
		Name:        StreamName,
		Description: "agentplane run events: agents.<namespace>.<agent>.<kind>",
		Subjects:    slices.Clone(StreamSubjects),
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      maxAge,
		MaxBytes:    maxBytes,
		MaxMsgSize:  DefaultStreamMaxMsgSize,
		Duplicates:  duplicates,
		Replicas:    1,
	}
}

// ErrStreamSubjects reports an existing stream that does not capture all
// of the subjects it should. It is a warning: the stream is used as it is.
var ErrStreamSubjects = errors.New("events: stream does not capture all run-event subjects")

// EnsureStream creates the stream with cfg when it does not exist. An
// existing stream is left as it is, because operators may have tuned it;
// only its subjects are checked (ErrStreamSubjects), since a stream that
// does not capture agents.> loses events.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, cfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil // another producer won the race
		}
		if err != nil {
			return fmt.Errorf("create stream %s: %w", cfg.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up stream %s: %w", cfg.Name, err)
	}
	for _, want := range cfg.Subjects {
		if !slices.Contains(s.CachedInfo().Config.Subjects, want) {
			return fmt.Errorf("%w: %s lacks %q", ErrStreamSubjects, cfg.Name, want)
		}
	}
	return nil
}
