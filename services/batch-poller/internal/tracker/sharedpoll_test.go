package tracker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"

	"github.com/agentplane/agentplane/services/batch-poller/internal/keys"
	"github.com/agentplane/agentplane/services/batch-poller/internal/vendor"
)

// heldVendor is a vendor whose status reads wait until released, so many
// callers can ask while one read is under way. Only Poll is served.
type heldVendor struct {
	vendor.Adapter
	polls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (v *heldVendor) Provider() batchv1.Provider { return batchv1.Provider_PROVIDER_ANTHROPIC }

func (v *heldVendor) Poll(ctx context.Context, _ string, _ vendor.Ref) (vendor.Outcome, error) {
	if v.polls.Add(1) == 1 {
		close(v.entered)
	}
	select {
	case <-v.release:
		return vendor.Outcome{State: batchv1.State_STATE_PENDING, VendorStatus: "in_progress"}, nil
	case <-ctx.Done():
		return vendor.Outcome{}, ctx.Err()
	}
}

func TestConcurrentGetsOfABatchShareOneVendorRead(t *testing.T) {
	v := &heldVendor{entered: make(chan struct{}), release: make(chan struct{})}
	// Run is not started, so every read is one a Get asked for.
	tr := New([]vendor.Adapter{v}, staticKeys(testKey), Options{Period: time.Hour, DefaultKeyName: keys.DefaultKeyName})
	ref := Ref{Run: runFor("uid-shared"), Provider: v.Provider(), BatchID: "msgbatch_shared"}

	const callers = 16
	errs := make(chan error, callers)
	get := func() {
		s, err := tr.Get(context.Background(), ref)
		if err == nil && s.VendorStatus != "in_progress" {
			err = fmt.Errorf("got %+v, want the shared read's answer", s)
		}
		errs <- err
	}
	go get()
	<-v.entered
	for range callers - 1 {
		go get()
	}
	// A caller that gives up stops waiting without ending the read.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := tr.Get(ctx, ref); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get with an expired context = %v, want its deadline", err)
	}
	if n := v.polls.Load(); n != 1 {
		t.Fatalf("%d vendor reads under way, want 1", n)
	}
	close(v.release)
	for range callers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := v.polls.Load(); n != 1 {
		t.Errorf("%d vendor reads for %d concurrent Gets, want 1", n, callers)
	}
}
