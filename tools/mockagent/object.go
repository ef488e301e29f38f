package main

import (
	"bytes"
	"encoding/json"
)

// obj is a JSON object that keeps its keys in the order given, so lines
// read like the real CLIs' (type first).
type obj []field

type field struct {
	key   string
	value any
}

// o builds an obj from alternating keys and values.
func o(pairs ...any) obj {
	out := make(obj, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		k, _ := pairs[i].(string)
		out = append(out, field{k, pairs[i+1]})
	}
	return out
}

// MarshalJSON writes the fields in order.
func (m obj) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range m {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		v, err := json.Marshal(f.value)
		if err != nil {
			return nil, err
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
