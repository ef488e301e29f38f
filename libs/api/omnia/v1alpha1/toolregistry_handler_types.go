package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HandlerType is the protocol of a tool handler.
// +kubebuilder:validation:Enum=http;openapi;grpc;mcp;client;platform
type HandlerType string

// Handler types.
const (
	// HandlerTypeHTTP calls one HTTP endpoint; the tool is declared in tool.
	HandlerTypeHTTP HandlerType = "http"
	// HandlerTypeOpenAPI exposes the operations of an OpenAPI document; the
	// tools are discovered by the runtime.
	HandlerTypeOpenAPI HandlerType = "openapi"
	// HandlerTypeGRPC calls one gRPC method; the tool is declared in tool.
	HandlerTypeGRPC HandlerType = "grpc"
	// HandlerTypeMCP connects to a Model Context Protocol server; the tools
	// are discovered by the runtime.
	HandlerTypeMCP HandlerType = "mcp"
	// HandlerTypeClient is a tool executed by the connected client (the
	// browser); the tool is declared in tool.
	HandlerTypeClient HandlerType = "client"
	// HandlerTypePlatform exposes tools of an agentplane platform service;
	// the controller knows each service's tool list.
	HandlerTypePlatform HandlerType = "platform"
)

// HandlerDefinition is one tool handler of a ToolRegistry.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'http' || (has(self.httpConfig) && has(self.tool))",message="an http handler needs httpConfig and tool"
// +kubebuilder:validation:XValidation:rule="self.type != 'grpc' || (has(self.grpcConfig) && has(self.tool))",message="a grpc handler needs grpcConfig and tool"
// +kubebuilder:validation:XValidation:rule="self.type != 'mcp' || has(self.mcpConfig)",message="an mcp handler needs mcpConfig",fieldPath=".mcpConfig",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'openapi' || has(self.openAPIConfig)",message="an openapi handler needs openAPIConfig",fieldPath=".openAPIConfig",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'client' || has(self.tool)",message="a client handler needs tool",fieldPath=".tool",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'platform' || has(self.platformConfig)",message="a platform handler needs platformConfig",fieldPath=".platformConfig",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !((has(self.httpConfig) && (has(self.httpConfig.authType) || has(self.httpConfig.authSecretRef))) || (has(self.openAPIConfig) && (has(self.openAPIConfig.authType) || has(self.openAPIConfig.authSecretRef))))",message="auth cannot be combined with the deprecated authType or authSecretRef of httpConfig or openAPIConfig; move them into auth"
// +kubebuilder:validation:XValidation:rule="!has(self.sandbox) || (self.type == 'mcp' && has(self.mcpConfig) && self.mcpConfig.transport == 'stdio')",message="sandbox is only supported on mcp handlers with stdio transport",fieldPath=".sandbox",reason=FieldValueForbidden
type HandlerDefinition struct {
	// name identifies the handler within the registry (a DNS label). The
	// runtime uses it to route calls and to name the handler's secret file.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// type is the handler's protocol: http, grpc and client declare their
	// one tool in tool; mcp and openapi are self-describing; platform exposes
	// a platform service's tools.
	// +required
	// +kubebuilder:validation:MaxLength=16
	Type HandlerType `json:"type"`

	// tool declares the single tool of an http, grpc or client handler.
	// +optional
	Tool *ToolDefinition `json:"tool,omitempty"`

	// httpConfig configures an http handler.
	// +optional
	HTTPConfig *HTTPConfig `json:"httpConfig,omitempty"`

	// openAPIConfig configures an openapi handler.
	// +optional
	OpenAPIConfig *OpenAPIConfig `json:"openAPIConfig,omitempty"`

	// grpcConfig configures a grpc handler.
	// +optional
	GRPCConfig *GRPCConfig `json:"grpcConfig,omitempty"`

	// mcpConfig configures an mcp handler.
	// +optional
	MCPConfig *MCPConfig `json:"mcpConfig,omitempty"`

	// clientConfig configures a client handler.
	// +optional
	ClientConfig *ClientConfig `json:"clientConfig,omitempty"`

	// platformConfig configures a platform handler.
	// +optional
	PlatformConfig *PlatformConfig `json:"platformConfig,omitempty"`

	// auth is how the runtime authenticates to the handler's backend.
	// Replaces the deprecated authType/authSecretRef of httpConfig and
	// openAPIConfig, and cannot be combined with them.
	// +optional
	Auth *ToolAuth `json:"auth,omitempty"`

	// timeout bounds one tool call, as a Go duration. Defaults to 30s.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// sandbox runs a stdio MCP server in an isolated sandbox of a
	// SandboxClass instead of inside the runtime container. Its outbound
	// traffic is limited to the Connections it names.
	// +optional
	Sandbox *HandlerSandbox `json:"sandbox,omitempty"`
}

