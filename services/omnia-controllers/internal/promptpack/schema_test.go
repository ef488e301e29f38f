package promptpack

import (
	"strings"
	"testing"
)

func TestSchemaValidator(t *testing.T) {
	v := mustValidator(t)
	cases := []struct {
		name, doc string
		want      []string // substrings of the error; none means valid
	}{
		{"valid", validPack, nil},
		{"not JSON", `{`, []string{"not valid JSON"}},
		{"missing required", `{"id":"x"}`, []string{"/: missing properties", "name", "template_engine", "prompts"}},
		{"bad id and unknown field", `{"id":"X y","name":"n","version":"1.0.0","template_engine":{"version":"1","syntax":"s"},"prompts":{"p":{"id":"p","name":"p","version":"1.0.0","system_template":"t"}},"extra":1}`,
			[]string{"/id:", "extra"}},
		{"prompt without system_template", `{"id":"x","name":"n","version":"1.0.0","template_engine":{"version":"1","syntax":"s"},"prompts":{"p":{"id":"p","name":"p","version":"1.0.0"}}}`,
			[]string{"/prompts/p:", "system_template"}},
		{"bad version", `{"id":"x","name":"n","version":"one","template_engine":{"version":"1","syntax":"s"},"prompts":{"p":{"id":"p","name":"p","version":"1.0.0","system_template":"t"}}}`,
			[]string{"/version:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Validate([]byte(tc.doc))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			if !strings.HasPrefix(err.Error(), "invalid pack.json: ") {
				t.Errorf("message %q lacks the prefix", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err, w)
				}
			}
		})
	}
}

func FuzzSchemaValidator(f *testing.F) {
	f.Add([]byte(validPack))
	f.Add([]byte(`{"id":1}`))
	v, err := NewSchemaValidator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		_ = v.Validate(doc) // must not panic
	})
}
