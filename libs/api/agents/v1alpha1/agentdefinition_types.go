package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExecutionMode says how the runs of an AgentDefinition are executed.
// +kubebuilder:validation:Enum=job;batch;realtime
type ExecutionMode string

const (
	// ExecutionJob runs the vendor CLI in a Kubernetes Job, unattended.
	ExecutionJob ExecutionMode = "job"
	// ExecutionBatch sends the rendered prompt to the model vendor's batch
	// API, which is cheaper but slower; no pod runs unless it falls back.
	ExecutionBatch ExecutionMode = "batch"
	// ExecutionRealtime runs a Job whose pod serves an interactive session
	// that callers prompt through the realtime gateway.
	ExecutionRealtime ExecutionMode = "realtime"
)

// PermissionMode controls what the agent may do without asking.
// +kubebuilder:validation:Enum=auto;bypass
type PermissionMode string

const (
	// PermissionAuto limits the agent to allowed_tools (minus
	// disallowed_tools). The safe default.
	PermissionAuto PermissionMode = "auto"
	// PermissionBypass lets the agent use any tool except disallowed_tools.
	PermissionBypass PermissionMode = "bypass"
)

// OnTimeoutPolicy says what happens to a batch run that outlives batch.timeoutMinutes.
// +kubebuilder:validation:Enum=fail;fallback
type OnTimeoutPolicy string

const (
	// OnTimeoutFail cancels the batch and fails the Agent.
	OnTimeoutFail OnTimeoutPolicy = "fail"
	// OnTimeoutFallback cancels the batch and runs the Agent as an ordinary Job.
	OnTimeoutFallback OnTimeoutPolicy = "fallback"
)

// MCPTransport is how the agent reaches an MCP server.
// +kubebuilder:validation:Enum=stdio;http;sse
type MCPTransport string

const (
	// MCPTransportStdio starts the server as a local process (command, args).
	MCPTransportStdio MCPTransport = "stdio"
	// MCPTransportHTTP talks to the server over streamable HTTP at url.
	MCPTransportHTTP MCPTransport = "http"
	// MCPTransportSSE talks to the server over server-sent events at url.
	MCPTransportSSE MCPTransport = "sse"
)

// SinkType is where run events are delivered.
// +kubebuilder:validation:Enum=stdout;http;file;nats
type SinkType string

const (
	// SinkStdout writes each event line, bare, to the pod's stdout (and so
	// to status.output).
	SinkStdout SinkType = "stdout"
	// SinkHTTP POSTs each event, wrapped in its source envelope, to url.
	SinkHTTP SinkType = "http"
	// SinkFile appends each enveloped event as one line to path in the pod.
	SinkFile SinkType = "file"
	// SinkNATS publishes each enveloped event with core NATS on subject
	// under the namespace's prefix, agentplane.sinks.<namespace>.<subject>.
	SinkNATS SinkType = "nats"
)

// SinkSubjectPattern is what a nats sink's subject may look like: NATS
// subject tokens of letters, digits, "_" and "-", joined by ".". It has no
// wildcard ("*", ">"), no empty token and no space, so the subject names
// exactly one subject below the namespace's prefix and cannot reach out
// of it. The CRD carries the same pattern.
const SinkSubjectPattern = `^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`

// SinkSubjectMaxLength bounds a nats sink's subject (the CRD's maxLength).
const SinkSubjectMaxLength = 200

// OutputFormat is the declared output format of a recipe.
// +kubebuilder:validation:Enum=text;json;stream-json
type OutputFormat string

const (
	// OutputFormatText is plain text.
	OutputFormatText OutputFormat = "text"
	// OutputFormatJSON is one JSON document.
	OutputFormatJSON OutputFormat = "json"
	// OutputFormatStreamJSON is one JSON event per line.
	OutputFormatStreamJSON OutputFormat = "stream-json"
)

// SelectEvent is a kind of vendor CLI event that output.select can pass to sinks.
// +kubebuilder:validation:Enum=tool_call;message;tool_result;result;usage
type SelectEvent string

const (
	// SelectToolCall matches the agent calling a tool.
	SelectToolCall SelectEvent = "tool_call"
	// SelectMessage matches a message of the agent (or of a user turn).
	SelectMessage SelectEvent = "message"
	// SelectToolResult matches a tool returning.
	SelectToolResult SelectEvent = "tool_result"
	// SelectResult matches the final result of the run.
	SelectResult SelectEvent = "result"
	// SelectUsage matches a report of token usage.
	SelectUsage SelectEvent = "usage"
)

