package agentruntime

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
)

// This file routes a reaped agent's Service to the activator
// (docs/omnia-controllers.md, "Waking on the next session"). While the
// idle deadline holds the agent at zero replicas, its Service loses its
// selector (its ClusterIP, and so every client's address, stays) and an
// EndpointSlice the agent owns points the Service's ports at the
// activator, which wakes the agent on the first request and proxies it
// once a pod is Ready. The selector comes back, and the slice goes, once
// one of the agent's pods is Ready.

const (
	// ActivatorManagedBy is the endpointslice.kubernetes.io/managed-by
	// value of the activator EndpointSlices, so the cluster's
	// EndpointSlice controller leaves them alone.
	ActivatorManagedBy = kubeutil.ActivatorSliceManagedBy
	// DefaultActivatorPort is --activator-port's default.
	DefaultActivatorPort = 8082
	// kubeSliceController is the managed-by value of the slices the
	// cluster's EndpointSlice controller writes for a Service with a
	// selector. It stops syncing them when the selector goes, so what
	// they hold then is stale.
	kubeSliceController = "endpointslice-controller.k8s.io"
)

// ActivatorSliceName names the agent's activator EndpointSlice. The
// cluster's EndpointSlice controller names its slices with a generated
// suffix, so this name is never one of them.
func ActivatorSliceName(agent string) string { return agent + "-activator" }

// ActivatorSliceLabels label the activator EndpointSlice: the Service it
// serves and who manages it (the cache keeps only slices of this
// manager, kubeutil.ApplyCacheOptions).
func ActivatorSliceLabels(agent string) map[string]string {
	l := objectLabels(agent)
	l[discoveryv1.LabelServiceName] = agent
	l[discoveryv1.LabelManagedBy] = ActivatorManagedBy
	return l
}

// routeToActivator is the routing rule: with an activator configured, a
// Service is routed to it while the idle deadline holds the agent at zero
// (held), and stays routed after a wake (routed: the activator slice
// exists) until one of the agent's pods is Ready, so the sessions that
// arrive meanwhile wait at the activator instead of finding no endpoint.
// Without an activator, nothing is routed: the Service keeps its
// selector and only the wake annotation wakes a reaped agent.
func routeToActivator(cfg Config, held, routed bool, ready int32) bool {
	if cfg.ActivatorAddress == "" {
		return false
	}
	return held || (routed && ready == 0)
}

// BuildActivatorSlice returns the EndpointSlice that routes the agent's
// Service (svc, as built) to the activator: one endpoint, the
// activator's address, Ready, with a port of each of the Service's
// names, all the activator's port (the activator tells them apart by the
// request's Host). It fails on an address that is not an IP, or a
// loopback or unspecified one.
func BuildActivatorSlice(a *omniav1.AgentRuntime, svc *corev1.Service, cfg Config) (*discoveryv1.EndpointSlice, error) {
	ip := net.ParseIP(cfg.ActivatorAddress)
	if ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		// The API server refuses loopback endpoints, and no other pod
		// could reach them.
		return nil, fmt.Errorf("activator address %q is not a pod IP address", cfg.ActivatorAddress)
	}
	family := discoveryv1.AddressTypeIPv6
	if ip.To4() != nil {
		family = discoveryv1.AddressTypeIPv4
	}
	port := cfg.ActivatorPort
	if port == 0 {
		port = DefaultActivatorPort
	}
	var ports []discoveryv1.EndpointPort
	for _, p := range svc.Spec.Ports {
		ports = append(ports, discoveryv1.EndpointPort{Name: ptr(p.Name), Port: ptr(port), Protocol: ptr(corev1.ProtocolTCP), AppProtocol: p.AppProtocol})
	}
	return &discoveryv1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta:  metav1.ObjectMeta{Name: ActivatorSliceName(a.Name), Namespace: a.Namespace, Labels: ActivatorSliceLabels(a.Name)},
		AddressType: family,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{ip.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
		}},
		Ports: ports,
	}, nil
}

// routed reports whether the agent's Service is routed to the activator
// now: its activator slice exists and the agent controls it.
func (d *decider) routed() bool {
	o := d.s.live.activatorSlice.obj
	return o != nil && d.controls(o)
}

