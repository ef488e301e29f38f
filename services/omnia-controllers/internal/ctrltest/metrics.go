package ctrltest

import (
	"errors"
	"fmt"
	"maps"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrNoSeries is Metric's error when c has no series of the labels asked.
var ErrNoSeries = errors.New("no such series")

// Metric reads the value of the one series of c (a gauge or a counter
// vector) whose labels are exactly labels, or ErrNoSeries. Unlike
// WithLabelValues it never creates the series, so it can tell a deleted
// series from one at zero.
func Metric(c prometheus.Collector, labels prometheus.Labels) (float64, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return 0, err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got := prometheus.Labels{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if !maps.Equal(got, labels) {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), nil
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), nil
			}
			return 0, fmt.Errorf("%s%v is neither a gauge nor a counter", mf.GetName(), labels)
		}
	}
	return 0, fmt.Errorf("%v: %w", labels, ErrNoSeries)
}

// MetricIs is a condition for Eventually: c's series of labels has the
// value want.
func MetricIs(c prometheus.Collector, labels prometheus.Labels, want float64) func() error {
	return func() error {
		got, err := Metric(c, labels)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%v = %v, want %v", labels, got, want)
		}
		return nil
	}
}

// MetricGone is a condition for Eventually: c has no series of labels.
func MetricGone(c prometheus.Collector, labels prometheus.Labels) func() error {
	return func() error {
		v, err := Metric(c, labels)
		switch {
		case errors.Is(err, ErrNoSeries):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("%v still there, at %v", labels, v)
	}
}
