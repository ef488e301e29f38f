package v1alpha1

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestEffectiveExecution(t *testing.T) {
	checkDefaulting(t, func(m ExecutionMode) ExecutionMode { return (&AgentDefinitionSpec{Execution: m}).EffectiveExecution() }, []defaulting[ExecutionMode, ExecutionMode]{
		{"unset execution is job", "", ExecutionJob},
		{"job stays job", ExecutionJob, ExecutionJob},
		{"batch stays batch", ExecutionBatch, ExecutionBatch},
		{"realtime stays realtime", ExecutionRealtime, ExecutionRealtime},
	})
}

func TestEffectivePermissionMode(t *testing.T) {
	checkDefaulting(t, func(m PermissionMode) PermissionMode {
		return (&AgentDefinitionSpec{PermissionMode: m}).EffectivePermissionMode()
	}, []defaulting[PermissionMode, PermissionMode]{
		{"unset permission mode is auto", "", PermissionAuto},
		{"auto stays auto", PermissionAuto, PermissionAuto},
		{"explicit bypass is bypass", PermissionBypass, PermissionBypass},
		{"a typo never widens to bypass", "bypas", PermissionAuto},
	})
}

func TestBatchDefaults(t *testing.T) {
	for _, tc := range []struct {
		name        string
		batch       *BatchSpec
		wantTokens  int64
		wantTimeout int64
		wantOnTO    OnTimeoutPolicy
	}{
		{"no batch block uses every default", nil, DefaultBatchMaxTokens, DefaultBatchTimeoutMinutes, OnTimeoutFail},
		{"empty batch block uses every default", &BatchSpec{}, DefaultBatchMaxTokens, DefaultBatchTimeoutMinutes, OnTimeoutFail},
		{"set values are kept", &BatchSpec{MaxTokens: 100, TimeoutMinutes: 7, OnTimeout: OnTimeoutFallback}, 100, 7, OnTimeoutFallback},
		{"explicit fail is fail", &BatchSpec{OnTimeout: OnTimeoutFail}, DefaultBatchMaxTokens, DefaultBatchTimeoutMinutes, OnTimeoutFail},
		{"unknown onTimeout fails rather than falls back", &BatchSpec{OnTimeout: "retry"}, DefaultBatchMaxTokens, DefaultBatchTimeoutMinutes, OnTimeoutFail},
		{"non-positive values use the defaults", &BatchSpec{MaxTokens: -1, TimeoutMinutes: 0}, DefaultBatchMaxTokens, DefaultBatchTimeoutMinutes, OnTimeoutFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.batch.EffectiveMaxTokens(); got != tc.wantTokens {
				t.Errorf("EffectiveMaxTokens() = %d, want %d", got, tc.wantTokens)
			}
			if got := tc.batch.EffectiveTimeoutMinutes(); got != tc.wantTimeout {
				t.Errorf("EffectiveTimeoutMinutes() = %d, want %d", got, tc.wantTimeout)
			}
			if got := tc.batch.EffectiveOnTimeout(); got != tc.wantOnTO {
				t.Errorf("EffectiveOnTimeout() = %q, want %q", got, tc.wantOnTO)
			}
		})
	}
}

