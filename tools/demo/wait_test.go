package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// fakeClock advances only when the wait sleeps.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.now = c.now.Add(d)
	return nil
}

// TestAWaitSaysWhatItWaitsFor checks the rules of the demo's waits. The
// condition holds after doneAfter of fake time; each poll costs pollCost
// (a slow probe) on top of the poll interval.
func TestAWaitSaysWhatItWaitsFor(t *testing.T) {
	cases := []struct {
		rule      string
		doneAfter time.Duration
		pollCost  time.Duration
		timeout   time.Duration
		want      []string
		wantErr   error
	}{
		{"says what it waits for before the first poll", 0, 0, time.Minute,
			[]string{"  waiting for NATS (up to 1m0s)"}, nil},
		{"quiet about progress when done within the interval", 9 * time.Second, 0, time.Minute,
			[]string{"  waiting for NATS (up to 1m0s)"}, nil},
		{"a long wait says where things stand at least every interval", 35 * time.Second, 0, time.Minute,
			[]string{"  waiting for NATS (up to 1m0s)",
				"  still waiting for NATS (connection refused at 10s, 10s)",
				"  still waiting for NATS (connection refused at 20s, 20s)",
				"  still waiting for NATS (connection refused at 30s, 30s)"}, nil},
		{"a slow probe does not stretch the gap between reports past one probe", 25 * time.Second, 2 * time.Second, time.Minute,
			[]string{"  waiting for NATS (up to 1m0s)",
				"  still waiting for NATS (connection refused at 11s, 11s)",
				"  still waiting for NATS (connection refused at 23s, 23s)"}, nil},
		{"a timeout names what was awaited and the last status", time.Hour, 0, 15 * time.Second,
			[]string{"  waiting for NATS (up to 15s)",
				"  still waiting for NATS (connection refused at 10s, 10s)"}, errTimedOut},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			var out bytes.Buffer
			clk := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			start := clk.now
			w := waiter{out: &out, clock: clk, poll: time.Second, interval: 10 * time.Second}
			err := w.wait(context.Background(), "NATS", c.timeout, func(context.Context) error {
				clk.now = clk.now.Add(c.pollCost)
				if elapsed := clk.now.Sub(start); elapsed < c.doneAfter {
					return fmt.Errorf("connection refused at %s", elapsed)
				}
				return nil
			})
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("error %v, want %v", err, c.wantErr)
			}
			if err != nil && (!strings.Contains(err.Error(), "NATS") || !strings.Contains(err.Error(), "connection refused")) {
				t.Errorf("the timeout does not say what it waited for and why: %v", err)
			}
			got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("lines:\n%q\nwant:\n%q", got, c.want)
			}
		})
	}
}

func TestAFatalCheckErrorEndsTheWaitAtOnce(t *testing.T) {
	clk := &fakeClock{now: time.Now()}
	w := waiter{out: &bytes.Buffer{}, clock: clk, poll: time.Second, interval: 10 * time.Second}
	boom := errors.New("forbidden")
	polls := 0
	err := w.wait(context.Background(), "the runs", time.Minute, func(context.Context) error {
		polls++
		return fatal(boom)
	})
	if !errors.Is(err, boom) || polls != 1 {
		t.Fatalf("error %v after %d polls, want %v after 1", err, polls, boom)
	}
}

// TestTheRunsStatusNamesWhatIsAwaited: the progress line of the runs'
// wait counts the finished ones and names each other with its phase and
// how long it has been in it.
func TestTheRunsStatusNamesWhatIsAwaited(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	agent := func(name string, phase agentsv1alpha1.AgentPhase, created, started time.Duration) agentsv1alpha1.Agent {
		a := agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-created))}}
		a.Status.Phase = phase
		if started > 0 {
			st := metav1.NewTime(now.Add(-started))
			a.Status.StartedAt = &st
		}
		return a
	}
	cases := []struct {
		rule     string
		agents   []agentsv1alpha1.Agent
		want     int
		done     bool
		contains []string
	}{
		{"a Running run shows how long it has run", []agentsv1alpha1.Agent{agent("fix-issue-42", agentsv1alpha1.PhaseRunning, 40*time.Second, 12*time.Second)},
			1, false, []string{"0/1 finished", "fix-issue-42 Running 12s"}},
		{"a run without a phase yet is Pending since its creation", []agentsv1alpha1.Agent{agent("triage-102", "", 40*time.Second, 0)},
			1, false, []string{"triage-102 Pending 40s"}},
		{"finished runs are counted, not listed", []agentsv1alpha1.Agent{
			agent("review-pr-7", agentsv1alpha1.PhaseFailed, time.Minute, 30*time.Second),
			agent("triage-101", agentsv1alpha1.PhaseRunning, time.Minute, 5*time.Second)},
			2, false, []string{"1/2 finished; triage-101 Running 5s"}},
		{"done once every run has finished", []agentsv1alpha1.Agent{agent("fix-issue-42", agentsv1alpha1.PhaseSucceeded, time.Minute, 30*time.Second)},
			1, true, []string{"1/1 finished"}},
		{"not done while a run is missing from the list", []agentsv1alpha1.Agent{agent("fix-issue-42", agentsv1alpha1.PhaseSucceeded, time.Minute, 30*time.Second)},
			2, false, []string{"1/2 finished"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			done, status := runsStatus(c.agents, c.want, now)
			if done != c.done {
				t.Errorf("done %v, want %v (%s)", done, c.done, status)
			}
			for _, want := range c.contains {
				if !strings.Contains(status, want) {
					t.Errorf("status %q lacks %q", status, want)
				}
			}
		})
	}
}