// ToolDefinition declares one tool: the name, description and argument
// schema the model sees.
type ToolDefinition struct {
	// name of the tool as the model sees it: lower case letters, digits and
	// underscores, starting with a letter.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]*$`
	Name string `json:"name"`

	// description tells the model what the tool does and when to call it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Description string `json:"description"`

	// inputSchema is the JSON Schema (an object) of the tool's arguments.
	// +required
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	InputSchema apiextensionsv1.JSON `json:"inputSchema"`

	// outputSchema is the JSON Schema (an object) of the tool's result.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	OutputSchema *apiextensionsv1.JSON `json:"outputSchema,omitempty"`
}

// LegacyAuthType is the deprecated per-config authentication type.
// +kubebuilder:validation:Enum=bearer;basic
type LegacyAuthType string

// HTTPConfig configures an http handler.
type HTTPConfig struct {
	// endpoint is the URL called for each tool call.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Endpoint string `json:"endpoint"`

	// method is the HTTP method. Defaults to POST.
	// +optional
	// +kubebuilder:default=POST
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[A-Z]+$`
	Method string `json:"method,omitempty"`

	// headers are static request headers.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Headers map[string]string `json:"headers,omitempty"`

	// contentType of the request body. Defaults to application/json.
	// +optional
	// +kubebuilder:default="application/json"
	// +kubebuilder:validation:MaxLength=256
	ContentType string `json:"contentType,omitempty"`

	// authType is deprecated; use the handler's auth.type.
	// +optional
	AuthType *LegacyAuthType `json:"authType,omitempty"`

	// authSecretRef is deprecated; use the handler's auth.secretRef.
	// +optional
	AuthSecretRef *SecretKeySelector `json:"authSecretRef,omitempty"`

	// queryParams are the tool arguments sent as query parameters rather
	// than in the body.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	QueryParams []string `json:"queryParams,omitempty"`

	// headerParams maps a tool argument to the request header that carries
	// it.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	HeaderParams map[string]string `json:"headerParams,omitempty"`

	// staticQuery are fixed query parameters added to every call.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	StaticQuery map[string]string `json:"staticQuery,omitempty"`

	// staticBody is a fixed JSON value merged into every request body.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	StaticBody *apiextensionsv1.JSON `json:"staticBody,omitempty"`

	// bodyMapping is a JMESPath expression that builds the request body from
	// the tool arguments.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	BodyMapping string `json:"bodyMapping,omitempty"`

	// responseMapping is a JMESPath expression that shapes the response
	// before the model sees it.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ResponseMapping string `json:"responseMapping,omitempty"`

	// redact lists response fields (JMESPath) removed before the model sees
	// the response.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Redact []string `json:"redact,omitempty"`

	// urlTemplate replaces endpoint for the call with a URL in which {arg}
	// placeholders are substituted by tool arguments.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	URLTemplate string `json:"urlTemplate,omitempty"`

	// retryPolicy retries failed calls.
	// +optional
	RetryPolicy *HTTPRetryPolicy `json:"retryPolicy,omitempty"`
}

// OpenAPIConfig configures an openapi handler.
type OpenAPIConfig struct {
	// specURL is where the OpenAPI document (JSON or YAML) is read.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	SpecURL string `json:"specURL"`

	// baseURL overrides the server URL of the document.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	BaseURL string `json:"baseURL,omitempty"`

	// operationFilter limits the exposed operations to these operationIds;
	// empty exposes all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	OperationFilter []string `json:"operationFilter,omitempty"`

	// headers are static request headers.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Headers map[string]string `json:"headers,omitempty"`

	// authType is deprecated; use the handler's auth.type.
	// +optional
	AuthType *LegacyAuthType `json:"authType,omitempty"`

	// authSecretRef is deprecated; use the handler's auth.secretRef.
	// +optional
	AuthSecretRef *SecretKeySelector `json:"authSecretRef,omitempty"`

	// retryPolicy retries failed calls.
	// +optional
	RetryPolicy *HTTPRetryPolicy `json:"retryPolicy,omitempty"`
}

// GRPCConfig configures a grpc handler.
type GRPCConfig struct {
	// endpoint is the server address as host:port.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint"`

	// tls turns on TLS for the connection.
	// +optional
	TLS bool `json:"tls,omitempty"`

	// tlsCertPath is the client certificate file inside the runtime container.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	TLSCertPath string `json:"tlsCertPath,omitempty"`

	// tlsKeyPath is the client key file inside the runtime container.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	TLSKeyPath string `json:"tlsKeyPath,omitempty"`

	// tlsCAPath is the CA bundle file inside the runtime container.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	TLSCAPath string `json:"tlsCAPath,omitempty"`

	// tlsInsecureSkipVerify skips server certificate verification; for
	// development only.
	// +optional
	TLSInsecureSkipVerify bool `json:"tlsInsecureSkipVerify,omitempty"`

	// retryPolicy retries failed calls.
	// +optional
	RetryPolicy *GRPCRetryPolicy `json:"retryPolicy,omitempty"`
}

