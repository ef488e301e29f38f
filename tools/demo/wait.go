package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

// reportEvery is how often a wait says it still waits: a terminal silent
// for longer looks hung.
const reportEvery = 10 * time.Second

// errTimedOut marks a wait that ran out of time.
var errTimedOut = errors.New("timed out")

// clock is a wait's time source; tests give one that advances on Sleep.
type clock interface {
	Now() time.Time
	// Sleep returns after d, or with ctx's error when ctx ends first.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// waiter polls a condition. It says what it waits for before the first
// poll and, while the wait lasts, where things stand at least every
// interval.
type waiter struct {
	out      io.Writer
	clock    clock
	poll     time.Duration
	interval time.Duration
}

// newWaiter is the demo's waiter: lines to stdout, the real clock.
func newWaiter(poll time.Duration) waiter {
	return waiter{out: os.Stdout, clock: realClock{}, poll: poll, interval: reportEvery}
}

// check is one poll: nil when the condition holds, else where things
// stand ("HTTP 503", "3/6 finished"), which the progress lines show. An
// error made by fatal ends the wait at once.
type check func(ctx context.Context) error

// fatalError is a check's error that no later poll can mend.
type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }
func (e fatalError) Unwrap() error { return e.err }

// fatal marks err as ending the wait it is returned to.
func fatal(err error) error { return fatalError{err} }

// wait polls c until it is done, ctx ends or timeout passes; a timeout
// returns errTimedOut with the last status. what completes "waiting for".
func (w waiter) wait(ctx context.Context, what string, timeout time.Duration, c check) error {
	start := w.clock.Now()
	fmt.Fprintf(w.out, "  waiting for %s (up to %s)\n", what, timeout)
	next := start.Add(w.interval)
	for {
		notYet := c(ctx)
		if notYet == nil {
			return nil
		}
		var f fatalError
		if errors.As(notYet, &f) {
			return f.err
		}
		status := notYet.Error()
		now := w.clock.Now()
		if now.Sub(start) >= timeout {
			return fmt.Errorf("%w after %s waiting for %s (%s)", errTimedOut, timeout, what, status)
		}
		if !now.Before(next) {
			fmt.Fprintf(w.out, "  still waiting for %s (%s, %s)\n", what, status, now.Sub(start).Round(time.Second))
			next = now.Add(w.interval)
		}
		// Never sleep past a due report.
		sleep := w.poll
		if d := next.Sub(now); d < sleep {
			sleep = d
		}
		if err := w.clock.Sleep(ctx, sleep); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
	}
}

// probeClient bounds each probe, so one hung connection cannot hold a
// wait past its progress lines.
var probeClient = &http.Client{Timeout: 2 * time.Second}

// tcpUp is done once addr accepts a connection.
func tcpUp(addr string) check {
	return func(context.Context) error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		_ = c.Close()
		return nil
	}
}

// httpOK is done once url answers 200.
func httpOK(url string) check {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fatal(err)
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	}
}
