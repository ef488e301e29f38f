// Package runevents builds the run events the controller sends for a batch
// run, where no supervisor exists to send them: the same lifecycle events
// and parsed CLI events a run pod's supervisor would, stamped so that a
// resend after a crash carries the same dedupe ids.
package runevents

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/vendors"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// Lifecycle phases and statuses the controller reports for batch runs.
const (
	PhaseAgent        = "agent"
	PhaseBatchTimeout = "batch_timeout"
	StatusStarted     = "started"
	StatusSucceeded   = "succeeded"
	StatusFailed      = "failed"
	StatusRunning     = "running"
)

// Sequences are fixed per notice, so the events of one transition always
// get the same sequence numbers and dedupe ids: agent/started is 1, the
// completion's events follow it, and the timeout event is 2.
const (
	seqStarted = 1
	seqTimeout = 2
)

// Identity is the run identity of a's events.
func Identity(a *agentsv1alpha1.Agent) *eventsv1.RunIdentity {
	return &eventsv1.RunIdentity{Namespace: a.Namespace, Agent: a.Name, Uid: string(a.UID),
		Station: a.Spec.StationRef, TaskId: a.Spec.TaskID}
}

// Batch returns the events due for notice n of batch run a, whose status
// is the one just patched; lines are the vendor CLI's event lines of a
// finished batch. model picks the vendor the lines are parsed as.
func Batch(n decision.Notice, a *agentsv1alpha1.Agent, model string, lines []string) []*eventsv1.RunEvent {
	v := vendors.Route(model)
	var out []*eventsv1.RunEvent
	switch n {
	case decision.NoticeStarted:
		r := newRun(a, v, seqStarted-1)
		out = append(out, r.stamp(lifecycle(PhaseAgent, StatusStarted, "", nil)))
	case decision.NoticeFinished:
		r := newRun(a, v, seqStarted)
		p := v.NewParser()
		for _, line := range lines {
			evs, _ := p.Parse([]byte(line)) // a malformed line still comes back as a raw event
			for i := range evs {
				ev := evs[i].Proto()
				if i == 0 {
					ev.Raw = []byte(line)
				}
				out = append(out, r.stamp(ev))
			}
		}
		exit := int32(0)
		status, reason := StatusSucceeded, ""
		if a.Status.Phase != agentsv1alpha1.PhaseSucceeded {
			exit, status, reason = 1, StatusFailed, a.Status.FailureReason
		}
		if a.Status.ExitCode != nil {
			exit = *a.Status.ExitCode
		}
		out = append(out, r.stamp(lifecycle(PhaseAgent, status, reason, proto.Int32(exit))))
	case decision.NoticeTimeout:
		r := newRun(a, v, seqTimeout-1)
		status := StatusRunning
		var exit *int32
		if a.Status.Phase == agentsv1alpha1.PhaseFailed {
			status, exit = StatusFailed, proto.Int32(1)
		}
		out = append(out, r.stamp(lifecycle(PhaseBatchTimeout, status, decision.ReasonBatchTimedOut, exit)))
	}
	return out
}

func lifecycle(phase, status, reason string, exit *int32) *eventsv1.RunEvent {
	return &eventsv1.RunEvent{Payload: &eventsv1.RunEvent_Lifecycle{Lifecycle: &eventsv1.Lifecycle{
		Phase: phase, Status: status, Reason: reason, ExitCode: exit}}}
}

// run stamps one notice's events.
type run struct {
	r   *events.Run
	uid string
}

func newRun(a *agentsv1alpha1.Agent, v vendors.Vendor, last uint64) *run {
	return &run{r: events.NewRun(Identity(a), events.WithVendor(v.Name()), events.WithStartSequence(last)), uid: string(a.UID)}
}

// stamp stamps ev and gives it a dedupe id of its own namespace: a
// fallback Job's supervisor numbers its events from 1 again, and its ids
// must not collide with these within the stream's duplicate window.
func (r *run) stamp(ev *eventsv1.RunEvent) *eventsv1.RunEvent {
	r.r.Stamp(ev)
	ev.Id = fmt.Sprintf("%s-batch-%d", r.uid, ev.Sequence)
	return ev
}
