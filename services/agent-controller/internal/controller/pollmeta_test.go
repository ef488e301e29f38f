package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// listKinds counts the LISTs a client makes, by what they read: Agents'
// metadata only, or Agents whole.
type listKinds struct {
	mu             sync.Mutex
	metadata, full int
}

func (l *listKinds) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			l.mu.Lock()
			switch ul := list.(type) {
			case *metav1.PartialObjectMetadataList:
				if ul.Kind == "AgentList" {
					l.metadata++
				}
			case *unstructured.UnstructuredList:
				if ul.GetKind() == "AgentList" {
					l.full++
				}
			}
			l.mu.Unlock()
			return c.List(ctx, list, opts...)
		},
	}
}

func (l *listKinds) take() (metadata, full int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	metadata, full = l.metadata, l.full
	l.metadata, l.full = 0, 0
	return metadata, full
}

// TestThePollReadsAgentsWholeOnlyWhenTheCacheIsBehind: the poll lists the
// Agents' metadata, and lists them whole only when that shows the cache
// behind — an Agent it does not hold, or holds at an older version.
// When the cache is current the metadata alone evicts a deleted Agent.
// Of the Agents that need no pass of their own (finished ones here), the
// poll passes over those it refreshed, as their missed events would have,
// and no other. (The controller is not running: the cache changes only
// by the poll.)
func TestThePollReadsAgentsWholeOnlyWhenTheCacheIsBehind(t *testing.T) {
	ns := env.Namespace(t)
	for i := range 3 {
		name := fmt.Sprintf("a%d", i)
		mkAgent(t, ns, name, "st")
		a := getAgent(t, ns, name)
		a.Status.Phase = agentsv1alpha1.PhaseSucceeded
		if err := env.Client.Status().Update(context.Background(), a); err != nil {
			t.Fatal(err)
		}
	}
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	lists := &listKinds{}
	ctl := New(interceptor.NewClient(base, lists.funcs()), env.Kube, metrics.New(), Options{Namespace: ns, Log: quiet, PageSize: 2})
	cached := func() map[string]string {
		out := map[string]string{}
		for _, obj := range ctl.agents.GetIndexer().List() {
			a := obj.(*agentsv1alpha1.Agent)
			out[a.Name] = a.ResourceVersion
		}
		return out
	}
	steps := []struct {
		name          string
		change        func()
		wantFull      bool
		wantCached    []string
		wantRefreshed string
		wantMetaPages int
		wantPasses    []string
	}{
		{name: "an empty cache is behind: the Agents are read whole", wantFull: true, wantCached: []string{"a0", "a1", "a2"}, wantMetaPages: 1,
			wantPasses: []string{"a0", "a1", "a2"}},
		{name: "a current cache needs the metadata only", wantCached: []string{"a0", "a1", "a2"}, wantMetaPages: 2},
		{name: "an Agent changed since it was cached makes the cache behind", change: func() {
			a := getAgent(t, ns, "a1")
			a.Status.Phase = agentsv1alpha1.PhaseFailed
			if err := env.Client.Status().Update(context.Background(), a); err != nil {
				t.Fatal(err)
			}
		}, wantFull: true, wantCached: []string{"a0", "a1", "a2"}, wantRefreshed: "a1", wantMetaPages: 1, wantPasses: []string{"a1"}},
		{name: "an Agent deleted since is evicted from the metadata alone", change: func() {
			if err := env.Client.Delete(context.Background(), getAgent(t, ns, "a2")); err != nil {
				t.Fatal(err)
			}
		}, wantCached: []string{"a0", "a1"}, wantMetaPages: 1},
	}
	for _, st := range steps {
		if st.change != nil {
			st.change()
		}
		before := cached()
		if err := ctl.poll(context.Background()); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		meta, full := lists.take()
		if (full > 0) != st.wantFull {
			t.Errorf("%s: %d LISTs of whole Agents, want them: %v", st.name, full, st.wantFull)
		}
		if meta < st.wantMetaPages {
			t.Errorf("%s: %d metadata LIST pages, want at least %d", st.name, meta, st.wantMetaPages)
		}
		after := cached()
		if len(after) != len(st.wantCached) {
			t.Errorf("%s: cached %v, want %v", st.name, after, st.wantCached)
		}
		for _, n := range st.wantCached {
			if _, ok := after[n]; !ok {
				t.Errorf("%s: %s not cached (cached %v)", st.name, n, after)
			}
		}
		if n := st.wantRefreshed; n != "" && after[n] == before[n] {
			t.Errorf("%s: %s still cached at version %s", st.name, n, after[n])
		}
		if n := st.wantRefreshed; n != "" && getAgent(t, ns, n).ResourceVersion != after[n] {
			t.Errorf("%s: %s cached at %s, stored at %s", st.name, n, after[n], getAgent(t, ns, n).ResourceVersion)
		}
		var passes []string
		for ctl.queue.Len() > 0 {
			key, _ := ctl.queue.Get()
			ctl.queue.Done(key)
			passes = append(passes, strings.TrimPrefix(key, ns+"/"))
		}
		slices.Sort(passes)
		if !slices.Equal(passes, st.wantPasses) {
			t.Errorf("%s: the poll queued passes over %v, want %v", st.name, passes, st.wantPasses)
		}
	}
}

// TestAnUndecodableAgentKnownAtItsVersionKeepsTheCacheCurrent: an Agent
// the cache cannot hold does not make every poll read all Agents whole:
// once recorded undecodable at a version, a metadata LIST showing it at
// that version finds the cache current, and the LIST keeps it recorded.
func TestAnUndecodableAgentKnownAtItsVersionKeepsTheCacheCurrent(t *testing.T) {
	b := newUndecodables("Agent", quiet, metrics.New().Undecodable.WithLabelValues("Agent"))
	b.failed(&undecodableError{Kind: "Agent", Namespace: "ns", Name: "bad", Field: "spec.x", Err: errors.New("bad value")}, "10", "12")
	cases := []struct {
		name, key, rv string
		known         bool
	}{
		{"the version recorded is known", "ns/bad", "10", true},
		{"an older version is known too", "ns/bad", "9", true},
		{"a newer version may decode: the cache is behind", "ns/bad", "11", false},
		{"another object is not known", "ns/other", "10", false},
	}
	for _, tc := range cases {
		if got := b.known(tc.key, tc.rv, "20"); got != tc.known {
			t.Errorf("%s: known = %v, want %v", tc.name, got, tc.known)
		}
	}
	b.listed("20")
	if !b.known("ns/bad", "10", "30") {
		t.Error("a LIST at 20 that showed the object forgot it")
	}
	b.listed("31")
	if b.known("ns/bad", "10", "40") {
		t.Error("a LIST at 31 that did not show the object kept it")
	}
}
