package tracker

import (
	"context"
	"time"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"

	"github.com/agentplane/agentplane/services/batch-poller/internal/metrics"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

// instrumented counts and times every call of an adapter, so the counts
// cover polls, Gets, cancels and deletes alike.
type instrumented struct {
	a    vendor.Adapter
	m    *metrics.Metrics
	name string
}

// The label values of the calls and ends instrument counts: a known few
// per provider.
var (
	callOps      = []string{"submit", "poll", "cancel", "delete"}
	callOutcomes = []string{"ok", "error"}
	endStates    = []string{"succeeded", "failed"}
)

// instrument wraps a and starts its provider's series at zero, so that a
// ratio such as errors over calls has a series before the first error.
func instrument(a vendor.Adapter, m *metrics.Metrics) vendor.Adapter {
	name := vendor.ProviderName(a.Provider())
	for _, op := range callOps {
		for _, outcome := range callOutcomes {
			m.VendorCalls.WithLabelValues(name, op, outcome)
		}
	}
	for _, state := range endStates {
		m.Finished.WithLabelValues(name, state)
	}
	return &instrumented{a: a, m: m, name: name}
}

func (i *instrumented) observe(op string, start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	i.m.VendorCalls.WithLabelValues(i.name, op, outcome).Inc()
	i.m.VendorSeconds.WithLabelValues(i.name, op).Observe(time.Since(start).Seconds())
}

func (i *instrumented) Provider() batchv1.Provider { return i.a.Provider() }

func (i *instrumented) Submit(ctx context.Context, key string, req vendor.Request) (id string, err error) {
	start := time.Now()
	defer func() { i.observe("submit", start, err) }()
	return i.a.Submit(ctx, key, req)
}

func (i *instrumented) Poll(ctx context.Context, key string, ref vendor.Ref) (o vendor.Outcome, err error) {
	start := time.Now()
	defer func() { i.observe("poll", start, err) }()
	return i.a.Poll(ctx, key, ref)
}

func (i *instrumented) Cancel(ctx context.Context, key string, ref vendor.Ref) (o vendor.Outcome, err error) {
	start := time.Now()
	defer func() { i.observe("cancel", start, err) }()
	return i.a.Cancel(ctx, key, ref)
}

func (i *instrumented) Delete(ctx context.Context, key string, id string) (err error) {
	start := time.Now()
	defer func() { i.observe("delete", start, err) }()
	return i.a.Delete(ctx, key, id)
}
