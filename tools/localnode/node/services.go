package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Services. Each ClusterIP is an address of the switch's loopback, and
// localnode accepts on every TCP port of it and forwards each connection to
// a ready endpoint taken from the Service's EndpointSlices at that moment
// (round robin): kube-proxy's old userspace mode. This was chosen over
// iptables/nftables DNAT because it needs no firewall rules on a host
// whose firewall belongs to Docker, maps port to targetPort (named ones
// too) exactly as the EndpointSlice controller resolved them, and follows
// endpoint changes (a rolling upgrade) with no rule sync at all: the next
// connection goes to the new pods, while open connections keep their
// endpoint. DNS (dns.go) answers Service names with their ClusterIP, so
// clients keep using the Service port. The host reaches a ClusterIP too
// (a route through the switch), unless another localnode routed that
// address first. UDP Services are not forwarded.

// serviceNet keeps the switch's ClusterIPs and forwarders in step with the
// Services.
type serviceNet struct {
	n       *Node
	nw      *nodeNetwork
	factory informers.SharedInformerFactory
	svcs    corelisters.ServiceLister
	slices  discoverylisters.EndpointSliceLister
	queue   workqueue.TypedRateLimitingInterface[string]
	fwd     forwarder
	rr      atomic.Uint64
	// cancel stops the informers, also when the node's start fails.
	cancel context.CancelFunc
	// done closes when the sync loop has ended.
	done chan struct{}

	mu     sync.Mutex
	active map[string]*svcState
}

// svcState is what the switch holds for one Service.
type svcState struct {
	ip        string
	routed    bool
	listeners map[int32]net.Listener
}

func startServiceNet(ctx context.Context, n *Node, nw *nodeNetwork) (*serviceNet, error) {
	s := &serviceNet{n: n, nw: nw, active: map[string]*svcState{}, done: make(chan struct{}),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	s.factory = informers.NewSharedInformerFactory(n.kube, 0)
	svcInf := s.factory.Core().V1().Services()
	sliceInf := s.factory.Discovery().V1().EndpointSlices()
	s.svcs, s.slices = svcInf.Lister(), sliceInf.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			s.queue.Add(key)
		}
	}
	if _, err := svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	}); err != nil {
		return nil, err
	}
	ictx, cancel := context.WithCancel(n.ctx)
	s.cancel = cancel
	s.factory.Start(ictx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced) {
		cancel()
		s.factory.Shutdown()
		return nil, fmt.Errorf("localnode: service informers did not sync")
	}
	go s.run()
	return s, nil
}

func (s *serviceNet) run() {
	defer close(s.done)
	for {
		key, shutdown := s.queue.Get()
		if shutdown {
			return
		}
		if err := s.sync(key); err != nil {
			s.n.log.Warn("service forwarding failed", "service", key, "err", err)
			s.queue.AddRateLimited(key)
		} else {
			s.queue.Forget(key)
		}
		s.queue.Done(key)
	}
}

// stop closes every forwarder and removes the host routes this node added.
func (s *serviceNet) stop() {
	s.queue.ShutDown()
	// No sync may add an address or route after the cleanup below.
	<-s.done
	s.fwd.close()
	s.cancel()
	s.factory.Shutdown()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.active {
		if st.routed {
			_ = ip("route", "delete", st.ip+"/32", "dev", s.nw.hostLink())
		}
	}
	s.active = map[string]*svcState{}
}

// clusterIPv4 is the Service's IPv4 ClusterIP, or "" (headless, none).
func clusterIPv4(svc *corev1.Service) string {
	a, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !a.Is4() {
		return ""
	}
	return a.String()
}

