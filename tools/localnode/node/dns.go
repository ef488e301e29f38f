package node

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// The pods' DNS server listens on the switch's gateway address (UDP and
// TCP port 53) and answers from the informer caches at query time, so a
// changed Service or endpoint is seen at once:
//
//	<svc>.<ns>.svc.<domain>         the ClusterIP; a headless Service's ready endpoints
//	<host>.<svc>.<ns>.svc.<domain>  the endpoint with that hostname
//	<a-b-c-d>.<ns>.pod.<domain>     a.b.c.d
//
// Pods' resolv.conf searches <ns>.svc.<domain>, svc.<domain> and <domain>
// with ndots:5, so short names resolve from the pod's namespace as on a
// cluster. Other names are looked up with the host's resolver.

const dnsTTL = 5

// dnsServer serves DNS for one node's pods.
type dnsServer struct {
	svc    *serviceNet
	domain string
	udp    net.PacketConn
	tcp    net.Listener
	wg     sync.WaitGroup
}

// startDNS starts serving; ctx, the node's lifetime, bounds the lookups
// forwarded to the host's resolver.
func startDNS(ctx context.Context, svc *serviceNet, nw *nodeNetwork) (*dnsServer, error) {
	d := &dnsServer{svc: svc, domain: strings.ToLower(strings.Trim(nw.domain, "."))}
	addr := net.JoinHostPort(nw.gateway.String(), "53")
	var err error
	if d.udp, err = listenPacketIn(netnsPath(nw.switchNS()), addr); err != nil {
		return nil, err
	}
	if d.tcp, err = listenIn(netnsPath(nw.switchNS()), addr); err != nil {
		_ = d.udp.Close()
		return nil, err
	}
	d.wg.Add(2)
	go func() { defer d.wg.Done(); d.serveUDP(ctx) }()
	go func() { defer d.wg.Done(); d.serveTCP(ctx) }()
	return d, nil
}

func (d *dnsServer) stop() {
	_ = d.udp.Close()
	_ = d.tcp.Close()
	d.wg.Wait()
}

func (d *dnsServer) serveUDP(ctx context.Context) {
	buf := make([]byte, 4096)
	for {
		n, from, err := d.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		q := append([]byte(nil), buf[:n]...)
		go func() {
			if resp := d.answer(ctx, q, 512); resp != nil {
				_, _ = d.udp.WriteTo(resp, from)
			}
		}()
	}
}

func (d *dnsServer) serveTCP(ctx context.Context) {
	for {
		c, err := d.tcp.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = c.Close() }()
			for {
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				var l [2]byte
				if _, err := io.ReadFull(c, l[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(c, q); err != nil {
					return
				}
				resp := d.answer(ctx, q, 65535)
				if resp == nil {
					return
				}
				out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
				if _, err := c.Write(append(out, resp...)); err != nil {
					return
				}
			}
		}()
	}
}

// answer builds the response to one query, truncated (TC set, no answers)
// past limit bytes; nil for a message that is not a query.
func (d *dnsServer) answer(ctx context.Context, raw []byte, limit int) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(raw)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	rcode, ips, authoritative := d.resolve(ctx, q)
	build := func(truncated bool) ([]byte, error) {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired,
			RecursionAvailable: true, Authoritative: authoritative, RCode: rcode, Truncated: truncated})
		b.EnableCompression()
		if err := b.StartQuestions(); err != nil {
			return nil, err
		}
		if err := b.Question(q); err != nil {
			return nil, err
		}
		if err := b.StartAnswers(); err != nil {
			return nil, err
		}
		if !truncated {
			rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			for _, a := range ips {
				var err error
				if a.Is4() {
					err = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
				} else {
					err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
				}
				if err != nil {
					return nil, err
				}
			}
		}
		return b.Finish()
	}
	out, err := build(false)
	if err == nil && len(out) > limit {
		out, err = build(true)
	}
	if err != nil {
		return nil
	}
	return out
}

// resolve answers one question: the rcode, the addresses of the asked
// type, and whether the name is in the cluster domain.
func (d *dnsServer) resolve(ctx context.Context, q dnsmessage.Question) (dnsmessage.RCode, []netip.Addr, bool) {
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	want4 := q.Type == dnsmessage.TypeA
	want6 := q.Type == dnsmessage.TypeAAAA
	rest, inCluster := strings.CutSuffix(name, "."+d.domain)
	if !inCluster {
		rest, inCluster = name, strings.HasSuffix(name, ".svc") || strings.HasSuffix(name, ".pod")
	}
	if !inCluster {
		return d.forward(ctx, name, want4, want6)
	}
	ips, ok := d.cluster(strings.Split(rest, "."))
	if !ok {
		return dnsmessage.RCodeNameError, nil, true
	}
	if !want4 {
		// The name exists but has IPv4 addresses only.
		return dnsmessage.RCodeSuccess, nil, true
	}
	return dnsmessage.RCodeSuccess, ips, true
}

// cluster looks up a name inside the cluster domain, split in labels.
func (d *dnsServer) cluster(l []string) ([]netip.Addr, bool) {
	var addrs []string
	switch {
	case len(l) == 3 && l[2] == "svc":
		svc, err := d.svc.svcs.Services(l[1]).Get(l[0])
		if err != nil {
			return nil, false
		}
		if ip := clusterIPv4(svc); ip != "" {
			addrs = []string{ip}
		} else {
			addrs = d.svc.endpoints(l[1], l[0], "-")
		}
	case len(l) == 4 && l[3] == "svc":
		a := d.svc.hostnameEndpoint(l[2], l[1], l[0])
		if a == "" {
			return nil, false
		}
		addrs = []string{a}
	case len(l) == 3 && l[2] == "pod":
		addrs = []string{strings.ReplaceAll(l[0], "-", ".")}
	default:
		return nil, false
	}
	var out []netip.Addr
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil && ip.Is4() {
			out = append(out, ip)
		}
	}
	return out, true
}

// forward resolves a name outside the cluster with the host's resolver
// (its /etc/hosts and name servers).
func (d *dnsServer) forward(ctx context.Context, name string, want4, want6 bool) (dnsmessage.RCode, []netip.Addr, bool) {
	if !want4 && !want6 {
		return dnsmessage.RCodeNameError, nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// Both families, so a name with only IPv4 addresses answers AAAA
	// with no records rather than "no such name".
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
		return dnsmessage.RCodeNameError, nil, false
	}
	if err != nil {
		return dnsmessage.RCodeServerFailure, nil, false
	}
	var out []netip.Addr
	for _, a := range ips {
		a = a.Unmap()
		if a.Is4() && want4 || a.Is6() && want6 {
			out = append(out, a)
		}
	}
	return dnsmessage.RCodeSuccess, out, false
}
