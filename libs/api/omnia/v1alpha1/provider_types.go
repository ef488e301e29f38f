package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderType is the vendor or engine behind a Provider.
// +kubebuilder:validation:Enum=claude;openai;gemini;ollama;mock;vllm;voyageai;cartesia;elevenlabs;imagen;huggingface
type ProviderType string

// Provider types.
const (
	ProviderTypeClaude      ProviderType = "claude"
	ProviderTypeOpenAI      ProviderType = "openai"
	ProviderTypeGemini      ProviderType = "gemini"
	ProviderTypeOllama      ProviderType = "ollama"
	ProviderTypeMock        ProviderType = "mock"
	ProviderTypeVLLM        ProviderType = "vllm"
	ProviderTypeVoyageAI    ProviderType = "voyageai"
	ProviderTypeCartesia    ProviderType = "cartesia"
	ProviderTypeElevenLabs  ProviderType = "elevenlabs"
	ProviderTypeImagen      ProviderType = "imagen"
	ProviderTypeHuggingFace ProviderType = "huggingface"
)

// ProviderRole is what a Provider is used for. An AgentRuntime names the role
// it expects of each Provider it references, and a mismatch fails the agent.
// +kubebuilder:validation:Enum=llm;embedding;tts;stt;image;inference
type ProviderRole string

// Provider roles.
const (
	ProviderRoleLLM       ProviderRole = "llm"
	ProviderRoleEmbedding ProviderRole = "embedding"
	ProviderRoleTTS       ProviderRole = "tts"
	ProviderRoleSTT       ProviderRole = "stt"
	ProviderRoleImage     ProviderRole = "image"
	ProviderRoleInference ProviderRole = "inference"
)

// ProviderCapability is one feature a Provider's model offers. AgentRuntimes
// list the capabilities they need in providers[].requiredCapabilities.
// +kubebuilder:validation:Enum=text;streaming;vision;tools;json;audio;video;documents;duplex
type ProviderCapability string

// Provider capabilities.
const (
	CapabilityText      ProviderCapability = "text"
	CapabilityStreaming ProviderCapability = "streaming"
	CapabilityVision    ProviderCapability = "vision"
	CapabilityTools     ProviderCapability = "tools"
	CapabilityJSON      ProviderCapability = "json"
	CapabilityAudio     ProviderCapability = "audio"
	CapabilityVideo     ProviderCapability = "video"
	CapabilityDocuments ProviderCapability = "documents"
	CapabilityDuplex    ProviderCapability = "duplex"
)

// PlatformType is the cloud platform that hosts a vendor's models.
// +kubebuilder:validation:Enum=bedrock;vertex;azure
type PlatformType string

// Hosting platforms.
const (
	PlatformBedrock PlatformType = "bedrock"
	PlatformVertex  PlatformType = "vertex"
	PlatformAzure   PlatformType = "azure"
)

// PlatformAuthType is how the operator and the runtime authenticate to a
// hosting platform.
// +kubebuilder:validation:Enum=workloadIdentity;accessKey;serviceAccount;servicePrincipal
type PlatformAuthType string

// Platform authentication types.
const (
	PlatformAuthWorkloadIdentity PlatformAuthType = "workloadIdentity"
	PlatformAuthAccessKey        PlatformAuthType = "accessKey"
	PlatformAuthServiceAccount   PlatformAuthType = "serviceAccount"
	PlatformAuthServicePrincipal PlatformAuthType = "servicePrincipal"
)

// TruncationStrategy is what the runtime does when a conversation outgrows
// the model's context window.
// +kubebuilder:validation:Enum=sliding;summarize;custom
type TruncationStrategy string

// Truncation strategies.
const (
	TruncationSliding   TruncationStrategy = "sliding"
	TruncationSummarize TruncationStrategy = "summarize"
	TruncationCustom    TruncationStrategy = "custom"
)

