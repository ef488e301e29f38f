package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// rawDroppedHeader marks a message whose raw line was removed for size.
const rawDroppedHeader = "Agentplane-Raw-Dropped"

// outbox builds the Publisher's NATS messages into one reused message:
// its encode buffer, its header map and the header values are allocated
// once, not per event. Only the publishing loop uses it, one message at a
// time. Reuse is safe because nats.go copies Data and serialises Header
// into its write buffer before a publish returns, and nothing the
// Publisher calls keeps the message to send again (publishWindow uses
// core NATS publishes; publishOne's JetStream publish is synchronous).
type outbox struct {
	msg nats.Msg
	buf []byte
	// The header's value slices, reused: Header.Set would allocate one
	// per call.
	msgID, contentType, rawDropped []string

	// mac is the keyed hash of Nats-Msg-Id, nil without a key.
	mac    hash.Hash
	macSum []byte

	subjects subjectCache
}

func newOutbox(msgIDKey []byte) *outbox {
	o := &outbox{
		msg:         nats.Msg{Header: make(nats.Header, 3)},
		msgID:       make([]string, 1),
		contentType: []string{ContentTypeProtobuf},
		rawDropped:  []string{"true"},
	}
	if len(msgIDKey) > 0 {
		o.mac = hmac.New(sha256.New, msgIDKey)
		o.macSum = make([]byte, 0, sha256.Size)
	}
	return o
}

// message encodes ev into the outbox's message and returns it, valid until
// the next call; withoutRaw drops the vendor's original line (on a copy,
// the caller's event is never modified: sinks may be reading it).
func (o *outbox) message(ev *eventsv1.RunEvent, withoutRaw bool) (*nats.Msg, error) {
	if withoutRaw {
		c := proto.Clone(ev).(*eventsv1.RunEvent)
		c.Raw = nil
		ev = c
	}
	data, err := AppendMarshal(o.buf[:0], ev)
	if err != nil {
		return nil, err
	}
	o.buf = data
	m := &o.msg
	m.Subject = o.subjects.subject(ev)
	m.Reply = "" // publishWindow sets its own
	m.Data = data
	clear(m.Header)
	m.Header[ContentTypeHeader] = o.contentType
	if id := o.id(ev); id != "" {
		o.msgID[0] = id
		m.Header[jetstream.MsgIDHeader] = o.msgID
	}
	if withoutRaw {
		m.Header[rawDroppedHeader] = o.rawDropped
	}
	return m, nil
}

// id is the event's Nats-Msg-Id: its dedupe id, or an HMAC of it under the
// key, hex, truncated to 160 bits.
func (o *outbox) id(ev *eventsv1.RunEvent) string {
	id := ev.DedupeID()
	if id == "" || o.mac == nil {
		return id
	}
	o.mac.Reset()
	o.mac.Write([]byte(id))
	o.macSum = o.mac.Sum(o.macSum[:0])
	return hex.EncodeToString(o.macSum[:20])
}

// subjectCache remembers the subjects of the last run it saw, one per
// kind: a Publisher nearly always carries one run's events, and building
// agents.<namespace>.<agent>.<kind> per event is an allocation each.
type subjectCache struct {
	namespace, agent string
	byKind           map[eventsv1.EventKind]string
}

func (c *subjectCache) subject(ev *eventsv1.RunEvent) string {
	ns, agent := ev.GetRun().GetNamespace(), ev.GetRun().GetAgent()
	if c.byKind == nil || ns != c.namespace || agent != c.agent {
		c.namespace, c.agent = ns, agent
		c.byKind = make(map[eventsv1.EventKind]string, len(eventsv1.EventKind_name))
	}
	s, ok := c.byKind[ev.GetKind()]
	if !ok {
		s = ev.Subject()
		c.byKind[ev.GetKind()] = s
	}
	return s
}
