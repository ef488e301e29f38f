package promptpack

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaJSON is the published PromptPack JSON Schema (version 1.3.1, the
// one promptpack.org serves as "latest"), embedded so validation needs no
// network at run time and compiles exactly once per process. It carries
// every constraint of the published document; its descriptions and
// examples are left out, because they do not change what validates.
//
//go:embed promptpack.schema.json
var schemaJSON []byte

// SchemaURL is the address the PromptPack format publishes its schema at;
// the embedded copy is registered under it, so a pack's own "$schema"
// pointing there resolves to the embedded copy and never to the network.
const SchemaURL = "https://promptpack.org/schema/latest/promptpack.schema.json"

// SchemaVersion is the version of the published schema that is embedded.
const SchemaVersion = "1.3.1"

// Validator checks pack.json content. The error it returns is the message
// shown in the SchemaValid condition and the SchemaValidationFailed event.
type Validator interface {
	Validate(packJSON []byte) error
}

// SchemaValidator validates pack.json against the embedded PromptPack JSON
// Schema (draft 2020-12).
type SchemaValidator struct {
	schema *jsonschema.Schema
}

// NewSchemaValidator compiles the embedded schema.
func NewSchemaValidator() (*SchemaValidator, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("parse embedded PromptPack schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(SchemaURL, doc); err != nil {
		return nil, fmt.Errorf("load embedded PromptPack schema: %w", err)
	}
	s, err := c.Compile(SchemaURL)
	if err != nil {
		return nil, fmt.Errorf("compile embedded PromptPack schema: %w", err)
	}
	return &SchemaValidator{schema: s}, nil
}

// maxSchemaErrors bounds how many violations one message lists; the rest
// are counted, so a badly broken file still yields a readable condition.
const maxSchemaErrors = 8

// printer renders the validator's messages; without one they all read
// "validation failed".
var printer = message.NewPrinter(language.English)

// Validate parses packJSON and validates it. The message lists each
// violation as "<json pointer>: <what is wrong>", sorted by location.
func (v *SchemaValidator) Validate(packJSON []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(packJSON))
	if err != nil {
		return fmt.Errorf("invalid pack.json: not valid JSON: %w", err)
	}
	err = v.schema.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("invalid pack.json: %w", err)
	}
	var msgs []string
	collect(ve, &msgs)
	sort.Strings(msgs)
	msgs = dedupe(msgs)
	if len(msgs) > maxSchemaErrors {
		more := len(msgs) - maxSchemaErrors
		msgs = append(msgs[:maxSchemaErrors], fmt.Sprintf("and %d more", more))
	}
	return fmt.Errorf("invalid pack.json: %s", strings.Join(msgs, "; "))
}

// collect gathers the leaves of the error tree: wrapper errors ("doesn't
// validate with ...") add nothing a reader can act on.
func collect(e *jsonschema.ValidationError, out *[]string) {
	if len(e.Causes) == 0 {
		loc := "/" + strings.Join(e.InstanceLocation, "/")
		*out = append(*out, loc+": "+e.ErrorKind.LocalizedString(printer))
		return
	}
	for _, c := range e.Causes {
		collect(c, out)
	}
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, m := range s {
		if i == 0 || m != s[i-1] {
			out = append(out, m)
		}
	}
	return out
}
