package kubeutil

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// SecretSelector selects the only Secrets the controllers may see: those
// that opted in to Provider use (omnia.altairalabs.ai/type=credentials)
// and the OIDC key-set mirrors the controllers write themselves. A Secret
// without the label is invisible to every controller, so a Provider cannot
// make the controllers read it, probe a vendor with it, or hand it to an
// agent (docs/security.md).
func SecretSelector() labels.Selector {
	req, err := labels.NewRequirement(omniav1.LabelType, selection.In,
		[]string{omniav1.LabelTypeCredentials, omniav1.LabelTypeOIDCJWKS})
	if err != nil {
		// The values are constants that are valid label values.
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}

// ActivatorSliceManagedBy is the endpointslice.kubernetes.io/managed-by
// value of the EndpointSlices that route a reaped agent's Service to the
// activator (the agentruntime package writes them). A label value cannot
// hold a "/", so it is named as the cluster's own controllers name theirs
// (endpointslice-controller.k8s.io).
const ActivatorSliceManagedBy = "agentruntime-controller.omnia.altairalabs.ai"

// AgentPodSelector selects the pods of AgentRuntimes: the name and
// managed-by labels every agent pod carries (agentruntime.SelectorLabels).
func AgentPodSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "omnia-agent", "app.kubernetes.io/managed-by": "omnia-controllers"})
}

// ApplyCacheOptions limits what the manager's cache holds to what the
// controllers need. Secrets: only those SecretSelector selects. ConfigMaps:
// never cached whole; the controllers watch their metadata only (see
// WatchesMetadata in the PromptPack and SkillSource controllers) and read
// the one ConfigMap a pass needs from the API server, so a tenant's
// ConfigMaps never sit in this process's memory; their cached metadata
// is stripped too (stripCached).
//
// EndpointSlices: only the activator's (ActivatorSliceManagedBy); Pods:
// only agent pods (AgentPodSelector), which the activator waits on and
// whose names tell which facades' session reports still count. Both
// kinds exist in every namespace in numbers, and nothing else reads them.
func ApplyCacheOptions(o *ctrl.Options) {
	if o.Cache.ByObject == nil {
		o.Cache.ByObject = map[client.Object]cache.ByObject{}
	}
	o.Cache.ByObject[&corev1.Secret{}] = cache.ByObject{Label: SecretSelector()}
	o.Cache.ByObject[&discoveryv1.EndpointSlice{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: ActivatorSliceManagedBy})}
	o.Cache.ByObject[&corev1.Pod{}] = cache.ByObject{Label: AgentPodSelector()}
	o.Cache.DefaultTransform = stripCached
	if o.Client.Cache == nil {
		o.Client.Cache = &client.CacheOptions{}
	}
	o.Client.Cache.DisableFor = append(o.Client.Cache.DisableFor, &corev1.ConfigMap{})
}

// stripCached drops what no controller reads before the cache stores an
// object: every object's managedFields (a write that omits them keeps the
// stored ones), and the annotations of metadata-only objects (kubectl's
// last-applied annotation repeats a ConfigMap's data). Typed objects keep
// their annotations: the controllers read some.
func stripCached(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	if p, ok := obj.(*metav1.PartialObjectMetadata); ok {
		p.Annotations = nil
	}
	return obj, nil
}
