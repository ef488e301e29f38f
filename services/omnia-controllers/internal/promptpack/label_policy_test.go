package promptpack

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestThePackNameLabelIsStampedAtAdmission: with the shipped policy
// installed, the API server itself sets the pack-name label on a pack
// created without it, corrects a wrong one and restores a removed one —
// no controller runs here.
func TestThePackNameLabelIsStampedAtAdmission(t *testing.T) {
	ns := env.Namespace(t)
	ctrltest.InstallLabelPolicy(t, env, ns)
	ctx := context.Background()
	cases := []struct {
		name   string
		labels map[string]string
	}{
		{"a pack created without the label gets it", nil},
		{"a pack created with another pack's name in the label gets its own", map[string]string{omniav1.LabelPromptPack: "other"}},
		{"the pack's other labels are kept", map[string]string{"team": "support"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &omniav1.PromptPack{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pack-%d", i), Namespace: ns, Labels: tc.labels},
				Spec: omniav1.PromptPackSpec{PackName: "support", Version: "1.0.0",
					Source: omniav1.PromptPackSource{Type: omniav1.SourceTypeConfigMap, ConfigMapRef: &omniav1.LocalObjectReference{Name: "cm"}}}}
			ctrltest.Create(t, env, p)
			if got := p.Labels[omniav1.LabelPromptPack]; got != "support" {
				t.Fatalf("label %q after create, want %q", got, "support")
			}
			for k, v := range tc.labels {
				if k != omniav1.LabelPromptPack && p.Labels[k] != v {
					t.Fatalf("label %s = %q after create, want %q kept", k, p.Labels[k], v)
				}
			}
		})
	}
	t.Run("a removed label is restored on the update that removes it", func(t *testing.T) {
		p := ctrltest.Get[omniav1.PromptPack](t, env, types.NamespacedName{Namespace: ns, Name: "pack-0"})
		delete(p.Labels, omniav1.LabelPromptPack)
		if err := env.Client.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		if got := p.Labels[omniav1.LabelPromptPack]; got != "support" {
			t.Fatalf("label %q after the update, want %q", got, "support")
		}
	})
}

// writeCounter counts the writes a reconciler makes in one namespace.
type writeCounter struct {
	ns string
	mu sync.Mutex
	n  map[string]int
}

func (c *writeCounter) add(verb string, obj client.Object) {
	if obj.GetNamespace() != c.ns {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[verb]++
}

func (c *writeCounter) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// funcs counts every write verb before it is made.
func (c *writeCounter) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			c.add("create", obj)
			return cl.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			c.add("update", obj)
			return cl.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			c.add("patch", obj)
			return cl.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			c.add("delete", obj)
			return cl.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			c.add(sub+" update", obj)
			return cl.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			c.add(sub+" patch", obj)
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// startCounted runs the PromptPack controller with its writes in ns
// counted.
func startCounted(t testing.TB, ns string) *writeCounter {
	t.Helper()
	v, err := NewSchemaValidator()
	if err != nil {
		t.Fatal(err)
	}
	wc := &writeCounter{ns: ns, n: map[string]int{}}
	ctrltest.StartManager(t, env, func(mgr ctrl.Manager) error {
		r := &Reconciler{Client: ctrltest.Intercept(mgr.GetClient(), wc.funcs()), Recorder: mgr.GetEventRecorder("promptpack-controller"), Validator: v}
		return r.SetupWithManager(mgr, nil)
	})
	return wc
}

// TestAPackCostsOneWrite: with the label policy installed the controller
// never writes a pack's metadata, only its status; without it, it stamps
// the label itself, one write more per pack. (A pack's status is written
// once, or twice when it is ranked before a newer sibling validates.)
func TestAPackCostsOneWrite(t *testing.T) {
	const packs = 4
	for _, tc := range []struct {
		name    string
		policy  bool
		patches int
	}{
		{"with the label policy only the status is written", true, 0},
		{"without it the controller stamps the label, then writes the status", false, packs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			if tc.policy {
				ctrltest.InstallLabelPolicy(t, env, ns)
			}
			wc := startCounted(t, ns)
			for ver := 2; ver >= 1; ver-- {
				for _, name := range []string{"a", "b"} {
					createPack(t, ns, fmt.Sprintf("%s-v%d", name, ver), name, fmt.Sprintf("%d.0.0", ver), validPack)
				}
			}
			for _, name := range []string{"a", "b"} {
				ctrltest.Eventually(t, wait, phaseIs(ns, name+"-v2", omniav1.PromptPackPhaseActive))
				ctrltest.Eventually(t, wait, phaseIs(ns, name+"-v1", omniav1.PromptPackPhaseSuperseded))
			}
			// Late passes would show as more writes.
			time.Sleep(2 * time.Second)
			got := wc.counts()
			t.Logf("writes for %d packs: %v", packs, got)
			if got["patch"] != tc.patches {
				t.Errorf("%d label patches for %d packs, want %d", got["patch"], packs, tc.patches)
			}
			if got["status update"] < packs {
				t.Errorf("%d status writes for %d packs, want one each at least", got["status update"], packs)
			}
			for verb := range got {
				if verb != "patch" && verb != "status update" {
					t.Errorf("unexpected writes: %s %d", verb, got[verb])
				}
			}
		})
	}
}
