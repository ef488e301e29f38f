package main

import (
	"net"
	"strings"
	"testing"
)

// TestABusyPortIsNamedWithTheRemedy binds a port first, as another program
// would, and wants the demo to refuse to start with the address, what the
// demo needs it for, the likely culprit and the way out.
func TestABusyPortIsNamedWithTheRemedy(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	_ = free.Close()
	busy := port{held.Addr().String(), "Prometheus", "another Prometheus"}
	idle := port{freeAddr, "NATS", "another NATS server"}

	cases := []struct {
		rule  string
		ports []port
		want  []string // empty: no error
	}{
		{"free ports pass", []port{idle}, nil},
		{"a busy port fails with its address, its use, the suspect and what to do", []port{idle, busy},
			[]string{"port " + busy.addr + " (for Prometheus) is in use (by another Prometheus?)", "stop it, or run `make demo-down` if an earlier demo is still up"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			err := checkPorts(c.ports)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("want no error, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("a busy port was not reported")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestTheDemoChecksEveryPortItBinds: the list checked up front holds each
// address the demo or its control plane binds on the host, each with a
// suspect, and nothing else: the platform runs in pods with addresses of
// their own, so a port the host no longer gives it must not stop the demo.
func TestTheDemoChecksEveryPortItBinds(t *testing.T) {
	cases := []struct {
		rule       string
		prometheus bool
		want       []string
	}{
		{"with Prometheus: the control plane's, localnode's and Prometheus's ports", true,
			[]string{"127.0.0.1:6443", "127.0.0.1:2379", "127.0.0.1:2380", "127.0.0.1:10257", "127.0.0.1:10250", prometheusAddr}},
		{"without Prometheus: its port is not checked", false,
			[]string{"127.0.0.1:6443", "127.0.0.1:2379", "127.0.0.1:2380", "127.0.0.1:10257", "127.0.0.1:10250"}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			got := map[string]port{}
			for _, p := range demoPorts(c.prometheus) {
				got[p.addr] = p
			}
			for _, addr := range c.want {
				p, ok := got[addr]
				if !ok {
					t.Errorf("%s is not checked before the demo starts", addr)
					continue
				}
				if p.what == "" || p.suspect == "" {
					t.Errorf("%s has no use or suspect: %+v", addr, p)
				}
				delete(got, addr)
			}
			for addr, p := range got {
				t.Errorf("%s (%s) is checked, but the demo does not bind it on the host", addr, p.what)
			}
		})
	}
}