// ProviderSpec is the desired state of a Provider.
//
// +kubebuilder:validation:XValidation:rule="(has(self.tts) ? 1 : 0) + (has(self.stt) ? 1 : 0) + (has(self.embedding) ? 1 : 0) <= 1",message="only one of spec.tts, spec.stt and spec.embedding may be set"
// +kubebuilder:validation:XValidation:rule="!has(self.tts) || self.role == 'tts'",message="spec.tts may only be set when spec.role is tts"
// +kubebuilder:validation:XValidation:rule="!has(self.stt) || self.role == 'stt'",message="spec.stt may only be set when spec.role is stt"
// +kubebuilder:validation:XValidation:rule="!has(self.embedding) || self.role == 'embedding'",message="spec.embedding may only be set when spec.role is embedding"
// +kubebuilder:validation:XValidation:rule="self.type in {'llm': ['claude', 'openai', 'gemini', 'ollama', 'mock', 'vllm'], 'embedding': ['openai', 'voyageai', 'gemini', 'ollama'], 'tts': ['openai', 'cartesia', 'elevenlabs'], 'stt': ['openai'], 'image': ['imagen'], 'inference': ['huggingface']}[self.role]",messageExpression="'spec.type ' + self.type + ' cannot serve spec.role ' + self.role"
// +kubebuilder:validation:XValidation:rule="!has(self.platform) || ((self.role == 'llm' || self.role == 'embedding') && self.type in ['claude', 'openai', 'gemini'])",message="spec.platform is only supported for spec.role llm or embedding with spec.type claude, openai or gemini"
// +kubebuilder:validation:XValidation:rule="has(self.platform) == has(self.auth)",message="spec.platform and spec.auth must be set together"
// +kubebuilder:validation:XValidation:rule="!has(self.platform) || !has(self.auth) || self.auth.type in {'bedrock': ['workloadIdentity', 'accessKey'], 'vertex': ['workloadIdentity', 'serviceAccount'], 'azure': ['workloadIdentity', 'servicePrincipal']}[self.platform.type]",messageExpression="'spec.auth.type ' + self.auth.type + ' is not supported on spec.platform.type ' + self.platform.type"
// +kubebuilder:validation:XValidation:rule="!has(self.platform) || !((self.type == 'openai' && self.platform.type == 'vertex') || (self.type == 'gemini' && self.platform.type != 'vertex'))",messageExpression="'spec.type ' + self.type + ' is not offered on spec.platform.type ' + self.platform.type"
// +kubebuilder:validation:XValidation:rule="self.type == 'mock' || (has(self.model) && size(self.model) > 0)",message="spec.model is required unless spec.type is mock",fieldPath=".model",reason=FieldValueRequired
type ProviderSpec struct {
	// type is the vendor or engine that serves requests. It decides the wire
	// protocol, the default base URL, the credential probe and the default
	// Secret keys of credential.secretRef.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Type ProviderType `json:"type"`

	// role is what this Provider is used for: llm (chat completions, the
	// default), embedding, tts (speech synthesis), stt (transcription), image
	// (image generation) or inference (a hosted model endpoint). Each role
	// admits only the types that implement it.
	// +optional
	// +kubebuilder:default=llm
	// +kubebuilder:validation:MaxLength=32
	Role ProviderRole `json:"role,omitempty"`

	// model is the vendor's model identifier, such as "claude-sonnet-4-5" or
	// "gpt-4o". Required for every type except mock.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// baseURL overrides the vendor's default API address, for a proxy, a
	// gateway or a self-hosted engine (ollama, vllm).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	BaseURL string `json:"baseURL,omitempty"`

	// headers are extra HTTP headers sent with every request to the model.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Headers map[string]string `json:"headers,omitempty"`

	// platform routes requests through a cloud platform (AWS Bedrock, GCP
	// Vertex AI, Azure) instead of the vendor's own API. Requires auth.
	// +optional
	Platform *ProviderPlatform `json:"platform,omitempty"`

	// auth is how the platform named in spec.platform is authenticated.
	// Required with platform, forbidden without it.
	// +optional
	Auth *ProviderAuth `json:"auth,omitempty"`

	// credential is where the vendor API key comes from. Required for direct
	// vendor access except for the mock, ollama and vllm types; unused when
	// a platform is set.
	// +optional
	Credential *CredentialConfig `json:"credential,omitempty"`

	// defaults are sampling and context settings applied to every request
	// unless the pack overrides them.
	// +optional
	Defaults *ProviderDefaults `json:"defaults,omitempty"`

	// pricing is used to report cost per request; when omitted the runtime
	// uses its built-in price list.
	// +optional
	Pricing *ProviderPricing `json:"pricing,omitempty"`

	// capabilities lists what the model can do. AgentRuntimes that require a
	// capability this list lacks stay Pending.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	Capabilities []ProviderCapability `json:"capabilities,omitempty"`

	// tts configures speech synthesis; only with role tts.
	// +optional
	TTS *TTSConfig `json:"tts,omitempty"`

	// stt configures transcription; only with role stt.
	// +optional
	STT *STTConfig `json:"stt,omitempty"`

	// embedding configures the embedding space; only with role embedding.
	// +optional
	Embedding *EmbeddingConfig `json:"embedding,omitempty"`
}

