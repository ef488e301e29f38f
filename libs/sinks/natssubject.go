package sinks

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// natsFlushTimeout bounds NATSSubject.Close's flush when its context has
// no deadline of its own.
const natsFlushTimeout = 5 * time.Second

// NATSSubject publishes each sink payload with core NATS on one subject:
// a recipe's nats sink, on agentplane.sinks.<namespace>.<subject>
// (natsauth.SinkSubject). Core NATS keeps nothing: a payload reaches the
// subscribers connected when it is published, and no one else. While the
// connection is re-established, nats.go buffers what is published.
type NATSSubject struct {
	nc      *nats.Conn
	subject string
}

// NewNATSSubject returns a sink publishing on subject through nc. The sink
// does not own nc: closing the sink flushes nc but does not close it.
func NewNATSSubject(nc *nats.Conn, subject string) *NATSSubject {
	return &NATSSubject{nc: nc, subject: subject}
}

// Subject is the full subject the sink publishes on.
func (s *NATSSubject) Subject() string { return s.subject }

// DeliverPayload implements PayloadSink. An error means the payload was
// not handed to the connection (it is closed, or the payload is over the
// server's size limit); the server's refusals arrive later, on the
// connection's error handler.
func (s *NATSSubject) DeliverPayload(_ context.Context, payload []byte) error {
	if err := s.nc.Publish(s.subject, payload); err != nil {
		return fmt.Errorf("nats sink %s: %w", s.subject, err)
	}
	return nil
}

// Close implements PayloadSink: it waits, within ctx, until the server
// has read what the sink published, so a run pod that exits next loses
// nothing it could still send. A connection its owner already closed has
// nothing left to flush.
func (s *NATSSubject) Close(ctx context.Context) error {
	if s.nc.IsClosed() {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, natsFlushTimeout)
		defer cancel()
	}
	if err := s.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("nats sink %s: flush: %w", s.subject, err)
	}
	return nil
}
