package events

import (
	"errors"
	"fmt"

	gojson "github.com/goccy/go-json"
)

// errInvalidAck is a reply parsePubAck does not take for a publish ack.
// The window then treats its event as failed and publishOne sends it
// again, which the dedupe id makes harmless.
var errInvalidAck = errors.New("events: invalid publish ack")

// pubAck is one JetStream publish ack: the stream stored the message
// (Stream is set) or refused it (Error is set).
type pubAck struct {
	Stream    string       `json:"stream"`
	Seq       uint64       `json:"seq"`
	Duplicate bool         `json:"duplicate,omitempty"`
	Domain    string       `json:"domain,omitempty"`
	Error     *pubAckError `json:"error,omitempty"`
}

// pubAckError is the refusal a publish ack may carry.
type pubAckError struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code"`
	Description string `json:"description"`
}

// parsePubAck reads the JSON body of a JetStream publish ack, e.g.
// {"stream":"S","seq":7} or {"error":{"code":503,"err_code":10077,
// "description":"..."}}. It decodes with goccy/go-json, as the vendor
// parsers do: the window reads one ack per event, and encoding/json's
// reflection cost several times as much per ack.
func parsePubAck(data []byte) (pubAck, error) {
	var a pubAck
	if err := gojson.Unmarshal(data, &a); err != nil {
		return pubAck{}, fmt.Errorf("%w: %w", errInvalidAck, err)
	}
	return a, nil
}
