package scheduledfunction

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

const secretAnswer = "the-answer-body-must-not-be-recorded"

// TestHTTPInvoker: a run POSTs spec.input as JSON with the function's name
// and scheduled time in headers; the outcome carries the status code or
// the failure's reason, never the answer's body.
func TestHTTPInvoker(t *testing.T) {
	// The handler of a timed-out call may still run when the test reads
	// what it saw: the lock orders the two.
	var mu sync.Mutex
	var gotBody, gotFn, gotAt string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotBody, gotFn, gotAt = string(b), r.Header.Get(HeaderFunction), r.Header.Get(HeaderScheduleTime)
		mu.Unlock()
		switch r.URL.Path {
		case "/ok" + InvokePath:
			_, _ = io.WriteString(w, secretAnswer)
		case "/slow" + InvokePath:
			time.Sleep(1500 * time.Millisecond)
		default:
			http.Error(w, secretAnswer, http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	f := fn(func(f *omniav1.ScheduledFunction) {
		f.Spec.Input = &apiextensionsv1.JSON{Raw: []byte(`{"report":"daily"}`)}
		f.Spec.TimeoutSeconds = 1
	})
	cases := []struct {
		name, path string
		outcome    omniav1.RunOutcome
		status     int32
		reason     string
	}{
		{"a 2xx answer is Succeeded with its status", "/ok", omniav1.RunSucceeded, 200, ""},
		{"another status is Failed, reason HTTPStatus", "/fail", omniav1.RunFailed, 500, "HTTPStatus"},
		{"no answer within timeoutSeconds is Failed, reason Timeout", "/slow", omniav1.RunFailed, 0, "Timeout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inv := &HTTPInvoker{URL: func(*omniav1.AgentRuntime) string { return srv.URL + c.path + InvokePath }}
			out := inv.Invoke(context.Background(), Call{Function: f, Agent: function(), ScheduleTime: at("10:05:00")})
			if out.Outcome != c.outcome || out.HTTPStatus != c.status || out.Reason != c.reason || out.FinishTime == nil {
				t.Fatalf("outcome %+v", out)
			}
			if strings.Contains(out.Message, secretAnswer) {
				t.Fatalf("the answer's body was recorded: %q", out.Message)
			}
			mu.Lock()
			body, fnName, schedAt := gotBody, gotFn, gotAt
			mu.Unlock()
			if body != `{"report":"daily"}` || fnName != "ns/report" || schedAt != "2026-01-01T10:05:00Z" {
				t.Fatalf("request body %q headers %q %q", body, fnName, schedAt)
			}
		})
	}
	t.Run("an unreachable agent is Failed, reason RequestFailed", func(t *testing.T) {
		inv := &HTTPInvoker{URL: func(*omniav1.AgentRuntime) string { return "http://127.0.0.1:1" + InvokePath }}
		if out := inv.Invoke(context.Background(), Call{Function: f, Agent: function(), ScheduleTime: at("10:05:00")}); out.Reason != "RequestFailed" {
			t.Fatalf("outcome %+v", out)
		}
	})
}

// TestServiceURL: a run goes to the agent's Service on its rest facade's
// port (the default facade port without one), never another facade's.
func TestServiceURL(t *testing.T) {
	a := function()
	if got := ServiceURL(a); got != "http://fn.ns.svc:8080/invoke" {
		t.Errorf("default port: %s", got)
	}
	p, mcp := int32(9000), int32(9100)
	a.Spec.Facades = []omniav1.FacadeConfig{{Type: omniav1.FacadeTypeREST, Port: &p}, {Type: omniav1.FacadeTypeMCP, Port: &mcp}}
	if got := ServiceURL(a); got != "http://fn.ns.svc:9000/invoke" {
		t.Errorf("rest port: %s", got)
	}
}
