package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RetryBackoff is the exponential backoff shared by every retry policy: the
// first retry waits initialBackoff, each further one multiplies the wait by
// backoffMultiplier, up to maxBackoff. Each retry policy that embeds it checks that
// backoffMultiplier is at least 1.0 and maxBackoff is not shorter than
// initialBackoff.
type RetryBackoff struct {
	// maxAttempts is the total number of attempts, the first included (1 to
	// 10; 1 means no retry).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	MaxAttempts int32 `json:"maxAttempts"`

	// initialBackoff is the wait before the first retry, as a Go duration.
	// Defaults to 100ms.
	// +optional
	// +kubebuilder:default="100ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	InitialBackoff *metav1.Duration `json:"initialBackoff,omitempty"`

	// backoffMultiplier multiplies the wait after each retry, as a decimal
	// string of at least 1.0. Defaults to "2.0".
	// +optional
	// +kubebuilder:default="2.0"
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	BackoffMultiplier string `json:"backoffMultiplier,omitempty"`

	// maxBackoff caps the wait between two attempts, as a Go duration.
	// Defaults to 30s.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	MaxBackoff *metav1.Duration `json:"maxBackoff,omitempty"`
}

// HTTPRetryPolicy retries failed HTTP calls.
//
// +kubebuilder:validation:XValidation:rule="!has(self.backoffMultiplier) || double(self.backoffMultiplier) >= 1.0",message="retryPolicy.backoffMultiplier must be at least 1.0",fieldPath=".backoffMultiplier"
// +kubebuilder:validation:XValidation:rule="!has(self.initialBackoff) || !has(self.maxBackoff) || duration(self.maxBackoff) >= duration(self.initialBackoff)",message="retryPolicy.maxBackoff must not be shorter than retryPolicy.initialBackoff",fieldPath=".maxBackoff"
type HTTPRetryPolicy struct {
	RetryBackoff `json:",inline"`

	// retryOn lists the HTTP status codes that are retried. Unset means 408,
	// 429, 500, 502, 503 and 504; an empty list retries no status code.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=100
	// +kubebuilder:validation:items:Maximum=599
	RetryOn []int32 `json:"retryOn,omitempty"`

	// retryOnNetworkError retries calls that failed before a response
	// (connection refused, reset, timeout). Defaults to true.
	// +optional
	// +kubebuilder:default=true
	RetryOnNetworkError *bool `json:"retryOnNetworkError,omitempty"`

	// respectRetryAfter waits as long as a Retry-After response header asks,
	// capped by maxBackoff. Defaults to true.
	// +optional
	// +kubebuilder:default=true
	RespectRetryAfter *bool `json:"respectRetryAfter,omitempty"`
}

// GRPCStatusCode is the name of a google.rpc.Code.
// +kubebuilder:validation:Enum=CANCELLED;UNKNOWN;INVALID_ARGUMENT;DEADLINE_EXCEEDED;NOT_FOUND;ALREADY_EXISTS;PERMISSION_DENIED;RESOURCE_EXHAUSTED;FAILED_PRECONDITION;ABORTED;OUT_OF_RANGE;UNIMPLEMENTED;INTERNAL;UNAVAILABLE;DATA_LOSS;UNAUTHENTICATED
type GRPCStatusCode string

// GRPCRetryPolicy retries failed gRPC calls.
//
// +kubebuilder:validation:XValidation:rule="!has(self.backoffMultiplier) || double(self.backoffMultiplier) >= 1.0",message="retryPolicy.backoffMultiplier must be at least 1.0",fieldPath=".backoffMultiplier"
// +kubebuilder:validation:XValidation:rule="!has(self.initialBackoff) || !has(self.maxBackoff) || duration(self.maxBackoff) >= duration(self.initialBackoff)",message="retryPolicy.maxBackoff must not be shorter than retryPolicy.initialBackoff",fieldPath=".maxBackoff"
type GRPCRetryPolicy struct {
	RetryBackoff `json:",inline"`

	// retryableStatusCodes lists the status codes that are retried. Unset
	// means UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	RetryableStatusCodes []GRPCStatusCode `json:"retryableStatusCodes,omitempty"`
}

// MCPRetryPolicy retries failed MCP calls.
//
// +kubebuilder:validation:XValidation:rule="!has(self.backoffMultiplier) || double(self.backoffMultiplier) >= 1.0",message="retryPolicy.backoffMultiplier must be at least 1.0",fieldPath=".backoffMultiplier"
// +kubebuilder:validation:XValidation:rule="!has(self.initialBackoff) || !has(self.maxBackoff) || duration(self.maxBackoff) >= duration(self.initialBackoff)",message="retryPolicy.maxBackoff must not be shorter than retryPolicy.initialBackoff",fieldPath=".maxBackoff"
type MCPRetryPolicy struct {
	RetryBackoff `json:",inline"`
}

// DefaultHTTPRetryOn are the status codes retried when retryOn is unset.
var DefaultHTTPRetryOn = []int32{408, 429, 500, 502, 503, 504}

// DefaultGRPCRetryableStatusCodes are retried when retryableStatusCodes is
// unset.
var DefaultGRPCRetryableStatusCodes = []GRPCStatusCode{"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"}