// ProviderPlatform names the cloud platform that hosts the model.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'vertex' || (has(self.project) && size(self.project) > 0)",message="project is required when platform.type is vertex",fieldPath=".project",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'azure' || (has(self.endpoint) && size(self.endpoint) > 0)",message="endpoint is required when platform.type is azure",fieldPath=".endpoint",reason=FieldValueRequired
type ProviderPlatform struct {
	// type is the hosting platform: bedrock, vertex or azure.
	// +required
	// +kubebuilder:validation:MaxLength=16
	Type PlatformType `json:"type"`

	// region of the platform, such as "us-east-1" or "europe-west4".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Region string `json:"region,omitempty"`

	// project is the GCP project that owns the Vertex AI endpoint; required
	// for vertex.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Project string `json:"project,omitempty"`

	// endpoint is the platform endpoint URL; required for azure.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Endpoint string `json:"endpoint,omitempty"`
}

// ProviderAuth is how a hosting platform is authenticated.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'workloadIdentity' || has(self.credentialsSecretRef)",message="credentialsSecretRef is required unless auth.type is workloadIdentity",fieldPath=".credentialsSecretRef",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'workloadIdentity' || !has(self.credentialsSecretRef)",message="credentialsSecretRef must not be set when auth.type is workloadIdentity",fieldPath=".credentialsSecretRef",reason=FieldValueForbidden
type ProviderAuth struct {
	// type of authentication. workloadIdentity uses the pod's cloud identity
	// and needs no Secret; accessKey (bedrock), serviceAccount (vertex) and
	// servicePrincipal (azure) read credentialsSecretRef.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Type PlatformAuthType `json:"type"`

	// roleArn is the AWS IAM role to assume on bedrock.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	RoleArn string `json:"roleArn,omitempty"`

	// serviceAccountEmail is the GCP service account to impersonate on vertex.
	// +optional
	// +kubebuilder:validation:MaxLength=254
	ServiceAccountEmail string `json:"serviceAccountEmail,omitempty"`

	// credentialsSecretRef names the Secret with the platform credentials.
	// Without a key, the platform's default keys are read: AWS_ACCESS_KEY_ID
	// and AWS_SECRET_ACCESS_KEY (accessKey), credentials.json
	// (serviceAccount), AZURE_TENANT_ID, AZURE_CLIENT_ID and
	// AZURE_CLIENT_SECRET (servicePrincipal).
	// +optional
	CredentialsSecretRef *SecretKeyRef `json:"credentialsSecretRef,omitempty"`
}

// CredentialConfig says where the vendor API key comes from. At most one of
// secretRef, envVar and filePath may be set.
//
// +kubebuilder:validation:XValidation:rule="(has(self.secretRef) ? 1 : 0) + (has(self.envVar) ? 1 : 0) + (has(self.filePath) ? 1 : 0) <= 1",message="credential: set at most one of secretRef, envVar and filePath"
type CredentialConfig struct {
	// secretRef names the Secret holding the API key. Without a key the
	// type's default keys are tried in order (first present wins): claude
	// ANTHROPIC_API_KEY, CLAUDE_API_KEY, api-key; openai OPENAI_API_KEY,
	// OPENAI_TOKEN, api-key; gemini GEMINI_API_KEY, GOOGLE_API_KEY, api-key;
	// voyageai VOYAGE_API_KEY, api-key; any other type api-key,
	// ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY.
	// +optional
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`

	// envVar names an environment variable of the runtime container that
	// already holds the API key (injected by other means).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	EnvVar string `json:"envVar,omitempty"`

	// filePath is an absolute path, inside the runtime container, of a file
	// holding the API key (for example one mounted by a CSI secrets driver).
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^/.*`
	FilePath string `json:"filePath,omitempty"`
}

// ProviderDefaults are per-request settings applied by the runtime.
type ProviderDefaults struct {
	// temperature as a decimal string between 0 and 2, such as "0.7".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	Temperature *string `json:"temperature,omitempty"`

	// topP (nucleus sampling) as a decimal string between 0 and 1.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	TopP *string `json:"topP,omitempty"`

	// maxTokens caps the tokens of one response.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxTokens *int32 `json:"maxTokens,omitempty"`

	// contextWindow is the model's context size in tokens; history beyond it
	// is truncated with truncationStrategy. Unset means no truncation.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ContextWindow *int32 `json:"contextWindow,omitempty"`

	// truncationStrategy is how history is shortened to fit contextWindow:
	// sliding (drop the oldest turns, the default), summarize or custom.
	// +optional
	// +kubebuilder:default=sliding
	TruncationStrategy TruncationStrategy `json:"truncationStrategy,omitempty"`

	// requestTimeout bounds one model request, as a Go duration ("2m").
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	RequestTimeout *metav1.Duration `json:"requestTimeout,omitempty"`

	// streamIdleTimeout aborts a streamed response after this long without a
	// chunk, as a Go duration ("30s").
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	StreamIdleTimeout *metav1.Duration `json:"streamIdleTimeout,omitempty"`
}

