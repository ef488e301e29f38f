package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FacadeType is the protocol of a facade.
// +kubebuilder:validation:Enum=websocket;a2a;rest;mcp;custom
type FacadeType string

// Facade types.
const (
	FacadeTypeWebSocket FacadeType = "websocket"
	FacadeTypeA2A       FacadeType = "a2a"
	FacadeTypeREST      FacadeType = "rest"
	FacadeTypeMCP       FacadeType = "mcp"
	FacadeTypeCustom    FacadeType = "custom"
)

// HandlerMode is what answers a facade's messages.
// +kubebuilder:validation:Enum=echo;demo;runtime
type HandlerMode string

// Handler modes.
const (
	// HandlerModeEcho returns each message unchanged (connectivity tests).
	HandlerModeEcho HandlerMode = "echo"
	// HandlerModeDemo answers with canned, streamed replies (demos).
	HandlerModeDemo HandlerMode = "demo"
	// HandlerModeRuntime forwards to the runtime container (production).
	HandlerModeRuntime HandlerMode = "runtime"
)

// FacadeConfig is one protocol endpoint of the agent.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'custom' || (has(self.image) && size(self.image) > 0)",message="image is required for a custom facade",fieldPath=".image",reason=FieldValueRequired
type FacadeConfig struct {
	// type is the facade's protocol: websocket (the default), a2a, rest, mcp
	// or custom (your own image).
	// +required
	// +kubebuilder:default=websocket
	// +kubebuilder:validation:MaxLength=16
	Type FacadeType `json:"type"`

	// port the facade listens on. Defaults to 8080.
	// +optional
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`

	// drainTimeout is how long open connections may finish when a pod stops,
	// as a Go duration (30s when unset; capped at 10m).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// handler answers the facade's messages: runtime (the default), echo or
	// demo.
	// +optional
	// +kubebuilder:default=runtime
	Handler *HandlerMode `json:"handler,omitempty"`

	// image overrides the facade container image; required for type custom.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// extraEnv are extra environment variables of the facade container.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	ExtraEnv []corev1.EnvVar `json:"extraEnv,omitempty"`

	// clientToolTimeout bounds how long the facade waits for a client tool's
	// result, as a Go duration (60s when unset).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	ClientToolTimeout *metav1.Duration `json:"clientToolTimeout,omitempty"`

	// a2a configures the Agent-to-Agent protocol, standalone (type a2a) or
	// beside a websocket facade.
	// +optional
	A2A *A2AConfig `json:"a2a,omitempty"`

	// mcp serves the agent as an MCP server beside the facade.
	// +optional
	MCP *MCPFacadeConfig `json:"mcp,omitempty"`

	// managementPlane also serves the facade on a management port for the
	// dashboard. Defaults to true when unset.
	// +optional
	ManagementPlane *bool `json:"managementPlane,omitempty"`

	// expose publishes the facade outside the cluster (through the Gateway
	// API when installed).
	// +optional
	Expose *FacadeExpose `json:"expose,omitempty"`
}

// FacadeExpose publishes a facade outside the cluster.
type FacadeExpose struct {
	// enabled publishes the facade.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// host is the public host name; defaults to one under the operator's
	// base domain.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host,omitempty"`
}

// MCPFacadeConfig serves the agent as an MCP server.
type MCPFacadeConfig struct {
	// enabled turns the MCP server on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// port of the MCP server. Defaults to 9998.
	// +optional
	// +kubebuilder:default=9998
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`
}

// StoreType is the backend of a state store.
// +kubebuilder:validation:Enum=memory;redis
type StoreType string

// Store types.
const (
	StoreTypeMemory StoreType = "memory"
	StoreTypeRedis  StoreType = "redis"
)

// A2AConfig configures the Agent-to-Agent protocol.
type A2AConfig struct {
	// enabled turns A2A on beside a websocket facade.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// port of the A2A endpoint. Defaults to 9999.
	// +optional
	// +kubebuilder:default=9999
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`

	// agentCard overrides fields of the published agent card
	// (/.well-known/agent.json), such as name, description and skills.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	AgentCard *apiextensionsv1.JSON `json:"agentCard,omitempty"`

	// taskTTL is how long finished tasks are kept, as a Go duration.
	// Defaults to 1h.
	// +optional
	// +kubebuilder:default="1h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	TaskTTL *metav1.Duration `json:"taskTTL,omitempty"`

	// conversationTTL is how long an idle conversation is kept, as a Go
	// duration. Defaults to 30m.
	// +optional
	// +kubebuilder:default="30m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	ConversationTTL *metav1.Duration `json:"conversationTTL,omitempty"`

	// taskStore is where tasks are kept.
	// +optional
	TaskStore *A2ATaskStore `json:"taskStore,omitempty"`

	// clients are other agents this agent calls over A2A.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Clients []A2AClient `json:"clients,omitempty"`
}

