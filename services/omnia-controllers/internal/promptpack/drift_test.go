package promptpack

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestEditedContentOfAnActivePackIsDetected: a published version's
// content is pinned. An edit of its ConfigMap reaches the pack through
// the ConfigMap watch and sets ContentDrifted=True/DigestMismatch naming
// both digests, with a Warning event, while status.contentDigest keeps
// the digest of the validated content; restoring the content clears it.
func TestEditedContentOfAnActivePackIsDetected(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	createPack(t, ns, "a", "support", "1.0.0", validPack)
	pinned, edited := ContentDigest(validPack), ContentDigest(toolPack)
	ctrltest.Eventually(t, wait, phaseIs(ns, "a", omniav1.PromptPackPhaseActive))
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionContentDrifted, metav1.ConditionFalse, omniav1.ReasonDigestMatches))
	wantDigest(t, ns, "a", pinned)

	setContent(t, ns, "a-cm", toolPack)
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionContentDrifted, metav1.ConditionTrue, omniav1.ReasonDigestMismatch))
	ctrltest.Eventually(t, wait, eventFor(ns, "a", omniav1.EventContentDrifted, fmt.Sprintf("its digest is %s, not %s", edited, pinned)))
	wantDigest(t, ns, "a", pinned)
	if p, _ := getPack(ns, "a"); p.Status.Phase != omniav1.PromptPackPhaseActive {
		t.Errorf("phase %s after a valid edit, want Active (the drift is reported, not judged)", p.Status.Phase)
	}

	setContent(t, ns, "a-cm", validPack)
	ctrltest.Eventually(t, wait, condIs(ns, "a", omniav1.ConditionContentDrifted, metav1.ConditionFalse, omniav1.ReasonDigestMatches))
	wantDigest(t, ns, "a", pinned)
}

func wantDigest(t *testing.T, ns, name, want string) {
	t.Helper()
	p, err := getPack(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.ContentDigest != want {
		t.Fatalf("contentDigest %q, want the pinned %q", p.Status.ContentDigest, want)
	}
}

// setContent replaces the pack.json of a ConfigMap, as kubectl edit does.
//
//nolint:contextcheck // test helper: it makes its own context.Background(), the only context the tests here have
func setContent(t *testing.T, ns, name, content string) {
	t.Helper()
	ctx := context.Background()
	c := ctrltest.Get[corev1.ConfigMap](t, env, types.NamespacedName{Namespace: ns, Name: name})
	c.Data = map[string]string{omniav1.PackJSONKey: content}
	if err := env.Client.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
}
