package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MediaStorageType is where media are stored.
// +kubebuilder:validation:Enum=none;local;s3;gcs;azure
type MediaStorageType string

// Media storage types.
const (
	MediaStorageNone  MediaStorageType = "none"
	MediaStorageLocal MediaStorageType = "local"
	MediaStorageS3    MediaStorageType = "s3"
	MediaStorageGCS   MediaStorageType = "gcs"
	MediaStorageAzure MediaStorageType = "azure"
)

// MediaConfig configures media handling.
type MediaConfig struct {
	// basePath is where the runtime resolves media references in the pack.
	// Defaults to /etc/omnia/media.
	// +optional
	// +kubebuilder:default="/etc/omnia/media"
	// +kubebuilder:validation:MaxLength=4096
	BasePath string `json:"basePath,omitempty"`

	// storage is where uploaded and generated media are kept.
	// +optional
	Storage *MediaStorageConfig `json:"storage,omitempty"`
}

// MediaStorageConfig selects a media store; the block named by type must be
// set.
//
// +kubebuilder:validation:XValidation:rule="self.type != 'local' || has(self.local)",message="media.storage.local is required when media.storage.type is local",fieldPath=".local",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 's3' || has(self.s3)",message="media.storage.s3 is required when media.storage.type is s3",fieldPath=".s3",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'gcs' || has(self.gcs)",message="media.storage.gcs is required when media.storage.type is gcs",fieldPath=".gcs",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'azure' || has(self.azure)",message="media.storage.azure is required when media.storage.type is azure",fieldPath=".azure",reason=FieldValueRequired
type MediaStorageConfig struct {
	// type is none (the default), local, s3, gcs or azure.
	// +optional
	// +kubebuilder:default=none
	// +kubebuilder:validation:MaxLength=8
	Type MediaStorageType `json:"type,omitempty"`

	// local stores media on a volume shared by the agent's pods.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Local *LocalMediaStorage `json:"local,omitempty"`

	// s3 stores media in an S3-compatible bucket.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	S3 *BucketMediaStorage `json:"s3,omitempty"`

	// gcs stores media in a Google Cloud Storage bucket.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	GCS *BucketMediaStorage `json:"gcs,omitempty"`

	// azure stores media in an Azure Blob Storage container.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Azure *AzureMediaStorage `json:"azure,omitempty"`
}

// LocalMediaStorage keeps media on a volume.
type LocalMediaStorage struct {
	// basePath is the mount path of the media volume in the pods.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	BasePath string `json:"basePath,omitempty"`
}

