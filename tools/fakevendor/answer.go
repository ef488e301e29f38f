package fakevendor

import (
	"encoding/json"
	"net/http"
	"strings"
)

// AnswerPrefix starts every fake answer, so tests can predict the text.
const AnswerPrefix = "fake answer to: "

// Answer is the text the fake model returns for a prompt.
func Answer(prompt string) string { return AnswerPrefix + prompt }

// answerFor returns the reply for a prompt: plain text, or a JSON document
// shaped by schema when structured output was requested.
func answerFor(prompt string, schema any) string {
	if schema == nil {
		return Answer(prompt)
	}
	b, err := json.Marshal(fromSchema(schema, Answer(prompt), 0))
	if err != nil {
		return Answer(prompt)
	}
	return string(b)
}

// fromSchema builds a value that satisfies the common subset of JSON
// Schema; strings carry the answer so the prompt stays visible.
func fromSchema(schema any, text string, depth int) any {
	m, ok := schema.(map[string]any)
	if !ok || depth > 16 {
		return text
	}
	if enum, ok := m["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := m["type"].(string)
	if types, ok := m["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch strings.ToLower(typ) {
	case "object":
		out := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		for k, v := range props {
			out[k] = fromSchema(v, text, depth+1)
		}
		return out
	case "array":
		return []any{fromSchema(m["items"], text, depth+1)}
	case "integer", "number":
		return 0
	case "boolean":
		return false
	case "null":
		return nil
	default:
		return text
	}
}

// tokens is a crude, deterministic token count for usage fields.
func tokens(s string) int64 { return int64(len(strings.Fields(s))) + 1 }

// decodeJSON reads a JSON body of at most 64 MiB into v.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<20))
	dec.UseNumber()
	return dec.Decode(v)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// textOf flattens a content value that is either a string or a list of
// parts carrying "text".
func textOf(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		var parts []string
		for _, p := range c {
			if pm, ok := p.(map[string]any); ok {
				if t, ok := pm["text"].(string); ok {
					parts = append(parts, t)
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}
