package events

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// generousWait bounds a wait that should end far sooner; tests never
// assert how long anything took.
const generousWait = 60 * time.Second

// coreServer is a nats-server without JetStream (the test's fake stream
// answers instead) on a free loopback port; eventstest would be an import
// cycle here.
type coreServer struct {
	t   *testing.T
	srv *server.Server
}

func startCore(t *testing.T) *coreServer {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(generousWait) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	return &coreServer{t: t, srv: srv}
}

func (s *coreServer) Connect() *nats.Conn {
	s.t.Helper()
	nc, err := nats.Connect(s.srv.ClientURL())
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(nc.Close)
	return nc
}

// fakeStream answers publishes on fake.> as a test script says: the
// messages it got are held until the script replies to them.
type fakeStream struct {
	t    *testing.T
	nc   *nats.Conn
	msgs chan *nats.Msg
}

func newFakeStream(t *testing.T, srv *coreServer) *fakeStream {
	t.Helper()
	f := &fakeStream{t: t, nc: srv.Connect(), msgs: make(chan *nats.Msg, 64)}
	if _, err := f.nc.ChanSubscribe("fake.>", f.msgs); err != nil {
		t.Fatal(err)
	}
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

// take returns the next n messages published to fake.>.
func (f *fakeStream) take(n int) []*nats.Msg {
	f.t.Helper()
	out := make([]*nats.Msg, n)
	for i := range out {
		select {
		case out[i] = <-f.msgs:
		case <-time.After(generousWait):
			f.t.Fatalf("only %d of %d messages arrived", i, n)
		}
	}
	return out
}

func (f *fakeStream) answer(m *nats.Msg, body string) {
	f.t.Helper()
	if err := f.nc.Publish(m.Reply, []byte(body)); err != nil {
		f.t.Fatal(err)
	}
	if err := f.nc.Flush(); err != nil {
		f.t.Fatal(err)
	}
}

// send publishes n messages as one window of w, the message of slot i
// carrying i, and returns the window's first number.
func send(t *testing.T, nc *nats.Conn, w *ackWindow, n int) uint64 {
	t.Helper()
	base := w.begin(n)
	for i := range n {
		msg := &nats.Msg{Subject: "fake.s", Reply: w.replyTo(base, i), Data: []byte(strconv.Itoa(i))}
		if err := nc.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// awaitAnswers waits until n answers of the current window have been
// filed, so that a short deadline cannot pass before they are.
func awaitAnswers(t *testing.T, w *ackWindow, n int) {
	t.Helper()
	deadline := time.Now().Add(generousWait)
	for {
		w.mu.Lock()
		got := w.answered
		w.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d answers filed", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func seqAck(seq string) string { return `{"stream":"S","seq":` + seq + `}` }

// TestAckWindow checks the rules by which a window's answers reach their
// slots.
func TestAckWindow(t *testing.T) {
	srv := startCore(t)
	for _, c := range []struct {
		name string
		run  func(t *testing.T, nc *nats.Conn, w *ackWindow, f *fakeStream)
	}{
		{"acks answered out of order are each filed under their own slot", func(t *testing.T, nc *nats.Conn, w *ackWindow, f *fakeStream) {
			const n = 5
			send(t, nc, w, n)
			msgs := f.take(n)
			for i := n - 1; i >= 0; i-- {
				f.answer(msgs[i], seqAck(string(msgs[i].Data)))
			}
			slots := w.wait(n, generousWait, nil)
			for i, s := range slots {
				if !s.answered || s.err != nil || s.ack.Seq != uint64(i) {
					t.Fatalf("slot %d: %+v", i, s)
				}
			}
		}},
		{"a late ack of an earlier window is not counted for the next", func(t *testing.T, nc *nats.Conn, w *ackWindow, f *fakeStream) {
			send(t, nc, w, 2)
			old := f.take(2)
			f.answer(old[0], seqAck("100"))
			awaitAnswers(t, w, 1)
			// The second ack never comes in time: the window ends.
			slots := w.wait(2, 50*time.Millisecond, nil)
			if !slots[0].answered || slots[0].ack.Seq != 100 || slots[1].answered {
				t.Fatalf("first window %+v", slots)
			}
			send(t, nc, w, 2)
			cur := f.take(2)
			f.answer(old[1], seqAck("101"))
			f.answer(old[0], seqAck("102"))
			f.answer(cur[1], seqAck("201"))
			f.answer(cur[0], seqAck("200"))
			slots = w.wait(2, generousWait, nil)
			if slots[0].ack.Seq != 200 || slots[1].ack.Seq != 201 {
				t.Fatalf("second window %+v", slots)
			}
		}},
		{"a second answer to a slot is ignored", func(t *testing.T, nc *nats.Conn, w *ackWindow, f *fakeStream) {
			send(t, nc, w, 2)
			msgs := f.take(2)
			f.answer(msgs[0], seqAck("1"))
			f.answer(msgs[0], seqAck("9"))
			f.answer(msgs[1], seqAck("2"))
			slots := w.wait(2, generousWait, nil)
			if slots[0].ack.Seq != 1 || slots[1].ack.Seq != 2 {
				t.Fatalf("%+v", slots)
			}
		}},
		{"an error ack fails its slot with the server's codes", func(t *testing.T, nc *nats.Conn, w *ackWindow, f *fakeStream) {
			send(t, nc, w, 2)
			msgs := f.take(2)
			f.answer(msgs[0], seqAck("1"))
			f.answer(msgs[1], `{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}`)
			slots := w.wait(2, generousWait, nil)
			var apiErr *jetstream.APIError
			if slots[0].err != nil || !errors.As(slots[1].err, &apiErr) ||
				apiErr.ErrorCode != jetstream.JSErrCodeStreamMessageExceedsMaximum || !tooLarge(slots[1].err) || !permanent(slots[1].err) {
				t.Fatalf("%+v", slots)
			}
		}},
		{"an ack without a stream or not JSON fails its slot", func(t *testing.T, nc *nats.Conn, w *ackWindow, f *fakeStream) {
			send(t, nc, w, 2)
			msgs := f.take(2)
			f.answer(msgs[0], `{"seq":1}`)
			f.answer(msgs[1], `+OK`)
			slots := w.wait(2, generousWait, nil)
			if !errors.Is(slots[0].err, errInvalidAck) || !errors.Is(slots[1].err, errInvalidAck) {
				t.Fatalf("%+v", slots)
			}
		}},
		{"an unanswered slot is left unanswered when the deadline passes", func(t *testing.T, nc *nats.Conn, w *ackWindow, f *fakeStream) {
			send(t, nc, w, 3)
			msgs := f.take(3)
			f.answer(msgs[1], seqAck("1"))
			awaitAnswers(t, w, 1)
			slots := w.wait(3, 50*time.Millisecond, nil)
			if slots[0].answered || !slots[1].answered || slots[2].answered {
				t.Fatalf("%+v", slots)
			}
		}},
		{"closing stop ends the wait", func(t *testing.T, nc *nats.Conn, w *ackWindow, f *fakeStream) {
			send(t, nc, w, 1)
			f.take(1)
			stop := make(chan struct{})
			close(stop)
			if slots := w.wait(1, generousWait, stop); slots[0].answered {
				t.Fatalf("%+v", slots)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			nc := srv.Connect()
			w, err := newAckWindow(nc)
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			c.run(t, nc, w, newFakeStream(t, srv))
		})
	}
}

// TestAckWindowNoResponders: a subject nobody (no stream) takes is
// answered by the server's "no responders" status, which fails the slot as
// a missing stream.
func TestAckWindowNoResponders(t *testing.T) {
	srv := startCore(t)
	nc := srv.Connect()
	w, err := newAckWindow(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	base := w.begin(1)
	if err := nc.PublishMsg(&nats.Msg{Subject: "nobody.listens", Reply: w.replyTo(base, 0)}); err != nil {
		t.Fatal(err)
	}
	slots := w.wait(1, generousWait, nil)
	if !errors.Is(slots[0].err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("%+v", slots)
	}
}
