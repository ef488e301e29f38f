// Package eventpace holds the controller's Kubernetes Events to a rate of
// their own, so that a burst of runs spends the API server's writes on
// Jobs and statuses, not on the Events that tell of them.
//
// The Events travel through a clientset of their own whose client-side
// limiter holds them to that rate, as the kubelet's --event-qps does for
// its Events. That limiter waits without bound, and client-go's
// events.k8s.io recorder waits in a goroutine per Event, so a Recorder
// admits an Event only while fewer than MaxBacklog are ahead of it at
// that rate: a flood of transitions costs a bounded wait and memory, and
// the Events beyond are dropped and counted. An Event is a line in
// `kubectl describe`; the Agent's status holds the same facts.
package eventpace

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	kevents "k8s.io/client-go/tools/events"
)

// MaxBacklog is how many Events may wait for the client's rate limiter
// at once, the depth of client-go's own event queue.
const MaxBacklog = 1000

// Recorder records Events through next while the backlog at qps and
// burst stays within MaxBacklog, and drops the rest.
type Recorder struct {
	next    kevents.EventRecorder
	limiter *rate.Limiter
	maxWait time.Duration
	now     func() time.Time
	dropped func(eventType string)
}

// New returns a Recorder in front of next, whose client is limited to
// qps Events a second with bursts of burst (the same figures, so that
// this Recorder's count of the backlog is the client's). dropped, if not
// nil, is told the type of each Event dropped.
func New(next kevents.EventRecorder, qps float64, burst int, dropped func(eventType string)) *Recorder {
	return &Recorder{
		next:    next,
		limiter: rate.NewLimiter(rate.Limit(qps), burst),
		maxWait: time.Duration(float64(MaxBacklog) / qps * float64(time.Second)),
		now:     time.Now,
		dropped: dropped,
	}
}

// Eventf records the Event unless MaxBacklog Events already wait ahead of
// it. It never blocks.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	now := r.now()
	res := r.limiter.ReserveN(now, 1)
	if !res.OK() || res.DelayFrom(now) > r.maxWait {
		// Give the token back, so the Events admitted later are not
		// held for one that never went.
		res.CancelAt(now)
		if r.dropped != nil {
			r.dropped(eventtype)
		}
		return
	}
	r.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
