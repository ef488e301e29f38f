package activator

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultClusterDomain is the cluster DNS domain a fully qualified
// Service name ends with.
const DefaultClusterDomain = "cluster.local"

// Target is what a request's Host names: a Service and the port the
// client connected to.
type Target struct {
	// Namespace and Service name the Service.
	Namespace, Service string
	// Port is the Service port: the Host's, 80 when it has none.
	Port int32
}

// errHost is every refusal of a Host; the message says what is wrong
// without repeating the Host, which is outside input.
var errHost = errors.New("the Host names no Service")

// ParseHost reads a Host (or :authority) of the forms a client in the
// cluster reaches a Service by: <svc>.<ns>, <svc>.<ns>.svc and
// <svc>.<ns>.svc.<clusterDomain>, each with an optional :port and
// trailing dot, case-insensitive. Anything else is refused, an IP
// address among them: the activator serves Services by name only.
func ParseHost(host, clusterDomain string) (Target, error) {
	if clusterDomain == "" {
		clusterDomain = DefaultClusterDomain
	}
	h, port := strings.ToLower(host), int32(80)
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		name, p, err := net.SplitHostPort(h)
		if err != nil {
			return Target{}, errHost
		}
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 || p != strconv.FormatUint(n, 10) {
			return Target{}, fmt.Errorf("%w: bad port", errHost)
		}
		h, port = name, int32(n)
	}
	h = strings.TrimSuffix(h, ".")
	labels := strings.Split(h, ".")
	if len(labels) < 2 {
		return Target{}, errHost
	}
	switch rest := strings.Join(labels[2:], "."); rest {
	case "", "svc", "svc." + strings.ToLower(strings.TrimSuffix(clusterDomain, ".")):
	default:
		return Target{}, errHost
	}
	svc, ns := labels[0], labels[1]
	if len(validation.IsDNS1123Label(svc)) > 0 || len(validation.IsDNS1123Label(ns)) > 0 {
		return Target{}, errHost
	}
	return Target{Namespace: ns, Service: svc, Port: port}, nil
}
