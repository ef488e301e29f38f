package rollout

import (
	"math"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Routing is the traffic routing in effect for a rollout.
type Routing struct {
	// Mode is the mode in effect; "" when spec.rollout.trafficRouting is
	// unset, and then no weighting happens at all.
	Mode omniav1.TrafficRoutingMode
	// Enforced says the weight is exact; replica weighting only
	// approximates it.
	Enforced bool
	// Degraded says why the requested mode fell back to replicaWeighted;
	// "" when it did not.
	Degraded string
}

// ResolveRouting decides the routing mode. This operator drives no service
// mesh and patches no Istio objects, so mesh and external requests (and an
// unset mode, which would prefer them) fall back to replica weighting, and
// the fallback is reported rather than silent.
func ResolveRouting(cfg *omniav1.TrafficRoutingConfig) Routing {
	if cfg == nil {
		return Routing{}
	}
	rw := Routing{Mode: omniav1.TrafficRoutingReplicaWeighted}
	switch {
	case cfg.Mode == omniav1.TrafficRoutingMesh:
		rw.Degraded = "trafficRouting mode mesh needs a service mesh, and none is available; weighting by replicas"
	case cfg.Mode == omniav1.TrafficRoutingExternal || cfg.Mode == "" && cfg.Istio != nil:
		rw.Degraded = "trafficRouting mode external needs Istio VirtualServices, which this cluster does not serve; weighting by replicas"
	}
	return rw
}

// Split divides total replicas (at least 1) for a candidate weight in
// percent and returns the delivered weight: the share of replicas the
// candidate actually got. Below two replicas the split is all or nothing,
// the candidate taking the single replica from 50% on.
func Split(total, weight int32) (stable, candidate, delivered int32) {
	total = max(total, 1)
	weight = min(max(weight, 0), 100)
	if total < 2 {
		if weight >= 50 {
			return 0, 1, 100
		}
		return 1, 0, 0
	}
	candidate = int32(math.Round(float64(total) * float64(weight) / 100))
	delivered = int32(math.Round(float64(candidate) / float64(total) * 100))
	return total - candidate, candidate, delivered
}

// Replicas is how many replicas each Deployment runs during a rollout.
type Replicas struct {
	// Stable replaces the stable Deployment's count; nil keeps it as
	// built.
	Stable *int32
	// Candidate replaces the candidate's count; nil keeps it as built.
	Candidate *int32
	// Weight is the weight to record in status.rollout.currentWeight.
	Weight int32
}

// PlanReplicas applies a weight under the routing in effect. total is
// runtime.replicas (1 when unset). An autoscaled stable Deployment keeps
// the count its HorizontalPodAutoscaler sets: writing ours would fight it.
func PlanReplicas(r Routing, total, weight int32, autoscaled bool) Replicas {
	if r.Mode != omniav1.TrafficRoutingReplicaWeighted {
		// Nothing to weight (or a mesh would do it): both variants run in
		// full behind the one Service.
		return Replicas{Weight: weight}
	}
	s, c, delivered := Split(total, weight)
	out := Replicas{Candidate: ptr(c), Weight: delivered}
	if !autoscaled {
		out.Stable = ptr(s)
	}
	return out
}
