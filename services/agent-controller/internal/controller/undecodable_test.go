package controller

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// station is a Station as the API server sends it, with template set to
// the given JSON.
func station(t *testing.T, name, rv, template string) *unstructured.Unstructured {
	t.Helper()
	raw := `{"apiVersion":"agents.re-cinq.com/v1alpha1","kind":"Station",
		"metadata":{"name":"` + name + `","namespace":"ns","resourceVersion":"` + rv + `","annotations":{"a.example.com/x":"1"}},
		"spec":{"agentDefRef":"def","template":` + template + `}}`
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(raw), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const (
	goodTemplate = `{"spec":{"containers":[{"name":"agent","image":"i","resources":{"limits":{"memory":"2Gi"}}}]}}`
	badTemplate  = `{"spec":{"containers":[{"name":"agent","image":"i","resources":{"limits":{"memory":"2GB"}}}]}}`
)

func TestDecodeNamesTheFieldThatDoesNotDecode(t *testing.T) {
	for _, c := range []struct {
		name      string
		template  string
		wantField string
	}{
		{"a malformed quantity is named down to its map key", badTemplate,
			"spec.template.spec.containers[0].resources.limits.memory"},
		{"list entries are named by index", `{"spec":{"containers":[{"name":"a"},{"name":"b","resources":{"requests":{"cpu":"lots"}}}]}}`,
			"spec.template.spec.containers[1].resources.requests.cpu"},
		{"a value of the wrong type is named", `{"spec":{"activeDeadlineSeconds":"soon"}}`,
			"spec.template.spec.activeDeadlineSeconds"},
		{"a map key that reads as more path is bracketed", `{"metadata":{"annotations":{"x.example.com/y":7}}}`,
			"spec.template.metadata.annotations[x.example.com/y]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(station(t, "st", "5", c.template), "Station", &agentsv1alpha1.Station{})
			bad, ok := unreadable(err)
			if !ok {
				t.Fatalf("got %v, want an undecodable error", err)
			}
			if bad.Field != c.wantField {
				t.Errorf("field %q, want %q", bad.Field, c.wantField)
			}
			if want := `Station "st" cannot be read: ` + c.wantField + ": "; !strings.HasPrefix(bad.Error(), want) {
				t.Errorf("message %q, want it to start with %q", bad.Error(), want)
			}
		})
	}
}

func TestDecodeKeepsEveryFieldOfAReadableObject(t *testing.T) {
	obj, err := decode(station(t, "st", "5", goodTemplate), "Station", &agentsv1alpha1.Station{})
	if err != nil {
		t.Fatal(err)
	}
	st := obj.(*agentsv1alpha1.Station)
	if st.Name != "st" || st.ResourceVersion != "5" || st.Spec.AgentDefRef != "def" ||
		st.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String() != "2Gi" {
		t.Errorf("decoded %+v", st)
	}
}

// testWatch returns a Station listWatch with its own registry and gauge.
func testWatch() (*listWatch, prometheus.Gauge) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	return &listWatch{
		gvk:    agentsv1alpha1.GroupVersion.WithKind("Station"),
		newObj: func() client.Object { return &agentsv1alpha1.Station{} },
		bad:    newUndecodables("Station", slog.New(slog.DiscardHandler), g),
	}, g
}

