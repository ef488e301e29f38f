package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestProbeCache: a verdict is reused for the same Secret version within
// the TTL; a new version (rotation) or an expired entry probes again, a
// rotation replaces the Provider's entry rather than adding one, and
// inconclusive answers are never cached.
func TestProbeCache(t *testing.T) {
	var calls atomic.Int32
	status := atomic.Int32{}
	status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer sk" {
			t.Errorf("auth header %q", r.Header.Get("Authorization"))
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	spec := &omniav1.ProviderSpec{Type: omniav1.ProviderTypeOpenAI, BaseURL: srv.URL}
	var pc probeCache
	now := time.Now()
	ctx := context.Background()
	if r := pc.ProbeCredential(ctx, srv.Client(), spec, "sk", "ns/p", "s@1", now); r.Verdict != ProbeAccepted || r.Cached {
		t.Fatalf("first probe %+v", r)
	}
	if r := pc.ProbeCredential(ctx, srv.Client(), spec, "sk", "ns/p", "s@1", now.Add(time.Minute)); !r.Cached || calls.Load() != 1 {
		t.Fatalf("second probe %+v after %d calls", r, calls.Load())
	}
	if r := pc.ProbeCredential(ctx, srv.Client(), spec, "sk", "ns/p", "s@2", now); r.Cached || calls.Load() != 2 {
		t.Fatalf("rotated Secret %+v", r)
	}
	if n := pc.Len(); n != 1 {
		t.Fatalf("%d entries after a rotation, want the Provider's one", n)
	}
	if r := pc.ProbeCredential(ctx, srv.Client(), spec, "sk", "ns/p", "s@2", now.Add(probeCacheTTL+time.Second)); r.Cached {
		t.Fatalf("expired entry reused %+v", r)
	}
	status.Store(http.StatusServiceUnavailable)
	for i := 0; i < 2; i++ {
		if r := pc.ProbeCredential(ctx, srv.Client(), spec, "sk", "ns/p", "s@3", now); r.Verdict != ProbeError || r.Cached {
			t.Fatalf("inconclusive %+v", r)
		}
	}
	if r := pc.ProbeCredential(ctx, srv.Client(), &omniav1.ProviderSpec{Type: omniav1.ProviderTypeOllama}, "sk", "ns/x", "s@1", now); r.Verdict != ProbeUnsupported {
		t.Fatalf("ollama %+v", r)
	}
}

// TestProbeCacheBounded: the cache holds at most its size, dropping the
// least recently probed Provider, and Forget drops a deleted Provider's
// verdict, so neither key rotations nor Provider churn grow it.
func TestProbeCacheBounded(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer srv.Close()
	spec := &omniav1.ProviderSpec{Type: omniav1.ProviderTypeOpenAI, BaseURL: srv.URL}
	pc := probeCache{size: 2}
	now := time.Now()
	ctx := context.Background()
	probe := func(provider string) ProbeResult {
		return pc.ProbeCredential(ctx, srv.Client(), spec, "sk", provider, "s@1", now)
	}
	probe("ns/a")
	probe("ns/b")
	probe("ns/a") // a is now the most recently used
	probe("ns/c") // evicts b
	if n := pc.Len(); n != 2 {
		t.Fatalf("%d entries, want the bound 2", n)
	}
	before := calls.Load()
	if r := probe("ns/a"); !r.Cached {
		t.Fatalf("the recently used verdict was evicted: %+v", r)
	}
	if r := probe("ns/b"); r.Cached || calls.Load() != before+1 {
		t.Fatalf("the least recently used verdict was kept: %+v", r)
	}
	pc.Forget("ns/b")
	if n := pc.Len(); n != 1 {
		t.Fatalf("%d entries after forgetting one of two, want 1", n)
	}
	if r := probe("ns/b"); r.Cached {
		t.Fatalf("a forgotten verdict was reused: %+v", r)
	}
}
