// Package schema holds the JSON Schema of the sink payload, the document
// http and file sinks receive (docs/events.md), so receivers and tests
// check payloads against one published contract.
package schema

import _ "embed"

// SinkPayload is the JSON Schema (draft 2020-12) of one sink payload.
//
//go:embed sink-payload.schema.json
var SinkPayload []byte
