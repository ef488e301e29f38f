package servicetest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestLint(t *testing.T) {
	registry := func(cs ...prometheus.Collector) *prometheus.Registry {
		r := prometheus.NewRegistry()
		r.MustRegister(cs...)
		return r
	}
	good := func() prometheus.Collector {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_requests_total", Help: "Requests."})
		c.Inc()
		return c
	}
	// A counter without _total is one of promlint's problems.
	bad := func() prometheus.Collector {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_requests", Help: "Requests."})
		c.Inc()
		return c
	}
	cases := []struct {
		rule     string
		reg      *prometheus.Registry
		exempt   []string
		wantFail bool
	}{
		{"clean metrics pass", registry(good()), nil, false},
		{"a problem fails", registry(good(), bad()), nil, true},
		{"an exempt name's problem passes", registry(good(), bad()), []string{"svc_requests"}, false},
		{"an exemption without a problem fails", registry(good()), []string{"svc_requests_total"}, true},
		{"an exemption without series fails", registry(good()), []string{"svc_gone"}, true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			r := &recorder{TB: t}
			Lint(r, c.reg, c.exempt...)
			if r.failed != c.wantFail {
				t.Errorf("failed = %v (%s), want %v", r.failed, r.msg, c.wantFail)
			}
		})
	}
}
