package promptpack

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// publishedExample is the first example pack of the published schema
// document: a pack the format's authors call valid must validate here.
const publishedExample = `{
 "$schema": "https://promptpack.org/schema/v1/promptpack.schema.json",
 "id": "customer-support", "name": "Customer Support Pack", "version": "1.0.0",
 "description": "Complete customer support prompt pack with multiple task types",
 "template_engine": {"version": "v1", "syntax": "{{variable}}", "features": ["basic_substitution", "fragments"]},
 "prompts": {"support": {"id": "support", "name": "Support Bot", "description": "General customer support assistant",
   "version": "1.0.0", "system_template": "You are a {{role}} assistant for {{company}}.",
   "variables": [{"name": "role", "type": "string", "required": true, "description": "The role of the assistant", "example": "support agent"}],
   "tools": ["lookup_order"], "parameters": {"temperature": 0.7, "max_tokens": 1500}}},
 "tools": {"lookup_order": {"name": "lookup_order", "description": "Look up order details by order ID",
   "parameters": {"type": "object", "properties": {"order_id": {"type": "string", "description": "The order ID to look up"}}, "required": ["order_id"]}}}
}`

// withPrompt returns a minimal valid pack whose one prompt carries extra,
// a JSON object body fragment such as `"tools":["x"]`.
func withPrompt(extra string) string {
	return `{"id":"x","name":"n","version":"1.0.0","template_engine":{"version":"v1","syntax":"{{v}}"},` +
		`"prompts":{"p":{"id":"p","name":"p","version":"1.0.0","system_template":"t",` + extra + `}}}`
}

// withTop returns a minimal valid pack with extra top-level members.
func withTop(extra string) string {
	return `{"id":"x","name":"n","version":"1.0.0","template_engine":{"version":"v1","syntax":"{{v}}"},` +
		`"prompts":{"p":{"id":"p","name":"p","version":"1.0.0","system_template":"t"}},` + extra + `}`
}