// BucketMediaStorage keeps media in an object-store bucket.
type BucketMediaStorage struct {
	// bucket name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Bucket string `json:"bucket"`

	// region of the bucket.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Region string `json:"region,omitempty"`

	// prefix of the object keys.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`

	// endpoint overrides the store's API address (S3-compatible stores).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Endpoint string `json:"endpoint,omitempty"`

	// secretRef names a Secret with the store's credentials; without it the
	// pod's workload identity is used.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// AzureMediaStorage keeps media in an Azure Blob Storage container.
type AzureMediaStorage struct {
	// account is the storage account.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Account string `json:"account"`

	// container is the blob container.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Container string `json:"container"`

	// prefix of the blob names.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`

	// secretRef names a Secret with the account's credentials; without it
	// the pod's workload identity is used.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
}

// EvalConfig configures evaluations of an agent's sessions: eval groups of
// the pack run inline in the runtime or in a separate eval worker, on a
// sample of sessions, judged by the Provider named "judge".
//
// +kubebuilder:pruning:PreserveUnknownFields
type EvalConfig struct {
	// enabled turns evaluations on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// inline selects the eval groups run inside the runtime, per turn.
	// +optional
	Inline *EvalGroups `json:"inline,omitempty"`

	// worker selects the eval groups run by the eval worker after a session
	// completes.
	// +optional
	Worker *EvalGroups `json:"worker,omitempty"`

	// sampling sets the share of sessions evaluated.
	// +optional
	Sampling *EvalSampling `json:"sampling,omitempty"`

	// rateLimit bounds the evaluation load.
	// +optional
	RateLimit *EvalRateLimit `json:"rateLimit,omitempty"`

	// sessionCompletion decides when a session counts as complete.
	// +optional
	SessionCompletion *SessionCompletion `json:"sessionCompletion,omitempty"`

	// podOverrides adjust the eval worker's pods (agents not built on
	// PromptKit get an eval-worker Deployment).
	// +optional
	PodOverrides *PodOverrides `json:"podOverrides,omitempty"`
}

// EvalGroups names eval groups of the pack.
type EvalGroups struct {
	// groups are eval group names from pack.json.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	Groups []string `json:"groups,omitempty"`
}

// EvalSampling sets the share of sessions evaluated, in percent.
type EvalSampling struct {
	// defaultRate is the percentage of sessions run through the default
	// evals (0 to 100). Defaults to 100.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	DefaultRate *int32 `json:"defaultRate,omitempty"`

	// extendedRate is the percentage of sessions run through the costly,
	// judge-based evals (0 to 100). Defaults to 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	ExtendedRate *int32 `json:"extendedRate,omitempty"`
}

// EvalRateLimit bounds the evaluation load.
type EvalRateLimit struct {
	// maxEvalsPerSecond across the agent. Defaults to 50.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=1
	MaxEvalsPerSecond *int32 `json:"maxEvalsPerSecond,omitempty"`

	// maxConcurrentJudgeCalls to the judge Provider. Defaults to 5.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	MaxConcurrentJudgeCalls *int32 `json:"maxConcurrentJudgeCalls,omitempty"`
}

// SessionCompletion decides when a session is complete.
type SessionCompletion struct {
	// inactivityTimeout completes a session after this long without a
	// message, as a Go duration. Defaults to 5m.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	InactivityTimeout *metav1.Duration `json:"inactivityTimeout,omitempty"`
}

// ConsoleConfig configures the dashboard's chat console for the agent.
//
// +kubebuilder:pruning:PreserveUnknownFields
type ConsoleConfig struct {
	// allowedAttachmentTypes are MIME types users may attach, such as
	// "image/*".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	AllowedAttachmentTypes []string `json:"allowedAttachmentTypes,omitempty"`

	// allowedExtensions are file extensions users may attach, such as ".pdf".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	AllowedExtensions []string `json:"allowedExtensions,omitempty"`

	// maxFileSize of one attachment in bytes. Defaults to 10485760 (10 MiB).
	// +optional
	// +kubebuilder:default=10485760
	// +kubebuilder:validation:Minimum=1
	MaxFileSize *int64 `json:"maxFileSize,omitempty"`

	// maxFiles attached to one message (1 to 20). Defaults to 5.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	MaxFiles *int32 `json:"maxFiles,omitempty"`

	// mediaRequirements describe per-media-type limits the console enforces
	// before upload (resolution, duration, formats).
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	MediaRequirements *apiextensionsv1.JSON `json:"mediaRequirements,omitempty"`
}

// DuplexMode is the media of a duplex session.
// +kubebuilder:validation:Enum=audio;audiovideo
type DuplexMode string

// DuplexConfig turns on full-duplex sessions. The runtime must report the
// duplex_audio and interruption capabilities, or the agent is scaled to zero
// (CapabilitiesSatisfied False).
type DuplexConfig struct {
	// enabled turns duplex sessions on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// mode is audio (the default) or audiovideo.
	// +optional
	// +kubebuilder:default=audio
	Mode DuplexMode `json:"mode,omitempty"`

	// audio describes the audio the client sends and expects (sample rate,
	// encoding, voice activity detection).
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Audio *apiextensionsv1.JSON `json:"audio,omitempty"`
}

// ExternalAuthConfig configures how data-plane clients authenticate. Each
// configured validator is tried; any one accepting admits the request.
type ExternalAuthConfig struct {
	// clientKeys accepts per-client API keys issued for this agent (kept in
	// labelled Secrets, never in the spec).
	// +optional
	ClientKeys *ClientKeysAuth `json:"clientKeys,omitempty"`

	// oidc validates JWTs of an OpenID Connect issuer in the facade. The
	// controller mirrors the issuer's key set (JWKS) into a Secret and
	// refreshes it every 6 hours (OIDCJWKSReady).
	// +optional
	OIDC *OIDCAuth `json:"oidc,omitempty"`

	// edgeTrust trusts identity headers set by an upstream proxy that
	// already validated the caller's token.
	// +optional
	EdgeTrust *EdgeTrustAuth `json:"edgeTrust,omitempty"`
}

// ClientKeysAuth accepts per-client API keys.
type ClientKeysAuth struct {
	// defaultRole of a key that names none: viewer (the default), editor or
	// admin.
	// +optional
	// +kubebuilder:default=viewer
	// +kubebuilder:validation:Enum=viewer;editor;admin
	DefaultRole string `json:"defaultRole,omitempty"`

	// trustEndUserHeader lets callers name the end user in the
	// X-End-User-Id header; only for callers trusted to do so truthfully.
	// +optional
	TrustEndUserHeader bool `json:"trustEndUserHeader,omitempty"`
}

// OIDCAuth validates tokens of an OpenID Connect issuer.
type OIDCAuth struct {
	// issuer URL, without a trailing slash; its discovery document is read
	// from <issuer>/.well-known/openid-configuration.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	Issuer string `json:"issuer"`

	// audience the token's aud claim must contain.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Audience string `json:"audience"`

	// claimMapping names the claims identity is read from.
	// +optional
	ClaimMapping *OIDCClaimMapping `json:"claimMapping,omitempty"`
}

// OIDCClaimMapping names the token claims identity is read from.
type OIDCClaimMapping struct {
	// subject claim: the caller's stable identifier. Defaults to "sub".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Subject string `json:"subject,omitempty"`

	// role claim: viewer, editor or admin. Defaults to "omnia.role".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Role string `json:"role,omitempty"`

	// endUser claim: the person a service token acts for. Defaults to
	// "sub"; falls back to the subject when the claim is missing.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	EndUser string `json:"endUser,omitempty"`
}

// EdgeTrustAuth trusts identity headers of an upstream proxy.
type EdgeTrustAuth struct {
	// headerMapping names the incoming headers identity is read from.
	// +optional
	HeaderMapping *EdgeTrustHeaderMapping `json:"headerMapping,omitempty"`

	// claimsFromHeaders maps further incoming headers to claim names exposed
	// to ToolPolicies.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	ClaimsFromHeaders map[string]string `json:"claimsFromHeaders,omitempty"`
}

// EdgeTrustHeaderMapping names the headers identity is read from.
type EdgeTrustHeaderMapping struct {
	// subject header. Defaults to x-user-id.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Subject string `json:"subject,omitempty"`
	// role header. Defaults to x-user-roles.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Role string `json:"role,omitempty"`
	// endUser header. Defaults to x-user-id.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	EndUser string `json:"endUser,omitempty"`
	// email header. Defaults to x-user-email.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Email string `json:"email,omitempty"`
}

// MemoryStrategy is how memories are retrieved.
// +kubebuilder:validation:Enum=keyword;semantic;composite
type MemoryStrategy string

// MemoryConfig configures long-term memory.
//
// +kubebuilder:pruning:PreserveUnknownFields
type MemoryConfig struct {
	// enabled turns memory on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// retrieval configures recalling memories into the context.
	// +optional
	Retrieval *MemoryRetrieval `json:"retrieval,omitempty"`

	// tools configures the memory tools offered to the model.
	// +optional
	Tools *MemoryTools `json:"tools,omitempty"`
}

// MemoryRetrieval configures recalling memories.
type MemoryRetrieval struct {
	// enabled turns automatic recall on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// strategy is keyword, semantic (needs an embedding Provider) or
	// composite.
	// +optional
	Strategy MemoryStrategy `json:"strategy,omitempty"`

	// limit is the number of memories recalled per turn (1 to 50).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	Limit *int32 `json:"limit,omitempty"`

	// accessFilter hides memories from recall.
	// +optional
	AccessFilter *MemoryAccessFilter `json:"accessFilter,omitempty"`
}

// MemoryAccessFilter hides memories from recall.
type MemoryAccessFilter struct {
	// denyCEL is a CEL expression over a memory and the caller that is true
	// for memories the caller must not see.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	DenyCEL string `json:"denyCEL,omitempty"`
}

// MemoryTools configures the memory tools.
type MemoryTools struct {
	// enabled offers the remember/recall tools to the model.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}
