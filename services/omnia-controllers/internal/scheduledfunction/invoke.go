package scheduledfunction

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/truncate"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentruntime"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// InvokePath is the path of a function-mode agent's rest facade that a
// run POSTs its input to.
const InvokePath = "/invoke"

// Headers a run carries, so the function can tell runs apart (and drop a
// repeat of one it has seen).
const (
	HeaderFunction     = "X-Omnia-Scheduled-Function"
	HeaderScheduleTime = "X-Omnia-Schedule-Time"
)

// Call is one run to make.
type Call struct {
	// Function is the ScheduledFunction the run is for.
	Function *omniav1.ScheduledFunction
	// Agent is the function-mode AgentRuntime to call.
	Agent *omniav1.AgentRuntime
	// ScheduleTime is the scheduled time the run is for.
	ScheduleTime time.Time
}

// Invoker makes one run and says how it ended: outcome, HTTP status or
// failure reason. It never returns the answer's body.
type Invoker interface {
	Invoke(ctx context.Context, c Call) omniav1.RunRecord
}

// HTTPInvoker POSTs spec.input to the agent's Service on its rest facade's
// port, path InvokePath, within spec.timeoutSeconds.
type HTTPInvoker struct {
	// Client makes the request; one that follows no redirect when nil.
	Client *http.Client
	// URL is where a run for agent goes; ServiceURL when nil. Tests point
	// it at a server of their own.
	URL func(agent *omniav1.AgentRuntime) string
	// Now is the clock that stamps finishTime; time.Now when nil.
	Now func() time.Time
}

// ServiceURL is the in-cluster address of a function agent's invoke path:
// its Service (named after it) on the rest facade's port.
func ServiceURL(a *omniav1.AgentRuntime) string {
	port := int32(agentruntime.DefaultFacadePort)
	for _, f := range a.Spec.Facades {
		if f.Type == omniav1.FacadeTypeREST && f.Port != nil {
			port = *f.Port
		}
	}
	return fmt.Sprintf("http://%s.%s.svc:%d%s", a.Name, a.Namespace, port, InvokePath)
}

// DefaultTimeout is spec.timeoutSeconds's default, for an object stored
// without it.
const DefaultTimeout = 30 * time.Second

// maxMessage caps a failure's message (the status field's limit).
const maxMessage = 1024

// Invoke makes the run.
func (h *HTTPInvoker) Invoke(ctx context.Context, c Call) omniav1.RunRecord {
	timeout := DefaultTimeout
	if s := c.Function.Spec.TimeoutSeconds; s > 0 {
		timeout = time.Duration(s) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body := []byte("{}")
	if in := c.Function.Spec.Input; in != nil && len(in.Raw) > 0 {
		body = in.Raw
	}
	url := ServiceURL(c.Agent)
	if h.URL != nil {
		url = h.URL(c.Agent)
	}
	fail := func(reason string, err error) omniav1.RunRecord {
		return h.done(omniav1.RunRecord{Outcome: omniav1.RunFailed, Reason: reason, Message: truncate.String(err.Error(), maxMessage)})
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fail("RequestFailed", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderFunction, c.Function.Namespace+"/"+c.Function.Name)
	req.Header.Set(HeaderScheduleTime, c.ScheduleTime.UTC().Format(time.RFC3339))
	resp, err := h.client().Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fail("Timeout", fmt.Errorf("no answer within %s: %w", timeout, err))
		}
		return fail("RequestFailed", err)
	}
	// The body is read to reuse the connection, never kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	rec := omniav1.RunRecord{Outcome: omniav1.RunSucceeded, HTTPStatus: int32(resp.StatusCode)} //nolint:gosec // an HTTP status fits
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		rec.Outcome, rec.Reason, rec.Message = omniav1.RunFailed, "HTTPStatus", "the function answered "+resp.Status
	}
	return h.done(rec)
}

func (h *HTTPInvoker) done(r omniav1.RunRecord) omniav1.RunRecord {
	now := metav1.NewTime(kubeutil.Clock(h.Now)().Truncate(time.Second))
	r.FinishTime = &now
	return r
}

func (h *HTTPInvoker) client() *http.Client {
	if h.Client != nil {
		return h.Client
	}
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