func TestExecCommand(t *testing.T) {
	cfg := func(raw string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(raw)} }
	for _, tc := range []struct {
		name    string
		config  *apiextensionsv1.JSON
		want    []string
		wantErr string
	}{
		{"command list is the argv", cfg(`{"command":["sh","-c","echo hi"],"other":1}`), []string{"sh", "-c", "echo hi"}, ""},
		{"single program is enough", cfg(`{"command":["/bin/agent"]}`), []string{"/bin/agent"}, ""},
		{"missing tool_config is refused", nil, nil, "tool_config is not set"},
		{"empty raw tool_config is refused", cfg(``), nil, "tool_config is not set"},
		{"missing command is refused", cfg(`{"args":["x"]}`), nil, "it is not set"},
		{"null command is refused", cfg(`{"command":null}`), nil, "it is not set"},
		{"empty command is refused", cfg(`{"command":[]}`), nil, "program name is empty"},
		{"empty program name is refused", cfg(`{"command":["","x"]}`), nil, "program name is empty"},
		{"string command is refused", cfg(`{"command":"sh -c x"}`), nil, "is not a list of strings"},
		{"non-string items are refused", cfg(`{"command":["sh",1]}`), nil, "is not a list of strings"},
		{"non-object tool_config is refused", cfg(`["sh"]`), nil, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &AgentDefinitionSpec{ToolConfig: tc.config}
			got, err := s.ExecCommand()
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrNoExecCommand) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ExecCommand() error = %v, want ErrNoExecCommand containing %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), "spec.tool_config.command") {
					t.Errorf("error %q does not name the field", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ExecCommand() error = %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ExecCommand() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAgentDefinitionWireNames(t *testing.T) {
	// Existing recipe manifests use these exact (snake_case) keys.
	raw := `{
	  "description": "d", "model": "m", "prompt": "p",
	  "allowed_tools": ["Read"], "disallowed_tools": ["WebFetch"],
	  "permission_mode": "bypass", "max_turns": 3, "execution": "batch",
	  "batch": {"maxTokens": 10, "timeoutMinutes": 5, "onTimeout": "fallback"},
	  "tool_config": {"command": ["x"]},
	  "resources": {
	    "env": [{"name": "A", "value": "1"}],
	    "secrets": [{"name": "K", "ref": "k"}],
	    "mcp_servers": [{"name": "m", "transport": "http", "url": "u", "headers_secret": "h"}],
	    "repos": [{"name": "r", "url": "o/r", "ref": "main", "path": "p", "token_secret": "t"}],
	    "skills": ["s"], "skills_source": "https://s",
	    "conversation": {"source": "src", "id": "i", "pin": "pn", "headers_secret": "ch"}
	  },
	  "output": {
	    "format": "stream-json", "schema": {"type": "object"},
	    "select": [{"event": "tool_call", "tool": "Edit", "role": "assistant", "contains": "x"}],
	    "sinks": [{"type": "http", "url": "u", "headers_secret": "sh", "path": "p"}, {"type": "nats", "subject": "ci.results"}],
	    "watch": [{"event": "e", "path": "f"}]
	  }
	}`
	var s AgentDefinitionSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"allowed_tools is read", len(s.AllowedTools) == 1},
		{"disallowed_tools is read", len(s.DisallowedTools) == 1},
		{"permission_mode is read", s.PermissionMode == PermissionBypass},
		{"max_turns is read", s.MaxTurns == 3},
		{"execution is read", s.Execution == ExecutionBatch},
		{"batch is read", s.Batch != nil && s.Batch.MaxTokens == 10 && s.Batch.TimeoutMinutes == 5 && s.Batch.OnTimeout == OnTimeoutFallback},
		{"tool_config is kept raw", s.ToolConfig != nil && strings.Contains(string(s.ToolConfig.Raw), "command")},
		{"resources.env is read", len(s.Resources.Env) == 1 && s.Resources.Env[0].Value == "1"},
		{"resources.secrets ref is read", s.Resources.Secrets[0].Ref == "k"},
		{"mcp_servers headers_secret is read", s.Resources.MCPServers[0].HeadersSecret == "h"},
		{"repos token_secret is read", s.Resources.Repos[0].TokenSecret == "t"},
		{"skills_source is read", s.Resources.SkillsSource == "https://s"},
		{"conversation headers_secret is read", s.Resources.Conversation.HeadersSecret == "ch"},
		{"output.schema is kept raw", s.Output.Schema != nil && strings.Contains(string(s.Output.Schema.Raw), "object")},
		{"output.select is read", s.Output.Select[0].Event == SelectToolCall && s.Output.Select[0].Role == RoleAssistant},
		{"sink headers_secret is read", s.Output.Sinks[0].HeadersSecret == "sh"},
		{"nats sink subject is read", s.Output.Sinks[1].Type == SinkNATS && s.Output.Sinks[1].Subject == "ci.results"},
		{"output.watch is read", s.Output.Watch[0].Path == "f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Errorf("decoded spec: %+v", s)
			}
		})
	}
	// And the same keys come back out.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"allowed_tools"`, `"disallowed_tools"`, `"permission_mode"`, `"max_turns"`,
		`"mcp_servers"`, `"headers_secret"`, `"token_secret"`, `"skills_source"`, `"tool_config"`} {
		t.Run(key+" is written back", func(t *testing.T) {
			if !strings.Contains(string(b), key) {
				t.Errorf("%s missing from %s", key, b)
			}
		})
	}
}

func TestDeepCopyDoesNotShareRawJSON(t *testing.T) {
	orig := &AgentDefinition{Spec: AgentDefinitionSpec{
		ToolConfig: &apiextensionsv1.JSON{Raw: []byte(`{"command":["a"]}`)},
		Output:     &OutputSpec{Schema: &apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}},
	}}
	cp := orig.DeepCopy()
	cp.Spec.ToolConfig.Raw[2] = 'X'
	cp.Spec.Output.Schema.Raw[2] = 'X'
	if string(orig.Spec.ToolConfig.Raw) != `{"command":["a"]}` || string(orig.Spec.Output.Schema.Raw) != `{"type":"object"}` {
		t.Errorf("DeepCopy shares raw JSON with the original: %s %s", orig.Spec.ToolConfig.Raw, orig.Spec.Output.Schema.Raw)
	}
}
