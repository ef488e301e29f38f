package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metalist"
	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// listKinds counts the LISTs of whole Agents a client makes (the poll's
// metadata LISTs go through a REST client of their own, and count their
// pages in listWatch.versionPages).
type listKinds struct {
	mu   sync.Mutex
	full int
}

func (l *listKinds) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if ul, ok := list.(*unstructured.UnstructuredList); ok && ul.GetKind() == "AgentList" {
				l.mu.Lock()
				l.full++
				l.mu.Unlock()
			}
			return c.List(ctx, list, opts...)
		},
	}
}

func (l *listKinds) take() (full int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	full, l.full = l.full, 0
	return full
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
		full, meta := lists.take(), int(ctl.lw.versionPages.Swap(0))
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

// TestTheMetadataListReadsEachRunJobsVersion: the poll's metadata LIST
// reads, page by page, the identity and resourceVersion of every run Job
// of its namespace, and of no other Job; a collection the API server does
// not serve is an error, not an empty list.
func TestTheMetadataListReadsEachRunJobsVersion(t *testing.T) {
	ns, ctl := idleController(t)
	ctl.jobLW.pageSize = 3
	want := map[string]string{}
	for i := range 5 {
		j := runJob(ns, corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent"}}})
		j.Name = fmt.Sprintf("agent-job-%d", i)
		if i == 4 {
			j.Labels = nil // not a run Job
		}
		if err := env.Client.Create(context.Background(), j); err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			want[ns+"/"+j.Name] = j.ResourceVersion
		}
	}
	got := map[string]string{}
	listRV, err := ctl.jobLW.listVersions(context.Background(), func(m *metalist.Item, _ string) {
		got[m.Namespace+"/"+m.Name] = m.ResourceVersion
	})
	if err != nil {
		t.Fatal(err)
	}
	// The Job controller may have written a Job's status since: a version
	// listed is that of the creation or newer, and not newer than the LIST.
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Errorf("listed %v, want the run Jobs %v", got, want)
	}
	if pages := ctl.jobLW.versionPages.Load(); pages != 2 {
		t.Errorf("%d pages of 3 for 4 Jobs, want 2", pages)
	}
	for key, rv := range got {
		if rvNewer(want[key], rv) || rvNewer(rv, listRV) {
			t.Errorf("%s listed at %s: created at %s, listed at %s", key, rv, want[key], listRV)
		}
	}
	ctl.jobLW.resource = "nosuchjobs"
	if _, err := ctl.jobLW.listVersions(context.Background(), func(*metalist.Item, string) {}); !apierrors.IsNotFound(err) {
		t.Errorf("listing a collection the API server does not serve: err %v, want NotFound", err)
	}
}
