package events

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// The NATS run-event message carries its encoding in a header (see
// docs/events.md, "The NATS stream"). The Publisher sends the protobuf binary
// encoding, several times cheaper to produce than protojson; a message
// without the header is protojson, which is what producers before the
// header sent, so stored streams and older producers still decode.
const (
	// ContentTypeHeader names the header that says how Data is encoded.
	ContentTypeHeader = "Content-Type"
	// ContentTypeProtobuf is proto.Marshal of the RunEvent.
	ContentTypeProtobuf = "application/protobuf"
	// ContentTypeJSON is the protojson mapping Encode produces; a message
	// without ContentTypeHeader is read as this.
	ContentTypeJSON = "application/json"
)

// ErrContentType reports a message in an encoding this consumer does not
// read.
var ErrContentType = errors.New("events: unsupported content type")

// binaryMarshal is not deterministic (map order may vary between two
// encodings of one event): dedupe is by Nats-Msg-Id, never by content, and
// sorting every tool call's input costs more than it is worth.
var binaryMarshal = proto.MarshalOptions{}

// AppendMarshal appends the protobuf binary encoding of ev to dst: the
// Data of a NATS message whose ContentTypeHeader is ContentTypeProtobuf.
func AppendMarshal(dst []byte, ev *eventsv1.RunEvent) ([]byte, error) {
	b, err := binaryMarshal.MarshalAppend(dst, ev)
	if err != nil {
		return dst, fmt.Errorf("encode run event: %w", err)
	}
	return b, nil
}

// DecodeMessage decodes the Data of a NATS run-event message given its
// header: protobuf when ContentTypeHeader says so, protojson when it says
// JSON or is absent. Unknown fields are accepted (kept by protobuf,
// dropped by JSON) so old consumers read new producers' events.
func DecodeMessage(data []byte, h nats.Header) (*eventsv1.RunEvent, error) {
	switch ct := mediaType(h.Get(ContentTypeHeader)); ct {
	case "", ContentTypeJSON:
		return Decode(data)
	case ContentTypeProtobuf:
		ev := &eventsv1.RunEvent{}
		if err := proto.Unmarshal(data, ev); err != nil {
			return nil, fmt.Errorf("decode run event: %w", err)
		}
		return ev, nil
	default:
		return nil, fmt.Errorf("%w %q", ErrContentType, ct)
	}
}

// mediaType is a Content-Type value without parameters, lowercased, as
// media types compare case-insensitively.
func mediaType(v string) string {
	v, _, _ = strings.Cut(v, ";")
	return strings.ToLower(strings.TrimSpace(v))
}
