package tracker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	"github.com/agentplane/agentplane/libs/vendors"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/tools/fakevendor"
	"github.com/agentplane/agentplane/tools/fakevendor/fakevendortest"

	"github.com/agentplane/agentplane/services/batch-poller/internal/keys"
	"github.com/agentplane/agentplane/services/batch-poller/internal/metrics"
	"github.com/agentplane/agentplane/services/batch-poller/internal/state"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

const (
	testKey = fakevendortest.Key
	testNS  = "team-a"
)

// provider is one vendor under test: a model that routes to it and the
// name fakevendor.Live files it under.
type provider struct {
	name  string
	model string
	id    batchv1.Provider
}

var providers = []provider{
	{"anthropic", "claude-opus-5-5", batchv1.Provider_PROVIDER_ANTHROPIC},
	{"openai", "gpt-5", batchv1.Provider_PROVIDER_OPENAI},
	{"gemini", "gemini-3-flash", batchv1.Provider_PROVIDER_GEMINI},
}

// harness is a fakevendor, an embedded NATS receiving the notices and a
// running tracker wired to both.
type harness struct {
	fv      *fakevendor.Server
	base    string
	tr      *Tracker
	m       *metrics.Metrics
	period  time.Duration
	stop    context.CancelFunc
	stopped chan struct{}

	// store is the durable table every (re)start shares; nil gives each
	// start a table of its own, as a process without NATS has.
	store state.Store

	mu      sync.Mutex
	notices []*eventsv1.RunEvent
}

func staticKeys(key string) keys.Static {
	return keys.Static{testNS: {"ANTHROPIC_API_KEY": key, "OPENAI_API_KEY": key, "GEMINI_API_KEY": key}}
}

func adapters(base string) []vendor.Adapter {
	hc := vendor.NewHTTPClient(64, 10*time.Second)
	return []vendor.Adapter{vendor.NewAnthropic(base, hc), vendor.NewOpenAI(base+"/v1", hc), vendor.NewGemini(base, hc)}
}

func newHarness(t *testing.T, opts fakevendor.Options, period time.Duration) *harness {
	t.Helper()
	fv, base := fakevendortest.Start(t, opts)
	h := &harness{fv: fv, base: base, period: period}
	ns := eventstest.Start(t)
	nc := ns.Connect()
	sub, err := events.SubscribeBatchNotices(ns.Connect(), "", "", func(ev *eventsv1.RunEvent) {
		h.mu.Lock()
		h.notices = append(h.notices, ev)
		h.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	h.start(t, staticKeys(testKey), func(ev *eventsv1.RunEvent) error { return events.PublishBatchNotice(nc, ev) })
	return h
}

// start (re)starts the tracker, as a fresh process would.
func (h *harness) start(t *testing.T, k Keys, publish func(*eventsv1.RunEvent) error) {
	t.Helper()
	h.m = metrics.New()
	h.tr = New(adapters(h.base), k, Options{Period: h.period, Concurrency: 8, Publish: publish,
		DefaultKeyName: keys.DefaultKeyName, Metrics: h.m, Store: h.store, Identity: "poller-test"})
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.stopped = cancel, make(chan struct{})
	go func() { h.tr.Run(ctx); close(h.stopped) }()
	t.Cleanup(h.halt)
}

func (h *harness) halt() {
	h.stop()
	<-h.stopped
}

func (h *harness) noticeList() []*eventsv1.RunEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*eventsv1.RunEvent(nil), h.notices...)
}

func runFor(uid string) Run { return Run{Namespace: testNS, Agent: "agent-" + uid, UID: uid} }

func (h *harness) submit(t *testing.T, p provider, uid, prompt, schema string) Ref {
	t.Helper()
	run := runFor(uid)
	id, got, err := h.tr.Submit(context.Background(), Submission{Run: run, Model: p.model, Prompt: prompt, MaxTokens: 256, OutputSchema: schema})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if got != p.id || id == "" {
		t.Fatalf("submit gave %q on %v, want a batch on %v", id, got, p.id)
	}
	return Ref{Run: run, Provider: p.id, BatchID: id, Model: p.model}
}

// waitEnd asks Get until the batch ended.
func (h *harness) waitEnd(t *testing.T, ref Ref) Snapshot {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		s, err := h.tr.Get(context.Background(), ref)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if s.State != batchv1.State_STATE_PENDING {
			return s
		}
		time.Sleep(h.period / 4)
	}
	t.Fatalf("batch %s never ended", ref.BatchID)
	return Snapshot{}
}

// readLines parses lines with the model's vendor parser and returns the
// result event.
func readLines(t *testing.T, model string, lines []string) vendors.Event {
	t.Helper()
	p := vendors.Route(model).NewParser()
	var res vendors.Event
	for _, l := range lines {
		evs, err := p.Parse([]byte(l))
		if err != nil {
			t.Fatalf("parse %s: %v", l, err)
		}
		for _, e := range evs {
			if e.Kind == vendors.KindResult {
				res = e
			}
		}
	}
	if res.Kind != vendors.KindResult {
		t.Fatalf("no result line in %v", lines)
	}
	return res
}

// statusCalls is how often fakevendor was asked about this batch.
func (h *harness) statusCalls(ref Ref) int {
	return h.fv.BatchCalls(strings.TrimPrefix(ref.BatchID, "batches/"))
}

func counterValue(t *testing.T, h *harness, provider, op, outcome string) float64 {
	t.Helper()
	return testutil.ToFloat64(h.m.VendorCalls.WithLabelValues(provider, op, outcome))
}
