// Package kubescheme builds the runtime.Scheme of a client that reads and
// writes agentplane's objects next to Kubernetes' own: the core kinds, the
// CustomResourceDefinition kind and both API groups (agents.re-cinq.com
// and omnia.altairalabs.ai).
package kubescheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// New returns a scheme with the core kinds, CRDs and both API groups.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, agentsv1alpha1.AddToScheme, omniav1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}