// routeService plans the Service write and, when route, the activator
// slice before it (so the Service never goes without an endpoint) and,
// once the selector is gone, the delete of the stale slices the
// cluster's EndpointSlice controller left; without route, the Service
// write (its selector back) and then the slice's delete. It returns the
// ServiceReady message.
func (d *decider) routeService(svc *corev1.Service, route bool) (string, error) {
	a := d.s.in.Agent
	if !route {
		if err := d.service(svc); err != nil {
			return "", err
		}
		live := d.s.live.activatorSlice
		if live.err != nil {
			return "", live.err
		}
		if d.routed() {
			if o := d.do(write{op: opDelete, obj: live.obj.DeepCopy()}); client.IgnoreNotFound(o.err) != nil {
				return "", fmt.Errorf("delete EndpointSlice %s/%s: %w", a.Namespace, live.obj.Name, o.err)
			}
		}
		msg := "Service " + svc.Name
		if d.s.cfg.ActivatorAddress == "" && meta.IsStatusConditionTrue(d.st.Conditions, omniav1.ConditionIdle) {
			msg += "; no activator is configured, so only the " + omniav1.AnnotationWakeRequestedAt + " annotation wakes the agent"
		}
		return msg, nil
	}
	want, err := BuildActivatorSlice(a, svc, d.s.cfg)
	if err != nil {
		return "", err
	}
	if err := d.activatorSlice(want); err != nil {
		return "", err
	}
	svc.Spec.Selector = nil
	if err := d.service(svc); err != nil {
		return "", err
	}
	sl := d.s.slices
	if sl == nil {
		d.p.ask = &question{slices: svc.Name}
		return "", nil
	}
	if sl.err != nil {
		return "", fmt.Errorf("list EndpointSlices of Service %s/%s: %w", a.Namespace, svc.Name, sl.err)
	}
	for i := range sl.items {
		s := &sl.items[i]
		if s.Labels[discoveryv1.LabelManagedBy] != kubeSliceController {
			continue
		}
		// The UID guards against deleting a slice that replaced this one.
		uid := s.UID
		if o := d.do(write{op: opDelete, obj: s.DeepCopy(), preconditions: &metav1.Preconditions{UID: &uid}}); client.IgnoreNotFound(o.err) != nil {
			return "", fmt.Errorf("delete stale EndpointSlice %s/%s: %w", a.Namespace, s.Name, o.err)
		}
	}
	return fmt.Sprintf("Service %s routed to the activator at %s until a replica is ready",
		svc.Name, net.JoinHostPort(want.Endpoints[0].Addresses[0], fmt.Sprint(*want.Ports[0].Port))), nil
}

// activatorSlice plans the create or repair of the activator slice. An
// address family change needs a new slice (the field is immutable): the
// old one is deleted and the next pass creates it.
func (d *decider) activatorSlice(want *discoveryv1.EndpointSlice) error {
	live := d.s.live.activatorSlice
	if live.obj != nil && d.controls(live.obj) && live.obj.AddressType != want.AddressType {
		if o := d.do(write{op: opDelete, obj: live.obj.DeepCopy()}); client.IgnoreNotFound(o.err) != nil {
			return fmt.Errorf("delete EndpointSlice %s/%s: %w", live.obj.Namespace, live.obj.Name, o.err)
		}
		return nil
	}
	drifted := live.obj != nil && (!equality.Semantic.DeepEqual(live.obj.Endpoints, want.Endpoints) || !equality.Semantic.DeepEqual(live.obj.Ports, want.Ports))
	return d.keepOwned(want, struct {
		AddressType discoveryv1.AddressType
		Endpoints   []discoveryv1.Endpoint
		Ports       []discoveryv1.EndpointPort
	}{want.AddressType, want.Endpoints, want.Ports}, liveOf(live), drifted, func(upd client.Object) {
		s := upd.(*discoveryv1.EndpointSlice)
		s.Endpoints, s.Ports = want.Endpoints, want.Ports
	})
}

// NeedsWake reports whether a request for a reaped agent should set its
// wake annotation: the agent is held at zero (Idle=True) and the
// controller has acted on the annotation's current value already (the
// wake mark of the condition matches it). False once a wake is pending,
// so the activator never writes twice for one wake.
func NeedsWake(a *omniav1.AgentRuntime) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, omniav1.ConditionIdle)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration >= a.Generation && markIn(c.Message) == wakeMark(a.Annotations)
}
