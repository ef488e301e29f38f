package kubescheme

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	omniav1alpha1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestNewKnowsEveryGroup: a client built on the scheme can read a core
// kind, a CRD and a kind of each API group.
func TestNewKnowsEveryGroup(t *testing.T) {
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []runtime.Object{&appsv1.Deployment{}, &apiextensionsv1.CustomResourceDefinition{}, &agentsv1alpha1.Agent{}, &omniav1alpha1.AgentRuntime{}} {
		if gvks, _, err := s.ObjectKinds(obj); err != nil || len(gvks) == 0 {
			t.Errorf("%T: %v", obj, err)
		}
	}
}
