package tracker

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/testenv"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tools/fakevendor"
	"github.com/agentplane/agentplane/tools/fakevendor/fakevendortest"

	"github.com/agentplane/agentplane/services/batch-poller/internal/keys"
	"github.com/agentplane/agentplane/services/batch-poller/internal/metrics"
)

// The benchmark runs only under `make bench` (AGENTPLANE_BENCH=1); it
// reports figures and asserts none of them.
func benchEnv(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v > 0 {
		return v
	}
	return def
}

func report(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.BenchReport(t, fmt.Sprintf(format, args...))
}

func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

func rssMiB() float64 {
	raw, _ := os.ReadFile("/proc/self/status")
	for l := range strings.SplitSeq(string(raw), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

// TestBenchPollCadenceAndNoticeLatency tracks N in-flight Anthropic batches
// at fakevendor (in process, over HTTP) and reports vendor status reads
// per batch per poll period, time from vendor completion to notice, and
// memory.
func TestBenchPollCadenceAndNoticeLatency(t *testing.T) {
	if os.Getenv(testenv.BenchEnv) == "" {
		t.Skip("benchmark: run with `make bench` (AGENTPLANE_BENCH=1)")
	}
	n := int(benchEnv("AGENTPLANE_BENCH_N", 10000))
	p := time.Duration(benchEnv("AGENTPLANE_BENCH_POLL_SECONDS", 2) * float64(time.Second))
	// Every batch finishes this long after its creation: long enough to
	// measure the cadence of N batches in flight first.
	delay := time.Duration(benchEnv("AGENTPLANE_BENCH_DELAY_SECONDS", 60) * float64(time.Second))
	// The tracker's own table, without fakevendor: entries tracked and
	// never polled.
	solo := New(adapters("http://127.0.0.1:1"), staticKeys(testKey), Options{Period: time.Hour, Metrics: metrics.New()})
	h0 := heapMiB()
	for i := range n {
		if _, err := solo.track(Ref{Run: runFor(fmt.Sprintf("m-%d", i)), Provider: batchv1.Provider_PROVIDER_ANTHROPIC,
			BatchID: fmt.Sprintf("msgbatch_%024d", i), Model: "claude-opus-5-5"}, true); err != nil {
			t.Fatal(err)
		}
	}
	h1 := heapMiB()
	report(t, "batch-poller: tracker table alone: %.1f MiB for %d batches (%.0f bytes per batch)", h1-h0, n, (h1-h0)*(1<<20)/float64(n))
	runtime.KeepAlive(solo)

	fv, base := fakevendortest.Start(t, fakevendor.Options{Delay: delay})
	ns := eventstest.Start(t)
	nc := ns.Connect()

	var mu sync.Mutex
	ready := map[string]time.Time{} // batch id → when the vendor finished it
	var lat []time.Duration
	var notices atomic.Int64
	sub, err := events.SubscribeBatchNotices(ns.Connect(), "", "", func(ev *eventsv1.RunEvent) {
		now := time.Now()
		notices.Add(1)
		mu.Lock()
		if at, ok := ready[ev.GetBatch().GetBatchId()]; ok {
			lat = append(lat, now.Sub(at))
		}
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	heap0 := heapMiB()
	m := metrics.New()
	tr := New(adapters(base), staticKeys(testKey), Options{Period: p, Concurrency: 64, DefaultKeyName: keys.DefaultKeyName,
		Metrics: m, Publish: func(ev *eventsv1.RunEvent) error { return events.PublishBatchNotice(nc, ev) }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tr.Run(ctx)

	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				at := time.Now()
				id, _, err := tr.Submit(context.Background(), Submission{Run: runFor(fmt.Sprintf("b-%d", i)),
					Model: "claude-opus-5-5", Prompt: "bench", MaxTokens: 16})
				if err != nil {
					t.Errorf("submit: %v", err)
					return
				}
				mu.Lock()
				ready[id] = at.Add(delay)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	submitted := time.Since(start)
	report(t, "batch-poller: submitted %d Anthropic batches in %.1fs (%.0f/s)", n, submitted.Seconds(), float64(n)/submitted.Seconds())
	heap1, rss1 := heapMiB(), rssMiB()

	// Cadence: count status reads over whole periods while all are in flight.
	const route = "GET /v1/messages/batches/{id}"
	time.Sleep(p)
	c0, w0 := fv.Calls(route), time.Now()
	periods := 3
	if lim := int((delay - time.Since(start) - p) / p); lim < periods {
		periods = max(lim, 1)
	}
	time.Sleep(time.Duration(periods) * p)
	c1, w1 := fv.Calls(route), time.Now()
	perBatchPerPeriod := float64(c1-c0) / float64(n) / (w1.Sub(w0).Seconds() / p.Seconds())
	report(t, "batch-poller: %d in-flight batches, poll period %v: %.3f vendor status reads per batch per period (%d reads over %.1fs)",
		n, p, perBatchPerPeriod, c1-c0, w1.Sub(w0).Seconds())

	// Latency: wait for every notice.
	deadline := time.Now().Add(delay + 10*p + time.Minute)
	for notices.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * p) // a repeated notice would show up by now
	mu.Lock()
	p50, p99, worst := pct(lat, 0.50), pct(lat, 0.99), pct(lat, 1)
	got := len(lat)
	mu.Unlock()
	report(t, "batch-poller: vendor completion → notice published: p50 %v, p99 %v, max %v over %d batches (%d notices for %d batches; poll period %v)",
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond), got, notices.Load(), n, p)
	report(t, "batch-poller: heap %.1f MiB → %.1f MiB with %d batches tracked (tracker + in-process fakevendor + SDKs); process RSS %.0f MiB",
		heap0, heap1, n, rss1)
	cancel()

}
