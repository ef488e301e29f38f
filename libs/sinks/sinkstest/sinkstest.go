// Package sinkstest checks sink payloads against their published JSON
// Schema, for tests anywhere in the repository that receive payloads the
// way a user's receiver does.
package sinkstest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentplane/agentplane/libs/sinks/schema"
	"github.com/agentplane/agentplane/libs/truncate"
)

var (
	once     sync.Once
	compiled *jsonschema.Schema
	compErr  error
)

func payloadSchema() (*jsonschema.Schema, error) {
	once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.SinkPayload))
		if err != nil {
			compErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		const url = "sink-payload.schema.json"
		if err := c.AddResource(url, doc); err != nil {
			compErr = err
			return
		}
		compiled, compErr = c.Compile(url)
	})
	return compiled, compErr
}

// Validate returns nil when payload is one valid sink payload.
func Validate(payload []byte) error {
	s, err := payloadSchema()
	if err != nil {
		return fmt.Errorf("sink payload schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("sink payload is not JSON: %w", err)
	}
	return s.Validate(inst)
}

// Check fails t when payload is not a valid sink payload.
func Check(t testing.TB, payload []byte) {
	t.Helper()
	if err := Validate(payload); err != nil {
		t.Errorf("sink payload %s does not match docs/events.md's schema: %v", truncate.String(string(payload), 300), err)
	}
}