// SelectRole is the speaker of a message event.
// +kubebuilder:validation:Enum=assistant;user
type SelectRole string

const (
	// RoleAssistant is the model.
	RoleAssistant SelectRole = "assistant"
	// RoleUser is the user turn (tool results come back as user turns).
	RoleUser SelectRole = "user"
)

const (
	// DefaultBatchMaxTokens is the output token cap of a batch request
	// whose definition sets no batch.maxTokens.
	DefaultBatchMaxTokens = 8192
	// DefaultBatchTimeoutMinutes is how long a batch run may stay in flight
	// when batch.timeoutMinutes is unset: one day, the window the vendors
	// promise to finish a batch in.
	DefaultBatchTimeoutMinutes = 24 * 60
)

// EnvEntry is a literal environment variable for the run.
type EnvEntry struct {
	// name of the variable. Names the controller sets itself (AGENT_*,
	// HOME, PATH, TASK_ID and the like) are ignored.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[^=]+$`
	Name string `json:"name"`
	// value of the variable, at most 32 KiB. Do not put credentials here;
	// use secrets.
	// +required
	// +kubebuilder:validation:MaxLength=32768
	Value string `json:"value"`
}

// SecretEnvEntry exposes one key of the agent-secrets Secret to the run as
// an environment variable. The value never appears in the Job spec; the
// kubelet resolves it.
type SecretEnvEntry struct {
	// name of the environment variable the run sees.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[^=]+$`
	Name string `json:"name"`
	// ref is the key in the agent-secrets Secret. The key must exist or the
	// run pod cannot start.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Ref string `json:"ref"`
}

// MCPServer is a Model Context Protocol server offered to the agent.
// +kubebuilder:validation:XValidation:rule="self.transport != 'stdio' || (has(self.command) && size(self.command) > 0)",message="command is required when transport is stdio",fieldPath=".command",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="!(self.transport in ['http', 'sse']) || (has(self.url) && size(self.url) > 0)",message="url is required when transport is http or sse",fieldPath=".url",reason="FieldValueRequired"
type MCPServer struct {
	// name the agent knows the server by.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// transport is stdio (a local process started from command and args),
	// http or sse (a remote server at url).
	// +required
	Transport MCPTransport `json:"transport"`
	// command starts a stdio server. Required when transport is stdio.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Command string `json:"command,omitempty"`
	// args are passed to command; each at most 4096 bytes.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=4096
	Args []string `json:"args,omitempty"`
	// url of an http or sse server. Required for those transports.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	URL string `json:"url,omitempty"`
	// headers_secret is a key of agent-secrets whose value is sent as the
	// Authorization header to the server. The run sees it as an environment
	// variable named after the key, upper-cased, with every other character
	// than letters and digits turned into "_".
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]*$`
	HeadersSecret string `json:"headers_secret,omitempty"`
}

// RepoSource is a git repository cloned into the workspace before the agent starts.
type RepoSource struct {
	// name of the repository; also its directory under /workspace when path is unset.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// url to clone: "owner/name" for GitHub, or any https or ssh git URL.
	// Credentials embedded in the URL are removed; use token_secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	URL string `json:"url"`
	// ref (branch, tag or commit) to check out after cloning. Default: the
	// remote's default branch.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Ref string `json:"ref,omitempty"`
	// path to clone into, relative to /workspace or absolute below it.
	// Paths outside the workspace are skipped. Default: the name.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path,omitempty"`
	// token_secret is a key of agent-secrets holding a token for cloning
	// and, later, pushing. The first repository's token is also offered as
	// GH_TOKEN for the gh CLI.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]*$`
	TokenSecret string `json:"token_secret,omitempty"`
}

// ConversationSpec stores and restores the vendor CLI's conversation state
// as an archive on an HTTP store, so a later run can continue it.
type ConversationSpec struct {
	// source is the base URL of the conversation store. Archives are read
	// from <source>/<id> and written to <source>/<pin>.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Source string `json:"source,omitempty"`
	// id of a stored conversation to continue. Like an Agent's
	// spec.resumeSession it is one word of letters, digits, "_" and "-"
	// starting with a letter or digit: it becomes a path of the store and
	// an argument of the CLI.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_-]*$`
	ID string `json:"id,omitempty"`
	// pin is the id the conversation is saved under when the run ends; with
	// id set too, the run forks id into pin. The same characters as id.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9_-]*$`
	Pin string `json:"pin,omitempty"`
	// headers_secret is a key of agent-secrets whose value is one full HTTP
	// header line (e.g. "Authorization: Bearer ...") sent to the store.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]*$`
	HeadersSecret string `json:"headers_secret,omitempty"`
}

