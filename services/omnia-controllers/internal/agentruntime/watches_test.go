package agentruntime

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestRegistrySecretAndOwnedWatches: a ToolRegistry created later is
// picked up through the registry index; rotating the Provider's credential
// Secret rolls the pods (new ReplicaSet) through the Secret → Provider →
// agent mapping; a deleted Service, an owned object, is recreated.
func TestRegistrySecretAndOwnedWatches(t *testing.T) {
	ns := env.Namespace(t)
	startAll(t)
	ctx := context.Background()
	cm, pack := packObjects(ns, "support-v1", "1.0.0", validPack)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "llm-key", Namespace: ns,
		Labels: map[string]string{omniav1.LabelType: omniav1.LabelTypeCredentials}}, Data: map[string][]byte{"api-key": []byte("k1")}}
	prov := mockProvider(ns, "llm")
	prov.Spec.Credential = &omniav1.CredentialConfig{SecretRef: &omniav1.SecretKeyRef{Name: "llm-key"}}
	ctrltest.Create(t, env, cm, pack, sec, prov, newAgent(ns, "agent", func(a *omniav1.AgentRuntime) {
		a.Spec.ToolRegistryRef = &omniav1.ToolRegistryRef{Name: "tools"}
	}))
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionToolRegistryReady, omniav1.ReasonToolRegistryNotFound))
	ctrltest.Eventually(t, wait, replicaSetsAre(t, ns, "agent", 1))

	tr := &omniav1.ToolRegistry{ObjectMeta: metav1.ObjectMeta{Name: "tools", Namespace: ns}, Spec: omniav1.ToolRegistrySpec{Handlers: []omniav1.HandlerDefinition{{
		Name: "ask", Type: omniav1.HandlerTypeClient, Tool: &omniav1.ToolDefinition{Name: "ask", Description: "ask the user",
			InputSchema: apiextensionsv1.JSON{Raw: []byte(`{"type":"object"}`)}}}}}}
	ctrltest.Create(t, env, tr)
	ctrltest.Eventually(t, wait, agentIs(ns, "agent", omniav1.AgentRuntimePhasePending, omniav1.ConditionToolRegistryReady, omniav1.ReasonToolRegistryFound))
	ctrltest.Eventually(t, wait, replicaSetsAre(t, ns, "agent", 2)) // the registry is a pod input

	sec.Data["api-key"] = []byte("k2")
	if err := env.Client.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	ctrltest.Eventually(t, wait, replicaSetsAre(t, ns, "agent", 3)) // the rotated key is a pod input

	deletedAndRecreated(t, ctrltest.Get[corev1.Service](t, env, types.NamespacedName{Namespace: ns, Name: "agent"}))
}
