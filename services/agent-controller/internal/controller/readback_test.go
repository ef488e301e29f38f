package controller

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// failingPodLists answers the first n pod LISTs with 503, as an API server
// under pressure does, and passes everything else to the real server.
type failingPodLists struct {
	next http.RoundTripper
	left atomic.Int32
	hits atomic.Int32
}

func (f *failingPodLists) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") && f.left.Add(-1) >= 0 {
		f.hits.Add(1)
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
			Header: http.Header{"Content-Type": []string{"text/plain"}}, Body: io.NopCloser(strings.NewReader("overloaded")), Request: req}, nil
	}
	return f.next.RoundTrip(req)
}

// TestAPodListErrorIsRetriedNotTakenForAGarbageCollectedPod: when listing
// a finished Job's pod fails, the controller retries instead of recording
// the run's output as lost with its pod.
func TestAPodListErrorIsRetriedNotTakenForAGarbageCollectedPod(t *testing.T) {
	ns := env.Namespace(t)
	faults := &failingPodLists{}
	startWith(t, ns, startOptions{wrap: func(rt http.RoundTripper) http.RoundTripper { faults.next = rt; return faults }})

	mkStation(t, ns, "st", nil)
	mkAgent(t, ns, "flaky", "st")
	waitPhase(t, ns, "flaky", agentsv1alpha1.PhaseRunning)
	faults.left.Store(3)
	finishPod(t, ns, "agent-job-flaky", 0)
	a := waitPhase(t, ns, "flaky", agentsv1alpha1.PhaseSucceeded)
	if faults.hits.Load() == 0 {
		t.Fatal("no pod LIST failed; the test injected nothing")
	}
	// The test's API server has no kubelet, so the log itself cannot be
	// read; what matters is that the pod was found.
	if a.Status.FailureReason == decision.ReasonPodGarbageCollected {
		t.Fatalf("a failed pod LIST was recorded as a garbage-collected pod: %+v", a.Status)
	}
}
