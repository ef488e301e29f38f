package v1alpha1

// ToolAuthType is how the runtime authenticates to a tool backend.
// +kubebuilder:validation:Enum=none;bearer;basic;serviceAccount;workloadIdentity
type ToolAuthType string

// Tool authentication types.
const (
	ToolAuthNone             ToolAuthType = "none"
	ToolAuthBearer           ToolAuthType = "bearer"
	ToolAuthBasic            ToolAuthType = "basic"
	ToolAuthServiceAccount   ToolAuthType = "serviceAccount"
	ToolAuthWorkloadIdentity ToolAuthType = "workloadIdentity"
)

// ToolAuth is how the runtime authenticates to a tool backend.
//
// +kubebuilder:validation:XValidation:rule="!(self.type in ['bearer', 'basic']) || has(self.secretRef)",message="auth.secretRef is required when auth.type is bearer or basic",fieldPath=".secretRef",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'serviceAccount' || has(self.serviceAccount)",message="auth.serviceAccount is required when auth.type is serviceAccount",fieldPath=".serviceAccount",reason=FieldValueRequired
// +kubebuilder:validation:XValidation:rule="self.type != 'workloadIdentity' || has(self.workloadIdentity)",message="auth.workloadIdentity is required when auth.type is workloadIdentity",fieldPath=".workloadIdentity",reason=FieldValueRequired
type ToolAuth struct {
	// type is none (the default), bearer or basic (a Secret), serviceAccount
	// (a projected Kubernetes service account token) or workloadIdentity (a
	// cloud identity token).
	// +optional
	// +kubebuilder:default=none
	// +kubebuilder:validation:MaxLength=32
	Type ToolAuthType `json:"type,omitempty"`

	// secretRef names the Secret with the credential, for bearer and basic.
	// Without a key, bearer reads "token" and basic reads "username" and
	// "password".
	// +optional
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`

	// serviceAccount configures the projected token, for serviceAccount.
	// +optional
	ServiceAccount *ServiceAccountAuth `json:"serviceAccount,omitempty"`

	// workloadIdentity configures the cloud identity token, for
	// workloadIdentity.
	// +optional
	WorkloadIdentity *WorkloadIdentityAuth `json:"workloadIdentity,omitempty"`
}

// ServiceAccountAuth is a projected Kubernetes service account token sent as
// a bearer token.
type ServiceAccountAuth struct {
	// audience of the token; the backend must expect it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Audience string `json:"audience"`
}

// WorkloadIdentityAuth is a token from the pod's cloud identity.
type WorkloadIdentityAuth struct {
	// cloud that issues the token; only azure is supported.
	// +optional
	// +kubebuilder:validation:Enum=azure
	Cloud string `json:"cloud,omitempty"`

	// audience (resource) the token is requested for.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Audience string `json:"audience"`

	// header carrying the token. Defaults to Authorization.
	// +optional
	// +kubebuilder:default=Authorization
	// +kubebuilder:validation:MaxLength=256
	Header string `json:"header,omitempty"`
}