// AgentResources is what the run is given: environment, secrets, MCP
// servers, repositories, skills and conversation state.
type AgentResources struct {
	// env are literal environment variables for the run.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Env []EnvEntry `json:"env,omitempty"`
	// secrets expose keys of the agent-secrets Secret as environment variables.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Secrets []SecretEnvEntry `json:"secrets,omitempty"`
	// mcp_servers are MCP servers the agent may use.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	MCPServers []MCPServer `json:"mcp_servers,omitempty"`
	// repos are cloned into /workspace before the agent starts.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Repos []RepoSource `json:"repos,omitempty"`
	// skills are names of skill archives fetched from skills_source
	// (<skills_source>/<name>.tar.gz). Skills found in the cloned
	// repositories' .claude/skills are installed too.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_-][A-Za-z0-9._-]*$`
	Skills []string `json:"skills,omitempty"`
	// skills_source is the base URL of the skill registry; its settings.json
	// becomes the agent's settings.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	SkillsSource string `json:"skills_source,omitempty"`
	// conversation restores and saves the CLI's conversation state.
	// +optional
	Conversation *ConversationSpec `json:"conversation,omitempty"`
}

// OutputSelector passes matching vendor CLI events to the sinks. An event
// passes when any selector matches it.
type OutputSelector struct {
	// event is the kind of event to pass.
	// +required
	Event SelectEvent `json:"event"`
	// tool, when set, narrows tool_call events to this tool name (exact match).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Tool string `json:"tool,omitempty"`
	// role is accepted for compatibility; matching ignores it.
	// +optional
	Role SelectRole `json:"role,omitempty"`
	// contains, when set, requires this case-sensitive text in the event.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Contains string `json:"contains,omitempty"`
}

// OutputSink is a destination for run events: the vendor CLI's event lines
// (filtered by select) and the run's lifecycle and file events.
// +kubebuilder:validation:XValidation:rule="self.type != 'http' || (has(self.url) && size(self.url) > 0)",message="url is required when type is http",fieldPath=".url",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type != 'file' || (has(self.path) && size(self.path) > 0)",message="path is required when type is file",fieldPath=".path",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type != 'nats' || (has(self.subject) && size(self.subject) > 0)",message="subject is required when type is nats",fieldPath=".subject",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.type == 'nats' || !has(self.subject)",message="subject is only for type nats",fieldPath=".subject",reason="FieldValueForbidden"
type OutputSink struct {
	// type is stdout, http, file or nats.
	// +required
	Type SinkType `json:"type"`
	// url events are POSTed to. Required when type is http.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	URL string `json:"url,omitempty"`
	// headers_secret is a key of agent-secrets whose value is extra HTTP
	// header lines ("Name: value", one per line) for an http sink.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]*$`
	HeadersSecret string `json:"headers_secret,omitempty"`
	// path of the file events are appended to. Required when type is file.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path,omitempty"`
	// subject a nats sink publishes on, relative to the namespace's prefix:
	// the run publishes each enveloped event with core NATS (no
	// persistence) on agentplane.sinks.<namespace>.<subject>. Dot-separated
	// tokens of letters, digits, "_" and "-", with no wildcard
	// (SinkSubjectPattern). Required when type is nats, and only for it.
	// +optional
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`
	Subject string `json:"subject,omitempty"`
}

// OutputWatch sends a file's content as an event when the agent ends.
type OutputWatch struct {
	// event names the file event sent to the sinks.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Event string `json:"event"`
	// path of the file, relative to /workspace or absolute below it. Files
	// outside the workspace are never read; files over 128 KiB are reported
	// as too large.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path"`
}

