package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
)

// record hands evs about the object regarding to the Kubernetes Event
// recorder. Callers record only after the write that makes the events
// true succeeded. The recorder sends them off the worker, aggregating
// repeats into series and rate-limiting like every client-go recorder; an
// Event lost on the way is only a missing line in `kubectl describe`.
func (c *Controller) record(regarding *corev1.ObjectReference, evs ...decision.Event) {
	if c.opts.Recorder == nil {
		return
	}
	for _, e := range evs {
		// A nil *ObjectReference in the interface would not be nil.
		var related runtime.Object
		if e.Related != nil {
			related = e.Related
		}
		// The note is the format's argument, never the format: a '%' in a
		// failure reason stays as it is.
		c.opts.Recorder.Eventf(regarding, related, e.Type, e.Reason, e.Action, "%s", e.Note)
	}
}
