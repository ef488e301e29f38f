package stack

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// TestWaitingForAComponentSaysWhatItWaitsFor: Up's waits name the component
// and the condition before they start, and a wait that lasts longer than the
// report interval says it still waits, with the last check's error.
func TestWaitingForAComponentSaysWhatItWaitsFor(t *testing.T) {
	cases := []struct {
		rule      string
		failures  int // checks that fail before one succeeds
		wantLines []string
		noLine    string
	}{
		{"says what it waits for before the first check", 0,
			[]string{"kubestack: waiting for etcd to serve /health (up to 1m0s)"}, ""},
		{"quiet about progress when the component is healthy at once", 0,
			nil, "still waiting"},
		{"a wait longer than the interval says it still waits, with the last error", 3,
			[]string{"kubestack: still waiting for etcd to serve /health: connection refused, "}, ""},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			var log bytes.Buffer
			// The test process stands in for the component: it is alive.
			p := &process{Name: "etcd", PID: os.Getpid(), done: make(chan struct{})}
			calls := 0
			err := waitHealthyReporting(context.Background(), &log, p, "etcd to serve /health", time.Minute, time.Millisecond,
				func(context.Context) error {
					calls++
					if calls <= c.failures {
						return errors.New("connection refused")
					}
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range c.wantLines {
				if !strings.Contains(log.String(), want) {
					t.Errorf("missing %q in:\n%s", want, log.String())
				}
			}
			if c.noLine != "" && strings.Contains(log.String(), c.noLine) {
				t.Errorf("unexpected %q in:\n%s", c.noLine, log.String())
			}
		})
	}
}
