package v1alpha1

// DurationPattern is the pattern every duration field of this API is
// validated against: a Go duration such as "30s", "1m30s" or "1.5h" (units
// ns, us, µs, ms, s, m, h) or "0". The same pattern is written literally in
// the kubebuilder markers of those fields, because markers cannot refer to a
// constant. Refusing other strings at admission keeps a typo from making the
// object undecodable for every controller that reads it.
const DurationPattern = `^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`

// LocalObjectReference names another object in the same namespace.
type LocalObjectReference struct {
	// name of the referenced object, in the namespace of the referring object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeyRef names a Secret in the same namespace and, optionally, one key
// of it. Where the key is left out, the field that holds the reference
// documents which keys are looked up instead.
type SecretKeyRef struct {
	// name of the Secret, in the namespace of the referring object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key of the Secret's data to read. When omitted, the referring field's
	// default keys are tried.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key *string `json:"key,omitempty"`
}

// SecretKeySelector names one key of a Secret in the same namespace; both
// parts are required.
type SecretKeySelector struct {
	// name of the Secret, in the namespace of the referring object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key of the Secret's data to read.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// KeyOr returns the reference's key, or def when no key is set.
func (r SecretKeyRef) KeyOr(def string) string {
	if r.Key != nil && *r.Key != "" {
		return *r.Key
	}
	return def
}
