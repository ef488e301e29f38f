package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// badLimits is the one-character typo: 2GB is not a Kubernetes quantity
// (2G or 2Gi are).
const badLimits = `{"spec":{"template":{"spec":{"containers":[{"name":"agent","image":"runner","resources":{"limits":{"memory":"2GB"}}}]}}}}`

const badField = `spec.template.spec.containers[0].resources.limits.memory: quantities must match`

// badStation returns a Station holding badLimits, as unstructured: its Go
// type cannot hold the value.
func badStation(ns, name, def string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": agentsv1alpha1.GroupVersion.String(), "kind": "Station",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{"agentDefRef": def, "template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "agent", "image": "runner", "resources": map[string]any{"limits": map[string]any{"memory": "2GB"}}},
		}}}},
	}}
	return u
}

// setTemplateSchema puts s in place of the Station CRD's spec.template
// schema and returns the one it replaced.
func setTemplateSchema(t *testing.T, s apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	var old apiextensionsv1.JSONSchemaProps
	eventually(t, "the Station CRD to update", func() bool {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "stations.agents.re-cinq.com"}, crd); err != nil {
			t.Fatal(err)
		}
		root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		spec := root.Properties["spec"]
		old = spec.Properties["template"]
		spec.Properties["template"] = s
		root.Properties["spec"] = spec
		err := env.Client.Update(context.Background(), crd)
		if err != nil && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
		return err == nil
	})
	return old
}

// withAnyTemplate runs write while the Station CRD's template takes any
// object, as it did before admission checked it against the pod template
// schema, then puts the real schema back: that is how a malformed Station
// is stored on a cluster that ran the earlier CRD. write is retried until
// it succeeds, as the API server takes the new schema in a moment later.
func withAnyTemplate(t *testing.T, write func() error) {
	t.Helper()
	real := setTemplateSchema(t, apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptr.To(true), Description: "any object",
	})
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		setTemplateSchema(t, real)
		probe := badStation("default", "schema-probe", "none")
		eventually(t, "the real template schema to be back", func() bool {
			return apierrors.IsInvalid(env.Client.Create(context.Background(), probe, client.DryRunAll))
		})
	}
	t.Cleanup(restore)
	eventually(t, "a write the real schema refuses", func() bool { return write() == nil })
	restore()
}

func undecodableCount(m *metrics.Metrics, kind string) float64 {
	return counterValue(m.Undecodable.WithLabelValues(kind))
}

