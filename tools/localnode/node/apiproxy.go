package node

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// In a pod network namespace the API server's loopback address is the
// pod's own loopback. Rather than give pods another address, which the
// API server's serving certificate would not name, localnode listens on
// that same address and port inside each pod's namespace and forwards each
// connection, as plain TCP, to the real API server. TLS runs end to end,
// so a client verifying with the pod's ca.crt sees the API server's own
// certificate for the address it dialled: rest.InClusterConfig works
// unchanged. A pod can therefore not bind that port on its loopback.

// isLoopbackHost says whether the API server is reached over loopback
// (and so needs forwarding into pod namespaces).
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// forwarder accepts on listeners and pipes each connection to a target
// chosen per connection.
type forwarder struct {
	mu     sync.Mutex
	ls     []net.Listener
	closed bool
	wg     sync.WaitGroup
}

// serve accepts on l until it closes and connects each client to the
// address target returns ("" refuses the client).
func (f *forwarder) serve(l net.Listener, target func() string) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		_ = l.Close()
		return
	}
	f.ls = append(f.ls, l)
	f.wg.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return
			}
			go pipe(c, target())
		}
	}()
}

// close stops accepting; connections already made run to their end.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	ls := f.ls
	f.ls = nil
	f.mu.Unlock()
	for _, l := range ls {
		_ = l.Close()
	}
	f.wg.Wait()
}

// closeListener stops one listener.
func (f *forwarder) closeListener(l net.Listener) {
	f.mu.Lock()
	for i, x := range f.ls {
		if x == l {
			f.ls = append(f.ls[:i], f.ls[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
	_ = l.Close()
}

// pipe copies both ways between c and a new connection to addr, closing
// each direction's write side when its reader ends, so half-closes pass.
func pipe(c net.Conn, addr string) {
	defer func() { _ = c.Close() }()
	if addr == "" {
		return
	}
	up, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
}

// startAPIProxy forwards the API server's loopback address inside a pod's
// network namespace.
func (n *Node) startAPIProxy(sb *podSandbox) (*forwarder, error) {
	f := &forwarder{}
	if !isLoopbackHost(n.apiHost) {
		return f, nil
	}
	target := net.JoinHostPort(n.apiHost, n.apiPort)
	addr := target
	if n.apiHost == "localhost" {
		// Listen on the address without a lookup on the namespace's thread.
		addr = net.JoinHostPort("127.0.0.1", n.apiPort)
	}
	l, err := listenIn(netnsPath(sb.netns), addr)
	if err != nil {
		return nil, err
	}
	f.serve(l, func() string { return target })
	return f, nil
}
