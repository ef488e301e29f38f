package promptpack

import (
	"context"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

func TestReadSource(t *testing.T) {
	v := mustValidator(t)
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}, Data: data}
	}
	for _, tc := range []struct {
		name      string
		cm        *corev1.ConfigMap
		found     bool
		hasKey    bool
		digest    string
		schemaErr bool
		tools     []string
	}{
		{name: "no ConfigMap is not found", cm: nil},
		{name: "a ConfigMap without pack.json is found and has no key", cm: cm(map[string]string{"other.json": validPack}), found: true},
		{name: "content that is not JSON fails the schema and still has its digest",
			cm: cm(map[string]string{omniav1.PackJSONKey: `{"id": `}), found: true, hasKey: true, digest: ContentDigest(`{"id": `), schemaErr: true},
		{name: "valid content has its digest and declares no tools",
			cm: cm(map[string]string{omniav1.PackJSONKey: validPack}), found: true, hasKey: true, digest: ContentDigest(validPack)},
		{name: "valid content with tools declares them",
			cm: cm(map[string]string{omniav1.PackJSONKey: toolPack, "other": "x"}), found: true, hasKey: true, digest: ContentDigest(toolPack),
			tools: []string{"lookup_order", "issue_refund"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ReadSource(tc.cm, v)
			if s.Found != tc.found || s.HasKey != tc.hasKey || s.Digest != tc.digest || (s.SchemaErr != "") != tc.schemaErr {
				t.Fatalf("got %+v", s)
			}
			for _, tool := range tc.tools {
				if !s.Tools[tool] {
					t.Fatalf("tools %v lack %q", s.Tools, tool)
				}
			}
			if len(s.Tools) != len(tc.tools) {
				t.Fatalf("tools %v, want %v", s.Tools, tc.tools)
			}
		})
	}
}

// configMapReads counts the reads of each ConfigMap that reach the API
// server through the reconciler's client.
type configMapReads struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *configMapReads) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// TestAnUnchangedConfigMapIsReadOnce: the passes a newer sibling brings
// to a version take what the first pass read of its unchanged ConfigMap
// from the memo, checked against the cached metadata, and read nothing
// from the API server; an edit changes the ConfigMap's resourceVersion,
// so the pass it brings reads the new content.
func TestAnUnchangedConfigMapIsReadOnce(t *testing.T) {
	ns := env.Namespace(t)
	v := mustValidator(t)
	reads := &configMapReads{n: map[string]int{}}
	counter := &ctrltest.Counter{}
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		c := ctrltest.Intercept(mgr.GetClient(), interceptor.Funcs{
			Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.ConfigMap); ok && key.Namespace == ns {
					reads.mu.Lock()
					reads.n[key.Name]++
					reads.mu.Unlock()
				}
				return cl.Get(ctx, key, obj, opts...)
			},
		})
		r := &Reconciler{Client: c, Recorder: mgr.GetEventRecorder("promptpack-controller"), Validator: v}
		counter.Inner = r
		return r.SetupWithManager(mgr, counter)
	})
	createPack(t, ns, "v1", "support", "1.0.0", validPack)
	ctrltest.Eventually(t, wait, phaseIs(ns, "v1", omniav1.PromptPackPhaseActive))
	passes := counter.Total()
	for _, v := range []string{"2", "3"} {
		createPack(t, ns, "v"+v, "support", v+".0.0", validPack)
	}
	ctrltest.Eventually(t, wait, phaseIs(ns, "v1", omniav1.PromptPackPhaseSuperseded))
	ctrltest.Eventually(t, wait, phaseIs(ns, "v2", omniav1.PromptPackPhaseSuperseded))
	counter.Drain(wait / 10)
	if counter.Total()-passes < 4 {
		t.Fatalf("%d passes for three versions: the test needs passes an unchanged ConfigMap does not bring", counter.Total()-passes)
	}
	for _, name := range []string{"v1-cm", "v2-cm", "v3-cm"} {
		if n := reads.get(name); n != 1 {
			t.Errorf("ConfigMap %s read %d times from the API server, want once", name, n)
		}
	}

	setContent(t, ns, "v1-cm", toolPack)
	ctrltest.Eventually(t, wait, condIs(ns, "v1", omniav1.ConditionContentDrifted, metav1.ConditionTrue, omniav1.ReasonDigestMismatch))
	if n := reads.get("v1-cm"); n != 2 {
		t.Errorf("ConfigMap v1-cm read %d times after its edit, want twice", n)
	}
}

// TestAStatusWriteFromTheCacheKeepsTheStoredManagedFields: the cache holds
// objects without their managedFields (kubeutil.ApplyCacheOptions), and a
// write of such an object leaves the API server's record of who manages
// which field as it was, adding the controller's own.
func TestAStatusWriteFromTheCacheKeepsTheStoredManagedFields(t *testing.T) {
	ns := env.Namespace(t)
	start(t)
	createPack(t, ns, "a", "support", "1.0.0", validPack)
	ctrltest.Eventually(t, wait, phaseIs(ns, "a", omniav1.PromptPackPhaseActive))
	p, err := getPack(ns, "a")
	if err != nil {
		t.Fatal(err)
	}
	var created, status bool
	for _, f := range p.ManagedFields {
		created = created || f.Subresource == ""
		status = status || f.Subresource == "status"
	}
	if !created || !status {
		t.Fatalf("managedFields %+v: want the creator's entry kept beside the status writer's", p.ManagedFields)
	}
}
