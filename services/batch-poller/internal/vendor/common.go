package vendor

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentplane/agentplane/libs/vendors"
)

// cancelWait bounds how long Delete waits for a cancel to end a batch
// before it gives up and lets the caller retry; cancelTick is how often it
// looks meanwhile.
const (
	cancelWait = 10 * time.Second
	cancelTick = 200 * time.Millisecond
)

// waitEnded polls ended until it reports true, the wait runs out or ctx
// ends.
func waitEnded(ctx context.Context, ended func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, cancelWait)
	defer cancel()
	t := time.NewTicker(cancelTick)
	defer t.Stop()
	for {
		done, err := ended()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("batch still cancelling after %s; retry the delete: %w", cancelWait, ctx.Err())
		case <-t.C:
		}
	}
}

// goneIsDone turns "not found" into success: deleting what is already gone
// is not an error.
func goneIsDone(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// withSlash makes a base URL end in "/", which the SDKs join paths onto.
func withSlash(base string) string {
	if strings.HasSuffix(base, "/") {
		return base
	}
	return base + "/"
}

// respFor fills the BatchResponse fields every vendor shares. The session
// id is the batch id: one batch holds exactly one run's request.
func respFor(ref Ref, model, msgID, text, stop string, in, out int64, at time.Time) vendors.BatchResponse {
	return vendors.BatchResponse{
		Model: model, MessageID: msgID, SessionID: ref.ID, Text: text, StopReason: stop,
		InputTokens: in, OutputTokens: out, Time: at,
	}
}

// NewHTTPClient is the HTTP client the adapters share. It keeps up to
// conns idle connections per vendor host: the default of 2 would close
// and reopen a connection for nearly every concurrent poll.
func NewHTTPClient(conns int, timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4 * conns
	tr.MaxIdleConnsPerHost = conns
	return &http.Client{Transport: tr, Timeout: timeout}
}