// OutputSpec is where a run's events go and what is kept.
type OutputSpec struct {
	// format is accepted for compatibility and not used: runs always emit
	// one JSON event per line.
	// +optional
	Format OutputFormat `json:"format,omitempty"`
	// schema is a JSON Schema the final answer must follow. Batch runs send
	// it to the vendor as the structured-output format.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Schema *apiextensionsv1.JSON `json:"schema,omitempty"`
	// select passes only matching CLI events to the sinks; unset passes all.
	// Lifecycle and file events always pass, and stdout always gets everything.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Select []OutputSelector `json:"select,omitempty"`
	// sinks receive the run's events.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Sinks []OutputSink `json:"sinks,omitempty"`
	// watch sends the content of files the agent wrote as events when it ends.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Watch []OutputWatch `json:"watch,omitempty"`
}

// BatchSpec tunes batch execution. Only allowed when execution is batch.
type BatchSpec struct {
	// maxTokens caps the tokens of the model's answer. Default 8192.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxTokens int32 `json:"maxTokens,omitempty"`
	// timeoutMinutes is how long the batch may stay in flight, counted from
	// status.startedAt, before it is cancelled and onTimeout applies.
	// Default 1440 (one day); at most 525600 (one year).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=525600
	TimeoutMinutes int32 `json:"timeoutMinutes,omitempty"`
	// onTimeout is fail (the Agent fails with "batch timed out") or fallback
	// (the Agent runs as an ordinary Job instead). Default fail.
	// +optional
	// +kubebuilder:default=fail
	OnTimeout OnTimeoutPolicy `json:"onTimeout,omitempty"`
}

// EffectiveMaxTokens returns maxTokens, or DefaultBatchMaxTokens when unset.
// b may be nil.
func (b *BatchSpec) EffectiveMaxTokens() int64 {
	if b == nil || b.MaxTokens < 1 {
		return DefaultBatchMaxTokens
	}
	return int64(b.MaxTokens)
}

// EffectiveTimeoutMinutes returns timeoutMinutes, or
// DefaultBatchTimeoutMinutes when unset. b may be nil.
func (b *BatchSpec) EffectiveTimeoutMinutes() int64 {
	if b == nil || b.TimeoutMinutes < 1 {
		return DefaultBatchTimeoutMinutes
	}
	return int64(b.TimeoutMinutes)
}

// EffectiveOnTimeout returns onTimeout, or OnTimeoutFail when unset or
// unknown. b may be nil.
func (b *BatchSpec) EffectiveOnTimeout() OnTimeoutPolicy {
	if b != nil && b.OnTimeout == OnTimeoutFallback {
		return OnTimeoutFallback
	}
	return OnTimeoutFail
}

// AgentDefinitionSpec is the recipe: what to ask, which model, which tools,
// where the results go and how the work is executed.
// +kubebuilder:validation:XValidation:rule="!has(self.batch) || (has(self.execution) && self.execution == 'batch')",message="batch may only be set when execution is batch",fieldPath=".batch",reason="FieldValueForbidden"
type AgentDefinitionSpec struct {
	// description says what the recipe is for, at most 16 KiB.
	// Informational only.
	// +optional
	// +kubebuilder:validation:MaxLength=16384
	Description string `json:"description,omitempty"`

	// model is the model to run, e.g. claude-opus-5-5. It also picks the
	// vendor CLI that runs it (Claude, Codex, Gemini or OpenCode; "exec"
	// runs tool_config.command instead). An Agent's spec.model overrides it;
	// when both are empty, claude-opus-5-5 is used.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// prompt is the task for the agent, at most 64 KiB. {name} placeholders
	// are replaced by the Agent's parameters; placeholders without a value
	// stay as written. The rendered prompt may be at most 1 MiB
	// (prompt.MaxRenderedBytes): an Agent whose parameters render it larger
	// fails before it starts.
	// +required
	// +kubebuilder:validation:MaxLength=65536
	Prompt string `json:"prompt"`

	// allowed_tools are the tools the agent may use without asking (in
	// permission_mode auto), in the vendor's syntax, e.g. "Read" or
	// "Bash(git diff:*)"; each at most 1024 bytes. Claude Code and the
	// Gemini CLI honour them; an Agent whose spec.model moves the run to a
	// vendor that cannot fails before it starts.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	AllowedTools []string `json:"allowed_tools,omitempty"`

	// disallowed_tools are tools the agent may never use, in every
	// permission mode; each at most 1024 bytes. Claude Code, the Gemini CLI
	// and OpenCode honour them; an Agent whose spec.model moves the run to
	// a vendor that cannot fails before it starts.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	DisallowedTools []string `json:"disallowed_tools,omitempty"`

	// permission_mode is auto (only allowed_tools) or bypass (every tool
	// but disallowed_tools, without asking). Defaults to auto.
	// +optional
	// +kubebuilder:default=auto
	PermissionMode PermissionMode `json:"permission_mode,omitempty"`

	// max_turns caps the agent's conversation turns. Unset means no cap.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxTurns int32 `json:"max_turns,omitempty"`

	// resources are what the run is given: environment, secrets, MCP
	// servers, repositories, skills and conversation state.
	// +optional
	Resources *AgentResources `json:"resources,omitempty"`

	// output says where the run's events go: sinks, a filter for them and
	// files to report when the agent ends.
	// +optional
	Output *OutputSpec `json:"output,omitempty"`

	// tool_config is passed through to the vendor as is. The exec vendor
	// (model "exec") requires tool_config.command, a non-empty list of
	// strings: the program and its arguments; the prompt is appended as the
	// last argument.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	ToolConfig *apiextensionsv1.JSON `json:"tool_config,omitempty"`

	// execution is how runs are executed: job (a Kubernetes Job), batch (a
	// vendor batch request; cheaper, slower, needs the batch component) or
	// realtime (an interactive session served by the run pod; needs the
	// realtime component). Whether the recipe suits the mode is checked
	// when an Agent starts. Defaults to job.
	// +optional
	// +kubebuilder:default=job
	Execution ExecutionMode `json:"execution,omitempty"`

	// batch tunes batch runs. Only allowed when execution is batch.
	// +optional
	Batch *BatchSpec `json:"batch,omitempty"`
}

