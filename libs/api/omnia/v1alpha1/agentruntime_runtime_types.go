package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FrameworkType is the agent framework the runtime container runs.
// +kubebuilder:validation:Enum=promptkit;langchain;custom
type FrameworkType string

// Framework types.
const (
	FrameworkPromptKit FrameworkType = "promptkit"
	FrameworkLangChain FrameworkType = "langchain"
	FrameworkCustom    FrameworkType = "custom"
)

// FrameworkConfig selects the runtime container.
type FrameworkConfig struct {
	// type of framework: promptkit (the default), langchain or custom. Any
	// type but promptkit needs an image, here or in the operator's
	// framework image map (FrameworkReady reports a missing one).
	// +required
	// +kubebuilder:default=promptkit
	// +kubebuilder:validation:MaxLength=16
	Type FrameworkType `json:"type"`

	// version of the framework, informational for the built-in images.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`

	// image of the runtime container; overrides the operator's default for
	// the type.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`
}

// ContextConfig is where conversation state is kept.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'memory' || has(self.storeRef)",message="context.storeRef is required when context.type is redis",fieldPath=".storeRef",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type == 'redis' || !has(self.storeRef)",message="context.storeRef may only be set when context.type is redis",fieldPath=".storeRef",reason=FieldValueForbidden
type ContextConfig struct {
	// type is memory (in the pod, lost on restart; the default) or redis.
	// +optional
	// +kubebuilder:default=memory
	// +kubebuilder:validation:MaxLength=16
	Type StoreType `json:"type,omitempty"`

	// storeRef names a Secret whose "url" key holds the Redis address;
	// required for redis, refused for memory.
	// +optional
	StoreRef *LocalObjectReference `json:"storeRef,omitempty"`

	// ttl is how long an idle conversation's state is kept, as a Go
	// duration. Defaults to 24h.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must be a duration such as 30s, 5m or 1h"
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// RuntimeConfig shapes the agent's Deployment.
type RuntimeConfig struct {
	// replicas of the Deployment. Defaults to 1; ignored while autoscaling
	// is enabled.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// autoscaling scales the Deployment with an HPA or a KEDA ScaledObject.
	// When unset, the Workspace service group's autoscaling applies.
	// +optional
	Autoscaling *AutoscalingConfig `json:"autoscaling,omitempty"`

	// resources of the runtime container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector constrains the nodes the pods run on.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations of the pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity of the pods. Without one, pods of a multi-replica agent are
	// spread across zones.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// volumes added to the pods, each a Kubernetes Volume (a name plus one
	// volume source, as in a pod spec). The items are not expanded in this
	// schema, which keeps the CRD small enough for client-side kubectl apply;
	// the controller decodes them strictly (unknown fields and missing names
	// are reported in the DeploymentReady condition) and the API server
	// validates them again as part of the Deployment.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Type=object
	Volumes []apiextensionsv1.JSON `json:"volumes,omitempty"`

	// volumeMounts added to the runtime container.
	// +optional
	// +listType=atomic
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// extraEnv are extra environment variables of the runtime container.
	// +optional
	// +listType=atomic
	ExtraEnv []corev1.EnvVar `json:"extraEnv,omitempty"`
}

// AutoscalerType is the autoscaler that manages replicas.
// +kubebuilder:validation:Enum=hpa;keda
type AutoscalerType string

// Autoscaler types.
const (
	AutoscalerHPA  AutoscalerType = "hpa"
	AutoscalerKEDA AutoscalerType = "keda"
)

// AutoscalingConfig scales an agent horizontally. Agents mostly wait on model
// calls, so memory (one session holds memory) is the primary metric and CPU
// a safety valve.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="autoscaling.minReplicas must not exceed autoscaling.maxReplicas",fieldPath=".minReplicas"
// +kubebuilder:validation:XValidation:rule="!(has(self.enabled) && self.enabled) || !has(self.minReplicas) || self.minReplicas > 0 || (has(self.type) && self.type == 'keda')",message="autoscaling.minReplicas 0 (scale to zero) needs autoscaling.type keda",fieldPath=".minReplicas"
type AutoscalingConfig struct {
	// enabled turns autoscaling on; spec.runtime.replicas is then ignored.
	// +optional
	// +kubebuilder:default=false
	Enabled bool `json:"enabled,omitempty"`

	// type is hpa (a HorizontalPodAutoscaler, the default) or keda (a KEDA
	// ScaledObject, which can scale to zero).
	// +optional
	// +kubebuilder:default=hpa
	// +kubebuilder:validation:MaxLength=8
	Type AutoscalerType `json:"type,omitempty"`

	// minReplicas is the lower bound. Defaults to 1; 0 (scale to zero) needs
	// keda.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the upper bound, at least 1. Defaults to 100.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// targetMemoryUtilizationPercentage is the HPA's memory target (1 to
	// 100). Defaults to 70.
	// +optional
	// +kubebuilder:default=70
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetMemoryUtilizationPercentage *int32 `json:"targetMemoryUtilizationPercentage,omitempty"`

	// targetCPUUtilizationPercentage is the HPA's CPU target (1 to 100).
	// Defaults to 90.
	// +optional
	// +kubebuilder:default=90
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`

	// scaleDownStabilizationSeconds is how long the HPA waits before
	// scaling down (0 to 3600). Defaults to 300.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	ScaleDownStabilizationSeconds *int32 `json:"scaleDownStabilizationSeconds,omitempty"`

	// keda configures the ScaledObject, for type keda.
	// +optional
	KEDA *KEDAConfig `json:"keda,omitempty"`
}

// KEDAConfig configures a KEDA ScaledObject.
type KEDAConfig struct {
	// pollingInterval is how often triggers are checked, in seconds.
	// Defaults to 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	PollingInterval *int32 `json:"pollingInterval,omitempty"`

	// cooldownPeriod is how long after the last active trigger KEDA waits
	// before scaling to zero, in seconds. Defaults to 300.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	CooldownPeriod *int32 `json:"cooldownPeriod,omitempty"`

	// triggers are KEDA triggers. When empty, one Prometheus trigger on the
	// agent's active connections is used.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Triggers []KEDATrigger `json:"triggers,omitempty"`

	// connectionThreshold is the active connections per replica of the
	// default trigger (200 when unset; lower it for voice workloads).
	// +optional
	// +kubebuilder:validation:Minimum=1
	ConnectionThreshold *int32 `json:"connectionThreshold,omitempty"`
}

// KEDATrigger is one KEDA scaler.
type KEDATrigger struct {
	// type of the scaler, such as prometheus or cron.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Type string `json:"type"`

	// metadata is the scaler's configuration, as KEDA documents it.
	// +required
	Metadata map[string]string `json:"metadata"`
}

// PodOverrides adjust the pods the operator builds. Container-level parts
// apply to the facade and runtime containers.
type PodOverrides struct {
	// serviceAccountName of the pods; overrides the Workspace default and the
	// operator's per-agent account.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// labels added to the pods (selector labels cannot be overridden).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations added to the pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// nodeSelector of the pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations of the pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// priorityClassName of the pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// imagePullSecrets of the pods.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// extraEnv added to the containers.
	// +optional
	// +listType=atomic
	ExtraEnv []corev1.EnvVar `json:"extraEnv,omitempty"`

	// extraEnvFrom added to the containers.
	// +optional
	// +listType=atomic
	ExtraEnvFrom []corev1.EnvFromSource `json:"extraEnvFrom,omitempty"`

	// extraVolumes added to the pods, each a Kubernetes Volume (a name plus
	// one volume source). Like spec.runtime.volumes, the items are not
	// expanded in this schema; the controller decodes them strictly.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Type=object
	ExtraVolumes []apiextensionsv1.JSON `json:"extraVolumes,omitempty"`

	// extraVolumeMounts added to the containers.
	// +optional
	// +listType=atomic
	ExtraVolumeMounts []corev1.VolumeMount `json:"extraVolumeMounts,omitempty"`
}
