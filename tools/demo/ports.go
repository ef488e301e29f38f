package main

import (
	"fmt"
	"net"
	"strconv"
)

// The control plane's ports: the demo passes them to `kubestack up`, so
// this list and what kubestack binds cannot drift apart.
const (
	apiServerPort         = 6443
	etcdPort              = 2379 // etcd's peer port is the next one
	controllerManagerPort = 10257
	kubeletPort           = 10250
)

// port is one loopback address the demo binds, and the usual suspect when
// it is already in use.
type port struct {
	addr, what, suspect string
}

func loopback(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }

// demoPorts are every address `demo up` binds; Prometheus's only when the
// demo starts one.
func demoPorts(withPrometheus bool) []port {
	ps := []port{
		{loopback(apiServerPort), "kube-apiserver", "another kube-apiserver, e.g. `make kubestack-up`"},
		{loopback(etcdPort), "etcd's clients", "another etcd"},
		{loopback(etcdPort + 1), "etcd's peers", "another etcd"},
		{loopback(controllerManagerPort), "kube-controller-manager", "another kube-controller-manager"},
		{loopback(kubeletPort), "localnode's kubelet endpoint", "a kubelet or another localnode"},
		{loopback(natsPort), "NATS", "another NATS server"},
		{controllerAddr, "the agent-controller's metrics and probes", "another agent-controller"},
		{fakeVendorAddr, "the fake vendor batch APIs (tools/fakevendor)", "another fakevendor"},
		{batchPollerGRPCAddr, "batch-poller's gRPC server", "another batch-poller"},
		{batchPollerHTTPAddr, "batch-poller's metrics and probes", "another batch-poller"},
		{gatewayGRPCAddr, "realtime-gateway's gRPC server", "another realtime-gateway"},
		{gatewayHTTPAddr, "realtime-gateway's metrics and probes", "another realtime-gateway"},
		{omniaHTTPAddr, "omnia-controllers' metrics and probes", "another omnia-controllers"},
		{runtimeHealthAddr, "the Omnia agent pods' health port (localnode runs pods on the host network)", "an agent-controller or omnia runtime started by hand, e.g. on its default :8081"},
		{realtimePodAddr, "the realtime run pod's supervisor (localnode runs pods on the host network)", "a realtime run of another stack, e.g. a running `go test ./tests/realtime`"},
	}
	if withPrometheus {
		ps = append(ps, port{prometheusAddr, "Prometheus", "another Prometheus"})
	}
	return ps
}

// checkPorts fails on the first address of ps already in use, saying what
// the demo wants it for, what likely holds it and what to do.
func checkPorts(ps []port) error {
	for _, p := range ps {
		l, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("port %s (for %s) is in use (by %s?): stop it, or run `make demo-down` if an earlier demo is still up (%w)", p.addr, p.what, p.suspect, err)
		}
		if err := l.Close(); err != nil {
			return err
		}
	}
	return nil
}