// EffectiveExecution returns the execution mode, ExecutionJob when unset.
func (s *AgentDefinitionSpec) EffectiveExecution() ExecutionMode {
	if s.Execution == "" {
		return ExecutionJob
	}
	return s.Execution
}

// EffectivePermissionMode returns the permission mode. Anything but an
// explicit bypass is auto, so a missing or mistyped value never widens
// what the agent may do.
func (s *AgentDefinitionSpec) EffectivePermissionMode() PermissionMode {
	if s.PermissionMode == PermissionBypass {
		return PermissionBypass
	}
	return PermissionAuto
}

// ErrNoExecCommand is returned by ExecCommand when tool_config.command is
// missing or is not a non-empty list of strings.
var ErrNoExecCommand = errors.New("spec.tool_config.command must be a non-empty list of strings")

// ExecCommand returns tool_config.command, the argv of the exec vendor. It
// fails with an error wrapping ErrNoExecCommand when the field is missing,
// is not a list of strings, is empty or starts with an empty program name.
func (s *AgentDefinitionSpec) ExecCommand() ([]string, error) {
	if s.ToolConfig == nil || len(s.ToolConfig.Raw) == 0 {
		return nil, fmt.Errorf("%w: tool_config is not set", ErrNoExecCommand)
	}
	var cfg struct {
		Command json.RawMessage `json:"command"`
	}
	if err := json.Unmarshal(s.ToolConfig.Raw, &cfg); err != nil {
		return nil, fmt.Errorf("%w: tool_config is not a JSON object: %w", ErrNoExecCommand, err)
	}
	if len(cfg.Command) == 0 || string(cfg.Command) == "null" {
		return nil, fmt.Errorf("%w: it is not set", ErrNoExecCommand)
	}
	var argv []string
	if err := json.Unmarshal(cfg.Command, &argv); err != nil {
		return nil, fmt.Errorf("%w: %s is not a list of strings", ErrNoExecCommand, cfg.Command)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("%w: the program name is empty", ErrNoExecCommand)
	}
	return argv, nil
}

// AgentDefinition is the reusable recipe for a coding agent task: the
// prompt, the model, the tools and permissions, what the run is given
// (secrets, repositories, MCP servers, skills) and where its events go. A
// Station binds it to a pod template; Agents run it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=agentdefinitions,singular=agentdefinition,shortName=agentdef;ad,scope=Namespaced,categories=agentplane
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`,description="The model the recipe runs"
// +kubebuilder:printcolumn:name="Execution",type=string,JSONPath=`.spec.execution`,description="job, batch or realtime"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AgentDefinition struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the recipe.
	// +required
	Spec AgentDefinitionSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// AgentDefinitionList is a list of AgentDefinitions.
type AgentDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the AgentDefinitions.
	Items []AgentDefinition `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AgentDefinition{}, &AgentDefinitionList{})
}