// TestAnUndecodableStationStopsOnlyTheAgentsThatNeedIt: a Station stored
// with a value its type refuses, found when the controller starts (after a
// restart or a failover), neither keeps the caches from syncing nor stops
// Agents elsewhere; the Agents that name it fail saying what to fix.
func TestAnUndecodableStationStopsOnlyTheAgentsThatNeedIt(t *testing.T) {
	ctx := context.Background()
	nsBad, nsGood := env.Namespace(t), env.Namespace(t)
	mkStation(t, nsGood, "st", nil)
	mkStation(t, nsBad, "fine", nil)
	withAnyTemplate(t, func() error { return env.Client.Create(ctx, badStation(nsBad, "bad", "fine-def")) })
	t.Cleanup(func() { _ = env.Client.Delete(ctx, badStation(nsBad, "bad", "")) })

	// Every namespace, as deployed: the Station is in one, the healthy
	// Agent in another.
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	ctl := New(c, env.Kube, m, Options{PollInterval: 2 * time.Second, Log: quiet})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = ctl.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	eventually(t, "the caches to sync", ctl.Synced)
	mkAgent(t, nsGood, "elsewhere", "st")
	mkAgent(t, nsBad, "neighbour", "fine")
	mkAgent(t, nsBad, "victim", "bad")
	waitPhase(t, nsGood, "elsewhere", agentsv1alpha1.PhaseRunning)
	waitPhase(t, nsBad, "neighbour", agentsv1alpha1.PhaseRunning)
	a := waitPhase(t, nsBad, "victim", agentsv1alpha1.PhaseFailed)
	if want := `Station "bad" cannot be read: ` + badField; !strings.HasPrefix(a.Status.FailureReason, want) {
		t.Errorf("failure reason %q, want it to start with %q", a.Status.FailureReason, want)
	}
	if cond := meta.FindStatusCondition(a.Status.Conditions, agentsv1alpha1.ConditionResolved); cond == nil || cond.Reason != agentsv1alpha1.ReasonStationUnreadable {
		t.Errorf("Resolved condition %+v, want reason %s", cond, agentsv1alpha1.ReasonStationUnreadable)
	}
	if n := undecodableCount(m, "Station"); n != 1 {
		t.Errorf("controller_undecodable_objects{kind=Station} = %v, want 1", n)
	}

	if err := env.Client.Delete(ctx, badStation(nsBad, "bad", "")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted Station to be forgotten", func() bool { return undecodableCount(m, "Station") == 0 })
}

// TestAStationThatTurnsUndecodableLeavesTheCache: a cached Station whose
// new version does not decode is dropped from the cache, so no run starts
// from its stale template; fixed, it is read again.
func TestAStationThatTurnsUndecodableLeavesTheCache(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	ctl, m := start(t, ns)
	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "before", "st")
	waitPhase(t, ns, "before", agentsv1alpha1.PhaseRunning)

	st := &unstructured.Unstructured{}
	st.SetGroupVersionKind(agentsv1alpha1.GroupVersion.WithKind("Station"))
	st.SetNamespace(ns)
	st.SetName("st")
	withAnyTemplate(t, func() error {
		return env.Client.Patch(ctx, st, client.RawPatch(types.MergePatchType, []byte(badLimits)))
	})
	eventually(t, "the stale Station to leave the cache", func() bool {
		_, cached, _ := ctl.stations.GetIndexer().GetByKey(ns + "/st")
		return !cached
	})
	mkAgent(t, ns, "during", "st")
	a := waitPhase(t, ns, "during", agentsv1alpha1.PhaseFailed)
	if want := `Station "st" cannot be read: ` + badField; !strings.HasPrefix(a.Status.FailureReason, want) {
		t.Errorf("failure reason %q, want it to start with %q", a.Status.FailureReason, want)
	}
	if n := undecodableCount(m, "Station"); n != 1 {
		t.Errorf("controller_undecodable_objects{kind=Station} = %v, want 1", n)
	}

	fixed := strings.Replace(badLimits, "2GB", "2Gi", 1)
	if err := env.Client.Patch(ctx, st, client.RawPatch(types.MergePatchType, []byte(fixed))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the fixed Station to be forgotten", func() bool { return undecodableCount(m, "Station") == 0 })
	mkAgent(t, ns, "after", "st")
	waitPhase(t, ns, "after", agentsv1alpha1.PhaseRunning)
}

// TestAListIsPaginated: the LIST asks for PageSize objects at a time and
// follows the continue token (the client overwrites the page options in
// Raw, so they must travel on the client's own options).
func TestAListIsPaginated(t *testing.T) {
	ns := env.Namespace(t)
	for _, name := range []string{"a", "b", "c"} {
		mkAgent(t, ns, name, "nowhere")
	}
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctl := New(c, env.Kube, metrics.New(), Options{Namespace: ns, PageSize: 2, Log: quiet})
	var names []string
	opts := metav1.ListOptions{}
	for pages := 1; ; pages++ {
		obj, err := ctl.lw.ListWithContext(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		list := obj.(*agentsv1alpha1.AgentList)
		if len(list.Items) > 2 {
			t.Fatalf("page %d holds %d Agents, want at most 2", pages, len(list.Items))
		}
		for _, a := range list.Items {
			names = append(names, a.Name)
		}
		if list.Continue == "" {
			if pages != 2 {
				t.Errorf("%d pages, want 2", pages)
			}
			break
		}
		opts.Continue = list.Continue
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Errorf("listed %v, want a, b and c", names)
	}
}