func TestWatchEventsOfUndecodableObjects(t *testing.T) {
	type step struct {
		typ      watch.EventType
		template string
		rv       string
		// want is the event the informer gets; readable whether it carries
		// the decoded object, count the gauge after it.
		want     watch.EventType
		readable bool
		count    float64
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"an undecodable object created while watching is only a bookmark: the cache cannot hold it", []step{
			{watch.Added, badTemplate, "10", watch.Bookmark, false, 1},
		}},
		{"a readable object that turns undecodable is deleted from the cache", []step{
			{watch.Added, goodTemplate, "10", watch.Added, true, 0},
			{watch.Modified, badTemplate, "11", watch.Deleted, false, 1},
		}},
		{"a change that still does not decode is only a bookmark", []step{
			{watch.Added, badTemplate, "10", watch.Bookmark, false, 1},
			{watch.Modified, badTemplate, "11", watch.Bookmark, false, 1},
		}},
		{"a fixed object is added back and forgotten", []step{
			{watch.Added, badTemplate, "10", watch.Bookmark, false, 1},
			{watch.Modified, goodTemplate, "11", watch.Modified, true, 0},
		}},
		{"deleting an undecodable object forgets it; the cache held nothing", []step{
			{watch.Added, badTemplate, "10", watch.Bookmark, false, 1},
			{watch.Deleted, badTemplate, "11", watch.Bookmark, false, 0},
		}},
		{"deleting a readable object is a deletion", []step{
			{watch.Added, goodTemplate, "10", watch.Added, true, 0},
			{watch.Deleted, goodTemplate, "11", watch.Deleted, true, 0},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lw, g := testWatch()
			for i, s := range c.steps {
				got := lw.event(watch.Event{Type: s.typ, Object: station(t, "st", s.rv, s.template)})
				st, ok := got.Object.(*agentsv1alpha1.Station)
				if !ok {
					t.Fatalf("step %d: event object %T, want a *Station", i, got.Object)
				}
				if got.Type != s.want || st.Namespace != "ns" || st.Name != "st" || st.ResourceVersion != s.rv {
					t.Errorf("step %d: got %s of %s/%s at %s, want %s at %s", i, got.Type, st.Namespace, st.Name, st.ResourceVersion, s.want, s.rv)
				}
				if readable := st.Spec.AgentDefRef != ""; readable != s.readable {
					t.Errorf("step %d: event carries the decoded object: %v, want %v", i, readable, s.readable)
				}
				if n := counterValue(g); n != s.count {
					t.Errorf("step %d: %v undecodable, want %v", i, n, s.count)
				}
			}
		})
	}
}

func TestWatchErrorsAndBookmarksReachTheReflector(t *testing.T) {
	lw, _ := testWatch()
	status := &unstructured.Unstructured{Object: map[string]any{"kind": "Status", "apiVersion": "v1", "code": int64(410)}}
	if got := lw.event(watch.Event{Type: watch.Error, Object: status}); got.Type != watch.Error || got.Object != status {
		t.Errorf("an error event must pass as it is (a 410 there makes the reflector re-list), got %+v", got)
	}
	bm := &unstructured.Unstructured{}
	bm.SetResourceVersion("42")
	bm.SetAnnotations(map[string]string{"k8s.io/initial-events-end": "true"})
	got := lw.event(watch.Event{Type: watch.Bookmark, Object: bm})
	st, ok := got.Object.(*agentsv1alpha1.Station)
	if got.Type != watch.Bookmark || !ok || st.ResourceVersion != "42" || st.Annotations["k8s.io/initial-events-end"] != "true" {
		t.Errorf("a bookmark becomes a typed one with its resourceVersion and annotations, got %+v", got)
	}
}

func TestACompleteListForgetsWhatItNoLongerHolds(t *testing.T) {
	lw, g := testWatch()
	lw.event(watch.Event{Type: watch.Added, Object: station(t, "gone", "10", badTemplate)})
	lw.event(watch.Event{Type: watch.Added, Object: station(t, "later", "30", badTemplate)})
	// A LIST at 20 holds "still", not "gone" (deleted while no watch
	// was open); "later" changed after it.
	_, err := decode(station(t, "still", "15", badTemplate), "Station", &agentsv1alpha1.Station{})
	lw.bad.failed(err, "15", "20")
	lw.bad.listed("20")
	if n := counterValue(g); n != 2 {
		t.Errorf("%v undecodable after the LIST, want 2 (still, later)", n)
	}
	for key, want := range map[string]bool{"ns/gone": false, "ns/still": true, "ns/later": true} {
		if _, ok := lw.bad.byKey[key]; ok != want {
			t.Errorf("%s recorded: %v, want %v", key, ok, want)
		}
	}
}