// ProviderPricing is the cost per thousand tokens, as decimal strings in the
// currency of your reports (such as "0.003").
type ProviderPricing struct {
	// inputCostPer1K is the cost of 1000 prompt tokens.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	InputCostPer1K *string `json:"inputCostPer1K,omitempty"`

	// outputCostPer1K is the cost of 1000 completion tokens.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	OutputCostPer1K *string `json:"outputCostPer1K,omitempty"`

	// cachedCostPer1K is the cost of 1000 prompt tokens served from the
	// vendor's prompt cache.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	CachedCostPer1K *string `json:"cachedCostPer1K,omitempty"`
}

// AudioFormat is an encoding of synthesised speech.
// +kubebuilder:validation:Enum=pcm;mp3;opus;wav;flac
type AudioFormat string

// TTSConfig configures a speech-synthesis Provider.
type TTSConfig struct {
	// voice is the vendor's voice identifier.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Voice string `json:"voice,omitempty"`

	// sampleRate of the produced audio in Hz (8000 to 48000).
	// +optional
	// +kubebuilder:validation:Minimum=8000
	// +kubebuilder:validation:Maximum=48000
	SampleRate *int32 `json:"sampleRate,omitempty"`

	// audioFiles are pre-recorded clips (paths or URLs) the runtime may play
	// instead of synthesising, such as greetings.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	AudioFiles []string `json:"audioFiles,omitempty"`

	// format of the produced audio: pcm, mp3, opus, wav or flac.
	// +optional
	Format AudioFormat `json:"format,omitempty"`
}

// STTConfig configures a transcription Provider.
type STTConfig struct {
	// sampleRate of the audio sent for transcription in Hz (8000 to 48000).
	// +optional
	// +kubebuilder:validation:Minimum=8000
	// +kubebuilder:validation:Maximum=48000
	SampleRate *int32 `json:"sampleRate,omitempty"`

	// language hint as an ISO 639-1 code with an optional region ("en",
	// "pt-BR").
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z]{2}(-[A-Z]{2})?$`
	Language string `json:"language,omitempty"`
}

// EmbeddingDistance is the similarity metric of an embedding space.
// +kubebuilder:validation:Enum=cosine;l2;dot
type EmbeddingDistance string

// EmbeddingConfig configures an embedding Provider.
type EmbeddingConfig struct {
	// dimensions of the produced vectors (1 to 4096). Changing it on a
	// Provider in use means every stored vector must be recomputed.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	Dimensions *int32 `json:"dimensions,omitempty"`

	// distance is the similarity metric: cosine, l2 or dot.
	// +optional
	Distance EmbeddingDistance `json:"distance,omitempty"`
}

// ProviderPhase summarises a Provider's state.
// +kubebuilder:validation:Enum=Ready;Error;Unavailable
type ProviderPhase string

// Provider phases.
const (
	// ProviderPhaseReady: configuration and credential are usable.
	ProviderPhaseReady ProviderPhase = "Ready"
	// ProviderPhaseError: the configuration or the credential is wrong; an
	// edit is needed.
	ProviderPhaseError ProviderPhase = "Error"
	// ProviderPhaseUnavailable: the endpoint cannot be reached; it is checked
	// again every 30 seconds until it answers.
	ProviderPhaseUnavailable ProviderPhase = "Unavailable"
)

// ProviderStatus is the observed state of a Provider.
type ProviderStatus struct {
	// phase summarises the conditions: Ready, Error or Unavailable.
	// +optional
	Phase ProviderPhase `json:"phase,omitempty"`

	// conditions detail the checks: SecretFound, CredentialConfigured,
	// CredentialValid, AuthConfigured, EndpointReachable and ModelValid;
	// Unsupported names set fields the platform does not implement.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the spec generation these conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// lastHealthCheckTime is when the endpoint was last probed.
	// +optional
	LastHealthCheckTime *metav1.Time `json:"lastHealthCheckTime,omitempty"`

	// capabilities are what the Provider offers right now: its declared
	// spec.capabilities while it is Ready, none otherwise. AgentRuntimes
	// requiring a capability wait (Pending) until it is listed here.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	Capabilities []ProviderCapability `json:"capabilities,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=providers,singular=provider,shortName=prov,scope=Namespaced,categories={omnia,agentplane}
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Provider is one configured model endpoint — a chat model, an embedding,
// speech or image model — and the credential used to call it. AgentRuntimes
// reference Providers by name and role.
type Provider struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the desired state of the Provider.
	// +required
	Spec ProviderSpec `json:"spec"`

	// status is the observed state of the Provider, written by its controller.
	// +optional
	Status ProviderStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// ProviderList is a list of Providers.
type ProviderList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitzero"`
	// items are the Providers.
	Items []Provider `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Provider{}, &ProviderList{})
}