// TestEmbeddedSchemaIsThePublishedOne ties the embedded copy to the
// published schema (promptpack.org, latest; docs/omnia-controllers.md
// names its version): same address, same version, the same draft and the
// same top-level contract.
func TestEmbeddedSchemaIsThePublishedOne(t *testing.T) {
	var doc struct {
		Schema     string         `json:"$schema"`
		ID         string         `json:"$id"`
		Title      string         `json:"title"`
		Version    string         `json:"version"`
		Required   []string       `json:"required"`
		Additional *bool          `json:"additionalProperties"`
		Properties map[string]any `json:"properties"`
		Defs       map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(schemaJSON, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.ID != SchemaURL || SchemaURL != "https://promptpack.org/schema/latest/promptpack.schema.json" {
		t.Errorf("$id %q, SchemaURL %q: want the published latest address", doc.ID, SchemaURL)
	}
	if doc.Version != SchemaVersion || doc.Title != "PromptPack Specification" || doc.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("version %q title %q draft %q", doc.Version, doc.Title, doc.Schema)
	}
	if !slices.Equal(doc.Required, []string{"id", "name", "version", "template_engine", "prompts"}) || doc.Additional == nil || *doc.Additional {
		t.Errorf("top-level contract: required %v, additionalProperties %v", doc.Required, doc.Additional)
	}
	for _, p := range []string{"$schema", "id", "name", "version", "description", "template_engine", "prompts", "fragments", "tools", "metadata", "compilation", "evals", "workflow", "agents", "skills"} {
		if _, ok := doc.Properties[p]; !ok {
			t.Errorf("top-level property %q of the published schema is missing", p)
		}
	}
	for _, d := range []string{"Prompt", "Variable", "Tool", "ToolPolicy", "PipelineConfig", "MiddlewareConfig", "Parameters", "Validator", "TestedModel", "ModelOverride", "MediaConfig", "ImageConfig", "AudioConfig", "VideoConfig", "DocumentConfig", "GenericMediaTypeConfig", "MultimodalExample", "ContentPart", "MediaReference", "Eval", "MetricDef", "WorkflowConfig", "WorkflowState", "AgentsConfig", "AgentDef", "SkillSource", "SkillPathSource", "InlineSkill"} {
		if _, ok := doc.Defs[d]; !ok {
			t.Errorf("definition %q of the published schema is missing", d)
		}
	}
}

// TestPublishedSchemaRules checks constraints that only the published
// schema has, each against a pack that breaks exactly that rule.
func TestPublishedSchemaRules(t *testing.T) {
	v := mustValidator(t)
	cases := []struct {
		name, doc string
		want      string // a substring of the error; empty means valid
	}{
		{"the published example pack is valid", publishedExample, ""},
		{"a prompt accepts only its listed fields", withPrompt(`"temperature":0.5`), "/prompts/p:"},
		{"a variable must say whether it is required", withPrompt(`"variables":[{"name":"role","type":"string"}]`), "/prompts/p/variables/0:"},
		{"a variable type is one of the five JSON kinds", withPrompt(`"variables":[{"name":"n","type":"date","required":false}]`), "/prompts/p/variables/0/type:"},
		{"temperature is at most 2", withPrompt(`"parameters":{"temperature":3}`), "/prompts/p/parameters/temperature:"},
		{"top_k may be null", withPrompt(`"parameters":{"top_k":null}`), ""},
		{"tool_choice is auto, required or none", withPrompt(`"tool_policy":{"tool_choice":"always"}`), "/prompts/p/tool_policy/tool_choice:"},
		{"a validator must say whether it is enabled", withPrompt(`"validators":[{"type":"max_length"}]`), "/prompts/p/validators/0:"},
		{"a tool needs a description", withTop(`"tools":{"t":{"name":"t"}}`), "/tools/t:"},
		{"tool parameters are an object schema", withTop(`"tools":{"t":{"name":"t","description":"d","parameters":{"type":"array","properties":{}}}}`), "/tools/t/parameters/type:"},
		{"template_engine accepts only its listed fields", `{"id":"x","name":"n","version":"1.0.0","template_engine":{"version":"v1","syntax":"s","mode":"x"},"prompts":{"p":{"id":"p","name":"p","version":"1.0.0","system_template":"t"}}}`, "/template_engine:"},
		{"template features come from a fixed list", `{"id":"x","name":"n","version":"1.0.0","template_engine":{"version":"v1","syntax":"s","features":["macros"]},"prompts":{"p":{"id":"p","name":"p","version":"1.0.0","system_template":"t"}}}`, "/template_engine/features/0:"},
		{"fragments are strings", withTop(`"fragments":{"f":1}`), "/fragments/f:"},
		{"compilation needs compiled_with, created_at and schema", withTop(`"compilation":{"compiled_with":"packc-v1"}`), "/compilation:"},
		{"compilation created_at is a date-time", withTop(`"compilation":{"compiled_with":"packc","created_at":"yesterday","schema":"v1"}`), "/compilation/created_at:"},
		{"an eval trigger comes from a fixed list", withTop(`"evals":[{"id":"e","type":"regex","trigger":"hourly"}]`), "/evals/0/trigger:"},
		{"a workflow needs an entry state", withTop(`"workflow":{"version":1,"states":{"s":{"prompt_task":"p","on_event":{}}}}`), "/workflow:"},
		{"agents name at least one member", withTop(`"agents":{"entry":"p","members":{}}`), "/agents/members:"},
		{"a skill is a path, a path object or an inline skill", withTop(`"skills":["./skills",{"path":"./more","preload":true},{"name":"s","description":"d","instructions":"i"}]`), ""},
		{"an inline skill needs instructions", withTop(`"skills":[{"name":"s","description":"d"}]`), "/skills/0:"},
		{"metadata language is a two-letter code", withTop(`"metadata":{"language":"eng"}`), "/metadata/language:"},
		{"metadata takes other fields too", withTop(`"metadata":{"team":"support"}`), ""},
		// The published media rule rejects every media block (see the
		// $comment in the schema); its own media example must validate.
		{"a media block with known types is valid", withPrompt(`"media":{"enabled":true,"supported_types":["image","model3d"],"image":{"max_size_mb":20,"allowed_formats":["jpeg","png"],"default_detail":"high"},"model3d":{"allowed_formats":["gltf"],"max_vertices":1000},"examples":[{"name":"e","role":"user","parts":[{"type":"text","text":"What is this?"},{"type":"image","media":{"file_path":"examples/photo.jpg","mime_type":"image/jpeg","detail":"high"}}]}]}`), ""},
		{"a media block needs enabled", withPrompt(`"media":{"supported_types":["image"]}`), "/prompts/p/media:"},
		{"a known media type keeps its own rules", withPrompt(`"media":{"enabled":true,"image":{"allowed_formats":["tiff"]}}`), "/prompts/p/media/image/allowed_formats/0:"},
		{"a custom media type key is lowercase", withPrompt(`"media":{"enabled":true,"Model3D":{}}`), "'Model3D' does not match"},
		{"a custom media type is an object", withPrompt(`"media":{"enabled":true,"model3d":"yes"}`), "/prompts/p/media/model3d:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Validate([]byte(tc.doc))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one at %q", err, tc.want)
			}
		})
	}
}

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

// TestExamplePackIsValid keeps the shipped example's pack.json valid
// against the published schema, so the example installs to Active.
func TestExamplePackIsValid(t *testing.T) {
	raw, err := os.ReadFile("../../../../examples/omnia/support-assistant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil || cm.Kind != "ConfigMap" {
			continue
		}
		content, ok := cm.Data[omniav1.PackJSONKey]
		if !ok {
			continue
		}
		found = true
		if err := mustValidator(t).Validate([]byte(content)); err != nil {
			t.Errorf("ConfigMap %s: %v", cm.Name, err)
		}
	}
	if !found {
		t.Fatal("the example has no pack.json ConfigMap")
	}
}
