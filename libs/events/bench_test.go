package events_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/agentplane/agentplane/libs/events"
	"github.com/agentplane/agentplane/libs/events/eventstest"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

var benchRaw = []byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"a fairly ordinary line of model output"}]}}`)

func benchEvents(n int) []*eventsv1.RunEvent {
	r := newRun("u-bench")
	evs := make([]*eventsv1.RunEvent, n)
	for i := range evs {
		evs[i] = message(r, i)
		evs[i].Raw = benchRaw
	}
	return evs
}

// BenchmarkPublish measures sustained publishing to an embedded JetStream:
// the timer stops once every event is acknowledged. The buffer holds all
// events, so nothing is dropped; ns/op is the cost per event.
func BenchmarkPublish(b *testing.B) {
	for _, inflight := range []int{1, 256} {
		b.Run("inflight="+strconv.Itoa(inflight), func(b *testing.B) {
			srv := eventstest.Start(b)
			p, err := events.NewPublisher(events.PublisherOptions{URL: srv.URL(), Buffer: b.N + 1, MaxInFlight: inflight})
			if err != nil {
				b.Fatal(err)
			}
			evs := benchEvents(b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for _, ev := range evs {
				p.Publish(ev)
			}
			if err := p.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if s := p.Stats(); s.Published != uint64(b.N) {
				b.Fatalf("published %d of %d", s.Published, b.N)
			}
		})
	}
}

// BenchmarkEncode is the wire JSON encoding alone, for comparison.
func BenchmarkEncode(b *testing.B) {
	ev := benchEvents(1)[0]
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		var err error
		if buf, err = events.AppendEncode(buf[:0], ev); err != nil {
			b.Fatal(err)
		}
	}
}