// A2ATaskStore is where A2A tasks are kept.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'redis' || has(self.redisURL) || has(self.redisSecretRef)",message="taskStore: type redis needs redisURL or redisSecretRef"
// +kubebuilder:validation:XValidation:rule="!has(self.redisURL) || !has(self.redisSecretRef)",message="taskStore: set redisURL or redisSecretRef, not both",fieldPath=".redisSecretRef",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="self.type == 'redis' || (!has(self.redisURL) && !has(self.redisSecretRef))",message="taskStore.redisURL and taskStore.redisSecretRef may only be set when taskStore.type is redis"
type A2ATaskStore struct {
	// type is memory (the default; lost on restart) or redis.
	// +optional
	// +kubebuilder:default=memory
	// +kubebuilder:validation:MaxLength=16
	Type StoreType `json:"type,omitempty"`

	// redisURL is the Redis address, for type redis; not with
	// redisSecretRef.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	RedisURL string `json:"redisURL,omitempty"`

	// redisSecretRef names a Secret whose "url" key holds the Redis address,
	// for type redis; not with redisURL.
	// +optional
	RedisSecretRef *LocalObjectReference `json:"redisSecretRef,omitempty"`
}

// A2AClient is another agent reachable over A2A.
//
// +kubebuilder:validation:XValidation:rule="has(self.agentRuntimeRef) != has(self.url)",message="a2a client: set exactly one of agentRuntimeRef and url"
type A2AClient struct {
	// name identifies the client agent.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// agentRuntimeRef names an AgentRuntime in the same namespace.
	// +optional
	AgentRuntimeRef *LocalObjectReference `json:"agentRuntimeRef,omitempty"`

	// url of an external A2A agent.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	URL string `json:"url,omitempty"`

	// exposeAsTools offers the client agent's skills to the model as tools.
	// +optional
	ExposeAsTools bool `json:"exposeAsTools,omitempty"`

	// authentication used when calling the client agent.
	// +optional
	Authentication *A2AClientAuth `json:"authentication,omitempty"`
}

// A2AClientAuth authenticates calls to another agent.
type A2AClientAuth struct {
	// secretRef names a Secret whose "token" key is sent as a bearer token.
	// +required
	SecretRef LocalObjectReference `json:"secretRef"`
}

// A2AStatus reports the A2A facade.
type A2AStatus struct {
	// agentCardURL is where the agent card is served.
	// +optional
	AgentCardURL string `json:"agentCardURL,omitempty"`

	// endpoint is the in-cluster A2A address.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// clients reports each configured client agent.
	// +optional
	// +listType=atomic
	Clients []A2AClientStatus `json:"clients,omitempty"`
}

// A2AClientStatus reports one client agent.
type A2AClientStatus struct {
	// name of the client, as in spec.
	Name string `json:"name"`
	// resolvedURL the client is called at.
	// +optional
	ResolvedURL string `json:"resolvedURL,omitempty"`
	// ready says whether the client could be resolved.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// error explains why the client is not ready.
	// +optional
	Error string `json:"error,omitempty"`
}

// FacadeStatus reports externally exposed facade endpoints.
type FacadeStatus struct {
	// endpoints are the published addresses, one per route.
	// +optional
	// +listType=atomic
	Endpoints []FacadeEndpoint `json:"endpoints,omitempty"`
}

// FacadeEndpoint is one published facade address.
type FacadeEndpoint struct {
	// protocol of the facade.
	// +optional
	Protocol string `json:"protocol,omitempty"`
	// url clients connect to.
	// +optional
	URL string `json:"url,omitempty"`
	// scheme of url.
	// +optional
	Scheme string `json:"scheme,omitempty"`
	// host of url.
	// +optional
	Host string `json:"host,omitempty"`
	// path of url.
	// +optional
	Path string `json:"path,omitempty"`
	// port of url.
	// +optional
	Port *int32 `json:"port,omitempty"`
	// routeName is the HTTPRoute that publishes the endpoint.
	// +optional
	RouteName string `json:"routeName,omitempty"`
	// routeNamespace is the namespace of the HTTPRoute.
	// +optional
	RouteNamespace string `json:"routeNamespace,omitempty"`
	// valid says whether the route was accepted by its Gateway.
	// +optional
	Valid bool `json:"valid,omitempty"`
	// reason explains an invalid route.
	// +optional
	Reason string `json:"reason,omitempty"`
}
