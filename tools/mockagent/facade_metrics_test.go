package main

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sample is one scraped series: its labels and value.
type sample struct {
	labels map[string]string
	value  float64
}

// scrape reads the facade's health port /metrics and returns the series
// of the metric name (nil when it has none).
func scrape(t *testing.T, f *facade, name string) []sample {
	t.Helper()
	srv := httptest.NewServer(f.healthMux())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	var out []sample
	for _, m := range fams[name].GetMetric() {
		s := sample{labels: map[string]string{}, value: m.GetGauge().GetValue() + m.GetCounter().GetValue()}
		for _, l := range m.GetLabel() {
			s.labels[l.GetName()] = l.GetValue()
		}
		out = append(out, s)
	}
	return out
}

// metricValue is the value of the metric's one series.
func metricValue(t *testing.T, f *facade, name string) float64 {
	t.Helper()
	s := scrape(t, f, name)
	if len(s) != 1 {
		t.Fatalf("%s has %d series, want 1", name, len(s))
	}
	return s[0].value
}

// TestMetricsCarryTheKEDAQueryLabels: the facade's metrics are labelled
// exactly namespace and agent, with its OMNIA_NAMESPACE and
// OMNIA_AGENT_NAME, which is what the KEDA default trigger's query
// filters on: sum(omnia_agent_connections_active{namespace="<ns>",
// agent="<agent>"}) (services/omnia-controllers internal/agentruntime
// keda.go ConnectionsMetric; tools do not import services, so the two
// are checked side by side).
func TestMetricsCarryTheKEDAQueryLabels(t *testing.T) {
	f := testFacade("127.0.0.1:1", nil)
	for _, c := range []struct{ rule, name string }{
		{"the connections gauge is the trigger's metric, labelled namespace and agent", "omnia_agent_connections_active"},
		{"the invocations counter is labelled namespace and agent", "omnia_agent_invocations_total"},
	} {
		t.Run(c.rule, func(t *testing.T) {
			s := scrape(t, f, c.name)
			if len(s) != 1 {
				t.Fatalf("%s has %d series, want 1", c.name, len(s))
			}
			names := make([]string, 0, len(s[0].labels))
			for k := range s[0].labels {
				names = append(names, k)
			}
			slices.Sort(names)
			if !slices.Equal(names, []string{"agent", "namespace"}) {
				t.Errorf("labels %v, want exactly [agent namespace]", names)
			}
			if s[0].labels["agent"] != "agent" || s[0].labels["namespace"] != "ns" {
				t.Errorf("labels %v, want agent=agent namespace=ns", s[0].labels)
			}
		})
	}
}

// TestConnectionsGaugeFollowsSessions: the gauge is the number of
// sessions open now, up on each open and down on each close.
func TestConnectionsGaugeFollowsSessions(t *testing.T) {
	f := testFacade("127.0.0.1:1", nil)
	srv := httptest.NewServer(f.sessionMux())
	// Cleanups run last first: the sessions end before the server closes.
	t.Cleanup(srv.Close)
	var ends []context.CancelFunc
	open := func() {
		ctx, end := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/session", nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// The body stays open: closing it would end the session.
		t.Cleanup(func() { end(); _ = resp.Body.Close() })
		// The first line comes once the session is counted; ending the
		// request's context then closes the session.
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}
	closeOne := func() { ends[0](); ends = ends[1:] }
	steps := []struct {
		rule string
		do   func()
		want float64
	}{
		{"no session: 0", func() {}, 0},
		{"a session opens: 1", open, 1},
		{"a second opens: 2", open, 2},
		{"one closes: 1", closeOne, 1},
		{"the last closes: 0", closeOne, 0},
	}
	for _, s := range steps {
		s.do()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := metricValue(t, f, connectionsMetric)
			if got == s.want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s = %v", s.rule, connectionsMetric, got)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