// sync makes the switch hold the Service's ClusterIP with a forwarder per
// TCP port, or nothing once it is gone.
func (s *serviceNet) sync(key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	svc, err := s.svcs.Services(ns).Get(name)
	want := ""
	wantPorts := map[int32]string{}
	if err == nil {
		want = clusterIPv4(svc)
		for _, p := range svc.Spec.Ports {
			if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
				wantPorts[p.Port] = p.Name
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.active[key]
	if st != nil && st.ip != want {
		s.release(key, st)
		st = nil
	}
	if want == "" {
		return nil
	}
	if st == nil {
		st = &svcState{ip: want, listeners: map[int32]net.Listener{}}
		if err := ipExists("-n", s.nw.switchNS(), "addr", "add", want+"/32", "dev", servicesLink); err != nil {
			return err
		}
		st.routed = s.route(want)
		s.active[key] = st
	}
	for port, l := range st.listeners {
		if _, ok := wantPorts[port]; !ok {
			s.fwd.closeListener(l)
			delete(st.listeners, port)
		}
	}
	for port, portName := range wantPorts {
		if _, ok := st.listeners[port]; ok {
			continue
		}
		l, err := listenIn(netnsPath(s.nw.switchNS()), net.JoinHostPort(want, strconv.Itoa(int(port))))
		if err != nil {
			return fmt.Errorf("listen on %s:%d: %w", want, port, err)
		}
		st.listeners[port] = l
		s.fwd.serve(l, func() string { return s.pick(ns, name, portName) })
	}
	return nil
}

// route sends the host's traffic for a ClusterIP through the switch. It
// reports whether the route is this node's (to remove it later).
func (s *serviceNet) route(clusterIP string) bool {
	err := ip("route", "add", clusterIP+"/32", "via", s.nw.gateway.String(), "dev", s.nw.hostLink())
	if err == nil {
		return true
	}
	out, _ := exec.Command("ip", "route", "show", "exact", clusterIP+"/32").Output()
	return strings.Contains(string(out), "dev "+s.nw.hostLink()+" ")
}

// release drops what the switch holds for a Service. Callers hold mu.
func (s *serviceNet) release(key string, st *svcState) {
	for _, l := range st.listeners {
		s.fwd.closeListener(l)
	}
	_ = ip("-n", s.nw.switchNS(), "addr", "delete", st.ip+"/32", "dev", servicesLink)
	if st.routed {
		_ = ip("route", "delete", st.ip+"/32", "dev", s.nw.hostLink())
	}
	delete(s.active, key)
}

// pick returns a ready endpoint (ip:port) of a Service port, taking turns.
func (s *serviceNet) pick(ns, name, portName string) string {
	eps := s.endpoints(ns, name, portName)
	if len(eps) == 0 {
		return ""
	}
	return eps[s.rr.Add(1)%uint64(len(eps))]
}

// endpoints lists the ready IPv4 endpoints of a Service port as ip:port,
// or as bare addresses when portName is "-" (DNS of headless Services).
func (s *serviceNet) endpoints(ns, name, portName string) []string {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	list, err := s.slices.EndpointSlices(ns).List(sel)
	if err != nil {
		return nil
	}
	var out []string
	for _, sl := range list {
		if sl.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port := int32(-1)
		for _, p := range sl.Ports {
			if p.Port != nil && (p.Name == nil && portName == "" || p.Name != nil && *p.Name == portName) {
				port = *p.Port
			}
		}
		if port < 0 && portName != "-" {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready || len(ep.Addresses) == 0 {
				continue
			}
			if portName == "-" {
				out = append(out, ep.Addresses[0])
			} else {
				out = append(out, net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(port))))
			}
		}
	}
	return out
}

// hostnameEndpoint finds the ready endpoint of a Service with the given
// hostname (a StatefulSet pod behind a headless Service).
func (s *serviceNet) hostnameEndpoint(ns, name, host string) string {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	list, _ := s.slices.EndpointSlices(ns).List(sel)
	for _, sl := range list {
		for _, ep := range sl.Endpoints {
			if ep.Hostname != nil && *ep.Hostname == host && len(ep.Addresses) > 0 && sl.AddressType == discoveryv1.AddressTypeIPv4 {
				return ep.Addresses[0]
			}
		}
	}
	return ""
}
