// Package upstream keeps one gRPC connection per run pod address, shared
// by every call to that pod, kept alive while used and closed once idle.
package upstream

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	supervisorv1 "github.com/agentplane/agentplane/proto/agentplane/supervisor/v1"
)

// Options shape a Pool.
type Options struct {
	// DialTimeout bounds connecting to a pod.
	DialTimeout time.Duration
	// IdleTimeout closes a connection no call used for this long.
	IdleTimeout time.Duration
	// ObserveDial, when set, is told how long each new connection took.
	ObserveDial func(time.Duration)
}

// Pool hands out SessionService clients by pod address.
type Pool struct {
	opts  Options
	mu    sync.Mutex
	conns map[string]*entry
	stop  chan struct{}
	done  chan struct{}
}

type entry struct {
	conn     *grpc.ClientConn
	inUse    int
	lastUsed time.Time
}

// New starts a Pool and its idle sweeper; Close stops both.
func New(opts Options) *Pool {
	p := &Pool{opts: opts, conns: map[string]*entry{}, stop: make(chan struct{}), done: make(chan struct{})}
	go p.sweep()
	return p
}

// Get returns a client for the session server at addr, connected, and a
// release func the caller must call when its call ended. A pod that cannot
// be reached within DialTimeout is an error.
func (p *Pool) Get(ctx context.Context, addr string) (supervisorv1.SessionServiceClient, func(), error) {
	p.mu.Lock()
	e, ok := p.conns[addr]
	// A connection that failed is replaced rather than left to its
	// backoff: the pod may have come back, or be gone for good.
	if ok && e.conn.GetState() == connectivity.TransientFailure && e.inUse == 0 {
		_ = e.conn.Close()
		delete(p.conns, addr)
		ok = false
	}
	fresh := !ok
	if fresh {
		conn, err := grpc.NewClient(addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			// The supervisor accepts pings down to every 10 s; a dead pod
			// is noticed within Time+Timeout even on a quiet stream.
			grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second}),
			// A session's connection is idle most of the time (a person
			// reads and types); a smaller read buffer than the 32 KiB
			// default keeps a thousand of them cheaper.
			grpc.WithReadBufferSize(8<<10),
		)
		if err != nil {
			p.mu.Unlock()
			return nil, nil, fmt.Errorf("client for %s: %w", addr, err)
		}
		e = &entry{conn: conn}
		p.conns[addr] = e
	}
	e.inUse++
	p.mu.Unlock()
	release := func() {
		p.mu.Lock()
		e.inUse--
		e.lastUsed = time.Now()
		p.mu.Unlock()
	}
	began := time.Now()
	dctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	if err := waitReady(dctx, e.conn); err != nil {
		release()
		return nil, nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	if fresh && p.opts.ObserveDial != nil {
		p.opts.ObserveDial(time.Since(began))
	}
	return supervisorv1.NewSessionServiceClient(e.conn), release, nil
}

// waitReady waits for conn to be ready, failing at the first failed
// attempt rather than waiting through the reconnect backoff.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			conn.Connect()
		case connectivity.TransientFailure:
			return fmt.Errorf("connection failed")
		case connectivity.Shutdown:
			return fmt.Errorf("connection closed")
		}
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}

// Len is the number of open connections.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

func (p *Pool) sweep() {
	defer close(p.done)
	tick := time.NewTicker(max(p.opts.IdleTimeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		p.mu.Lock()
		for addr, e := range p.conns {
			if e.inUse == 0 && time.Since(e.lastUsed) >= p.opts.IdleTimeout {
				_ = e.conn.Close()
				delete(p.conns, addr)
			}
		}
		p.mu.Unlock()
	}
}

// Close closes every connection.
func (p *Pool) Close() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, e := range p.conns {
		_ = e.conn.Close()
		delete(p.conns, addr)
	}
}
