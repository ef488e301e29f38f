package eventpace

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kevents "k8s.io/client-go/tools/events"
)

// pacer is a Recorder over a FakeRecorder whose clock the test moves.
type pacer struct {
	*Recorder
	fake    *kevents.FakeRecorder
	clock   time.Time
	dropped map[string]int
}

func newPacer(qps float64, burst int) *pacer {
	p := &pacer{fake: kevents.NewFakeRecorder(100000), clock: time.Unix(1_800_000_000, 0), dropped: map[string]int{}}
	p.Recorder = New(p.fake, qps, burst, func(t string) { p.dropped[t]++ })
	p.now = func() time.Time { return p.clock }
	return p
}

// record records n Events of type typ at the current clock.
func (p *pacer) record(n int, typ string) {
	for range n {
		p.Eventf(&corev1.Pod{}, nil, typ, "Started", "Start", "run %d", n)
	}
}

func TestRecorderBoundsTheBacklog(t *testing.T) {
	const qps, burst = 50, 100
	// The backlog the client may hold: the burst at once, then MaxBacklog
	// more waiting at qps.
	admitted := burst + MaxBacklog
	cases := []struct {
		name              string
		run               func(p *pacer)
		recorded, dropped int
	}{
		{"a burst within the client's burst is recorded whole", func(p *pacer) { p.record(burst, corev1.EventTypeNormal) }, burst, 0},
		{"Events that would wait up to MaxBacklog behind the client are recorded", func(p *pacer) { p.record(admitted, corev1.EventTypeNormal) }, admitted, 0},
		{"Events beyond the backlog are dropped and counted", func(p *pacer) { p.record(admitted+250, corev1.EventTypeNormal) }, admitted, 250},
		{"a Warning beyond the backlog is dropped like any Event", func(p *pacer) {
			p.record(admitted, corev1.EventTypeNormal)
			p.record(1, corev1.EventTypeWarning)
		}, admitted, 1},
		{"the backlog drains at qps, admitting as many again", func(p *pacer) {
			p.record(admitted+10, corev1.EventTypeNormal)
			p.clock = p.clock.Add(2 * time.Second)
			p.record(2*qps+10, corev1.EventTypeNormal)
		}, admitted + 2*qps, 20},
		{"a dropped Event takes no place from the ones after it", func(p *pacer) {
			p.record(admitted+1000, corev1.EventTypeNormal)
			p.clock = p.clock.Add(time.Second)
			p.record(qps, corev1.EventTypeNormal)
		}, admitted + qps, 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPacer(qps, burst)
			tc.run(p)
			if got := len(p.fake.Events); got != tc.recorded {
				t.Errorf("recorded %d Events, want %d", got, tc.recorded)
			}
			dropped := p.dropped[corev1.EventTypeNormal] + p.dropped[corev1.EventTypeWarning]
			if dropped != tc.dropped {
				t.Errorf("dropped %d Events (%v), want %d", dropped, p.dropped, tc.dropped)
			}
		})
	}
}

func TestRecorderPassesTheEventAsGiven(t *testing.T) {
	p := newPacer(1, 1)
	p.Eventf(&corev1.Pod{}, nil, corev1.EventTypeWarning, "Failed", "Finish", "exit %d: %s", 3, "boom")
	if got, want := <-p.fake.Events, "Warning Failed exit 3: boom"; got != want {
		t.Errorf("recorded %q, want %q", got, want)
	}
}
