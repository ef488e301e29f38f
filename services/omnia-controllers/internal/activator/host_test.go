package activator

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestParseHost has a case per form a Host may take.
func TestParseHost(t *testing.T) {
	ok := func(ns, svc string, port int32) *Target { return &Target{Namespace: ns, Service: svc, Port: port} }
	cases := []struct {
		name, host string
		want       *Target // nil: refused
	}{
		{"the short form names the Service", "agent.team", ok("team", "agent", 80)},
		{"the .svc form names the Service", "agent.team.svc:8080", ok("team", "agent", 8080)},
		{"the fully qualified form names the Service", "agent.team.svc.cluster.local:8080", ok("team", "agent", 8080)},
		{"a trailing dot is the same name", "agent.team.svc.cluster.local.:9000", ok("team", "agent", 9000)},
		{"names are case-insensitive", "Agent.TEAM.svc", ok("team", "agent", 80)},
		{"no port means port 80", "agent.team.svc.cluster.local", ok("team", "agent", 80)},
		{"another cluster domain is refused", "agent.team.svc.example.org", nil},
		{"a name outside .svc is refused", "agent.team.example:80", nil},
		{"a bare name is refused: it has no namespace", "agent:8080", nil},
		{"an IPv4 address is refused", "10.0.0.7:8080", nil},
		{"an IPv6 address is refused", "[::1]:8080", nil},
		{"port 0 is refused", "agent.team.svc:0", nil},
		{"a port past 65535 is refused", "agent.team.svc:65536", nil},
		{"a port with a sign is refused", "agent.team.svc:+80", nil},
		{"a port with a leading zero is refused", "agent.team.svc:080", nil},
		{"an empty port is refused", "agent.team.svc:", nil},
		{"an invalid label is refused", "ag_ent.team.svc", nil},
		{"an empty label is refused", ".team.svc", nil},
		{"the empty Host is refused", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseHost(tc.host, "")
			switch {
			case tc.want == nil && err == nil:
				t.Errorf("ParseHost(%q) = %+v; want a refusal", tc.host, got)
			case tc.want != nil && err != nil:
				t.Errorf("ParseHost(%q): %v", tc.host, err)
			case tc.want != nil && got != *tc.want:
				t.Errorf("ParseHost(%q) = %+v; want %+v", tc.host, got, *tc.want)
			}
		})
	}
}

// FuzzParseHost: no Host panics the parser, and what it accepts is a
// valid Service name and port that parses back to itself.
func FuzzParseHost(f *testing.F) {
	for _, s := range []string{"agent.team", "agent.team.svc:8080", "agent.team.svc.cluster.local.:1", "[::1]:80", "a.b.svc:65535", "A.B.SVC.CLUSTER.LOCAL", ":", "a.b:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		got, err := ParseHost(host, "")
		if err != nil {
			return
		}
		if len(validation.IsDNS1123Label(got.Service)) > 0 || len(validation.IsDNS1123Label(got.Namespace)) > 0 || got.Port < 1 {
			t.Fatalf("ParseHost(%q) = %+v: not a Service and port", host, got)
		}
		again, err := ParseHost(got.Service+"."+got.Namespace+".svc:"+strconv.Itoa(int(got.Port)), "")
		if err != nil || again != got {
			t.Fatalf("ParseHost(%q) = %+v, which does not parse back (%+v, %v)", host, got, again, err)
		}
		if !strings.Contains(strings.ToLower(host), got.Service) {
			t.Fatalf("ParseHost(%q) = %+v: a Service the Host does not name", host, got)
		}
	})
}
