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

// schemaJSON is the PromptPack JSON Schema, embedded so validation needs no
// network at run time and compiles exactly once per process.
//
//go:embed promptpack.schema.json
var schemaJSON []byte

const schemaURL = "https://agentplane.dev/schema/promptpack.schema.json"

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
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("load embedded PromptPack schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
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
