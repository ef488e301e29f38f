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

// demoPorts are every address `demo up` binds on the host: the control
// plane's and localnode's, and Prometheus's when the demo starts one. The
// platform itself runs in pods, each on an address of its own.
func demoPorts(withPrometheus bool) []port {
	ps := []port{
		{loopback(apiServerPort), "kube-apiserver", "another kube-apiserver, e.g. `make kubestack-up`"},
		{loopback(etcdPort), "etcd's clients", "another etcd"},
		{loopback(etcdPort + 1), "etcd's peers", "another etcd"},
		{loopback(controllerManagerPort), "kube-controller-manager", "another kube-controller-manager"},
		{loopback(kubeletPort), "localnode's kubelet endpoint", "a kubelet or another localnode"},
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