// MCPTransport is how the runtime talks to an MCP server.
// +kubebuilder:validation:Enum=sse;stdio;streamable-http
type MCPTransport string

// MCP transports.
const (
	MCPTransportSSE            MCPTransport = "sse"
	MCPTransportStdio          MCPTransport = "stdio"
	MCPTransportStreamableHTTP MCPTransport = "streamable-http"
)

// MCPConfig configures an mcp handler.
//
// +kubebuilder:validation:XValidation:rule="self.transport != 'stdio' || (has(self.command) && size(self.command) > 0)",message="mcpConfig.command is required for the stdio transport",fieldPath=".command",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.transport == 'stdio' || (has(self.endpoint) && size(self.endpoint) > 0)",message="mcpConfig.endpoint is required for the sse and streamable-http transports",fieldPath=".endpoint",reason=FieldValueRequired
type MCPConfig struct {
	// transport is sse or streamable-http (a server at endpoint) or stdio (a
	// server process started from command).
	// +required
	// +kubebuilder:validation:MaxLength=16
	Transport MCPTransport `json:"transport"`

	// endpoint is the server URL, for sse and streamable-http.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Endpoint string `json:"endpoint,omitempty"`

	// command starts the server, for stdio.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Command string `json:"command,omitempty"`

	// args are the arguments of command.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	Args []string `json:"args,omitempty"`

	// workDir is the working directory of command.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	WorkDir string `json:"workDir,omitempty"`

	// env are extra environment variables of command.
	// +optional
	// +kubebuilder:validation:MaxProperties=128
	Env map[string]string `json:"env,omitempty"`

	// toolFilter limits the server's tools offered to the model.
	// +optional
	ToolFilter *MCPToolFilter `json:"toolFilter,omitempty"`

	// retryPolicy retries failed calls.
	// +optional
	RetryPolicy *MCPRetryPolicy `json:"retryPolicy,omitempty"`
}

// MCPToolFilter limits the tools of an MCP server.
type MCPToolFilter struct {
	// allowlist offers only these tools; empty allows all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	Allowlist []string `json:"allowlist,omitempty"`

	// blocklist hides these tools; applied after allowlist.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	Blocklist []string `json:"blocklist,omitempty"`
}

// ClientConfig configures a client handler: a tool the connected client
// (the browser) executes after asking the user.
type ClientConfig struct {
	// consentMessage is shown to the user before the tool runs.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ConsentMessage string `json:"consentMessage,omitempty"`

	// categories group client tools for the user's consent settings.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	Categories []string `json:"categories,omitempty"`
}

// PlatformConfig configures a platform handler: tools implemented by an
// agentplane platform service (for example "agents", which starts and
// inspects Agent runs). The controller knows each service's tool list and
// contributes those tools to discoveredTools; an unknown service makes the
// handler invalid.
type PlatformConfig struct {
	// service is the platform service whose tools are exposed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Service string `json:"service"`

	// tools limits the exposed tools to these names of the service's list;
	// empty exposes every tool of the service. A name the service does not
	// offer makes the handler invalid.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^[a-z][a-z0-9_]*$`
	Tools []string `json:"tools,omitempty"`
}

// HandlerSandbox places a handler's process in a sandbox.
type HandlerSandbox struct {
	// className names the SandboxClass, in the same namespace, that runs the
	// process. Judged by the SandboxesValid condition.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClassName string `json:"className"`

	// connectionRefs name the Connections, in the same namespace, the
	// sandboxed process may reach. Each must exist and be allowed by the
	// SandboxClass; judged by the SandboxConnectionsValid condition.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	ConnectionRefs []LocalObjectReference `json:"connectionRefs,omitempty"`
}
