package agentruntime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// This file builds and applies the KEDA ScaledObject of an agent whose
// effective autoscaling policy has type keda (docs/omnia-controllers.md,
// "KEDA"). KEDA's CRDs are optional: the binary does not link KEDA's Go
// module and writes the ScaledObject as an unstructured object, and a
// control plane without the kind gets AutoscalingReady=False/
// KEDANotInstalled instead of a failing manager.

// ScaledObjectGVK is the KEDA kind the controller writes.
var ScaledObjectGVK = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}

// KEDA defaults, as the AutoscalingConfig API documents them.
const (
	// DefaultKEDAPollingInterval is keda.pollingInterval when unset, in
	// seconds.
	DefaultKEDAPollingInterval = 30
	// DefaultKEDACooldownPeriod is keda.cooldownPeriod when unset, in
	// seconds.
	DefaultKEDACooldownPeriod = 300
	// DefaultKEDAConnectionThreshold is keda.connectionThreshold when
	// unset: the active connections per replica of the default trigger.
	DefaultKEDAConnectionThreshold = 200
	// ConnectionsMetric is the gauge of an agent's open connections that
	// the default trigger sums, labelled namespace and agent.
	ConnectionsMetric = "omnia_agent_connections_active"
)

// kedaRecheck is how often an agent that asks for KEDA on a control plane
// without KEDA's CRD looks again. Installing KEDA is an operator's rare,
// deliberate act, so a long interval costs little; a watch on
// CustomResourceDefinitions would need cluster-wide read access to every
// CRD (and cache them all) for that one event.
const kedaRecheck = 10 * time.Minute

// ScaledObjectSpec is the part of a ScaledObject's spec the controller
// owns, in KEDA's field names (keda.sh/v1alpha1).
type ScaledObjectSpec struct {
	ScaleTargetRef  ScaleTargetRef `json:"scaleTargetRef"`
	MinReplicaCount int32          `json:"minReplicaCount"`
	MaxReplicaCount int32          `json:"maxReplicaCount"`
	PollingInterval int32          `json:"pollingInterval"`
	CooldownPeriod  int32          `json:"cooldownPeriod"`
	Triggers        []KEDATrigger  `json:"triggers"`
}

// ScaleTargetRef names the Deployment KEDA scales.
type ScaleTargetRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// KEDATrigger is one KEDA scaler of the ScaledObject.
type KEDATrigger struct {
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata"`
}

// errNoKEDATrigger: the spec gives no trigger and the operator has no
// Prometheus for the default one.
var errNoKEDATrigger = errors.New("autoscaling type keda has no keda.triggers, and the default trigger (the agent's active connections in Prometheus) needs the operator's --prometheus-url")

// kedaWanted reports whether the agent's effective autoscaling policy asks
// for a KEDA ScaledObject.
func kedaWanted(in Inputs) bool {
	as := EffectiveAutoscaling(in)
	return as != nil && as.Enabled && as.Type == omniav1.AutoscalerKEDA
}

// BuildScaledObjectSpec returns the ScaledObject spec of the agent's
// effective keda policy: min and max replicas (default 1 and 100; KEDA
// may scale to 0), pollingInterval and cooldownPeriod (default 30 s and
// 300 s) and the spec's triggers. Without triggers, one prometheus
// trigger on the agent's open connections (ConnectionsMetric) against
// prometheusURL, at keda.connectionThreshold per replica (default 200);
// errNoKEDATrigger when prometheusURL is empty too.
func BuildScaledObjectSpec(in Inputs, prometheusURL string) (ScaledObjectSpec, error) {
	a := in.Agent
	as := EffectiveAutoscaling(in)
	or := func(p *int32, def int32) int32 {
		if p != nil {
			return *p
		}
		return def
	}
	k := as.KEDA
	if k == nil {
		k = &omniav1.KEDAConfig{}
	}
	spec := ScaledObjectSpec{
		ScaleTargetRef:  ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: a.Name},
		MinReplicaCount: or(as.MinReplicas, 1),
		MaxReplicaCount: or(as.MaxReplicas, 100),
		PollingInterval: or(k.PollingInterval, DefaultKEDAPollingInterval),
		CooldownPeriod:  or(k.CooldownPeriod, DefaultKEDACooldownPeriod),
	}
	for _, t := range k.Triggers {
		md := make(map[string]string, len(t.Metadata))
		for key, v := range t.Metadata {
			md[key] = v
		}
		spec.Triggers = append(spec.Triggers, KEDATrigger{Type: t.Type, Metadata: md})
	}
	if len(spec.Triggers) > 0 {
		return spec, nil
	}
	if prometheusURL == "" {
		return spec, errNoKEDATrigger
	}
	spec.Triggers = []KEDATrigger{{Type: "prometheus", Metadata: map[string]string{
		"serverAddress": prometheusURL,
		"query":         fmt.Sprintf(`sum(%s{namespace="%s",agent="%s"})`, ConnectionsMetric, a.Namespace, a.Name),
		"threshold":     strconv.Itoa(int(or(k.ConnectionThreshold, DefaultKEDAConnectionThreshold))),
	}}}
	return spec, nil
}

// buildScaledObject returns the desired ScaledObject with spec as its
// spec, unstructured.
func buildScaledObject(a *omniav1.AgentRuntime, spec ScaledObjectSpec) (*unstructured.Unstructured, error) {
	m, err := specMap(spec)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": m}}
	u.SetGroupVersionKind(ScaledObjectGVK)
	u.SetNamespace(a.Namespace)
	u.SetName(a.Name)
	u.SetLabels(objectLabels(a.Name))
	return u, nil
}

// specMap is spec as unstructured content (numbers as int64, as the
// client decodes them).
func specMap(spec ScaledObjectSpec) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
}

// scaledObjectDrifted reports whether the live ScaledObject no longer
// carries what the controller owns: its labels and spec (covers: KEDA's
// and the API server's additions are not drift).
func scaledObjectDrifted(want ScaledObjectSpec, wantLabels map[string]string, live *unstructured.Unstructured) bool {
	return !labelsCovered(wantLabels, live.GetLabels()) || !covers(want, live.Object["spec"])
}

// scaledObject plans the write of the agent's ScaledObject and sets
// AutoscalingReady; it returns the pass's timer (the recheck while KEDA is
// not installed) and the error to retry with backoff. Called once
// kedaWanted holds.
func (d *decider) scaledObject() (time.Duration, error) {
	a := d.s.in.Agent
	set := func(status metav1.ConditionStatus, reason, msg string) {
		d.set(omniav1.ConditionAutoscalingReady, status, reason, msg)
	}
	if !d.s.kedaServed {
		// Not an error: a retry with backoff would find the same API
		// server; the recheck notices KEDA once it is installed.
		set(metav1.ConditionFalse, omniav1.ReasonKEDANotInstalled, fmt.Sprintf(
			"the API server serves no keda.sh/v1alpha1 ScaledObject; install KEDA (looked again every %s)", kedaRecheck))
		return kedaRecheck, nil
	}
	spec, err := BuildScaledObjectSpec(d.s.in, d.s.cfg.PrometheusURL)
	if err != nil {
		// A spec or operator configuration problem: wait for an edit.
		set(metav1.ConditionFalse, omniav1.ReasonKEDANoTrigger, err.Error())
		return 0, nil
	}
	want, err := buildScaledObject(a, spec)
	if err != nil {
		set(metav1.ConditionFalse, omniav1.ReasonAutoscalingError, err.Error())
		return 0, err
	}
	h := d.own(want, spec)
	live := d.s.live.scaledObject
	fail := func(err error) (time.Duration, error) {
		err = fmt.Errorf("write ScaledObject %s/%s: %w", a.Namespace, a.Name, err)
		set(metav1.ConditionFalse, omniav1.ReasonAutoscalingError, err.Error())
		return 0, err
	}
	switch {
	case live.err != nil:
		return fail(live.err)
	case live.obj == nil:
		err = d.do(write{op: opCreate, obj: want}).err
	case !d.controls(live.obj):
		err := fmt.Errorf("ScaledObject %s/%s exists and is not controlled by this AgentRuntime", a.Namespace, a.Name)
		set(metav1.ConditionFalse, omniav1.ReasonAutoscalerNotOwned, err.Error())
		return 0, err
	case live.obj.GetAnnotations()[AnnotationAppliedHash] != h || scaledObjectDrifted(spec, want.GetLabels(), live.obj):
		upd := live.obj.DeepCopy()
		upd.SetLabels(mergeMap(upd.GetLabels(), want.GetLabels()))
		upd.SetAnnotations(mergeMap(upd.GetAnnotations(), want.GetAnnotations()))
		upd.SetOwnerReferences(want.GetOwnerReferences())
		upd.Object["spec"] = want.Object["spec"]
		err = d.do(write{op: opUpdate, obj: upd}).err
	}
	if err != nil {
		return fail(err)
	}
	set(metav1.ConditionTrue, omniav1.ReasonScaling, fmt.Sprintf("ScaledObject %s scales %d to %d replicas", a.Name, spec.MinReplicaCount, spec.MaxReplicaCount))
	return 0, nil
}

// dropScaledObject plans the removal of the agent's ScaledObject when its
// policy no longer asks for KEDA (hpa, or autoscaling off).
func (d *decider) dropScaledObject() error {
	live := d.s.live.scaledObject
	if live.err != nil {
		return live.err
	}
	if live.obj == nil || !d.controls(live.obj) {
		return nil
	}
	if o := d.do(write{op: opDelete, obj: live.obj.DeepCopy()}); client.IgnoreNotFound(o.err) != nil {
		return fmt.Errorf("delete ScaledObject %s/%s: %w", live.obj.GetNamespace(), live.obj.GetName(), o.err)
	}
	return nil
}

// kedaSupport is what the reconciler knows of KEDA on its API server:
// whether it watches the agents' ScaledObjects (from the start when the
// kind was served then, else from the first pass that finds it served),
// and how to start that watch. The zero value (no manager) watches
// nothing and reads through the reconciler's client.
type kedaSupport struct {
	mu       sync.Mutex
	watching bool
	// startWatch starts the watch of owned ScaledObjects on the running
	// controller; nil when there is none.
	startWatch func() error
	// cache reads ScaledObjects from the watch's informer.
	cache client.Reader
}

// reader returns where ScaledObjects are read and whether they are
// watched.
func (k *kedaSupport) reader(fallback client.Reader) (client.Reader, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.watching && k.cache != nil {
		return k.cache, true
	}
	return fallback, k.watching
}

// watch starts the ScaledObject watch once the kind is served. A failed
// start is returned and tried again on the next pass.
func (k *kedaSupport) watch() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.watching || k.startWatch == nil {
		return nil
	}
	if err := k.startWatch(); err != nil {
		return fmt.Errorf("watch ScaledObjects: %w", err)
	}
	k.watching = true
	return nil
}

// readScaledObject reads the agent's ScaledObject and whether the API
// server serves the kind. While the kind is not watched, only an agent
// that wants KEDA asks the RESTMapper (the agents without it cannot own a
// ScaledObject: the controller writes one only once the kind is served,
// and it then watches the kind). A RESTMapper NoMatch, before or after
// the read, is "not served", never an error.
func (r *Reconciler) readScaledObject(ctx context.Context, a *omniav1.AgentRuntime, wanted bool) (found[*unstructured.Unstructured], bool, error) {
	rd, watching := r.keda.reader(r.Client)
	if !watching {
		if !wanted {
			return found[*unstructured.Unstructured]{}, false, nil
		}
		if _, err := r.Client.RESTMapper().RESTMapping(ScaledObjectGVK.GroupKind(), ScaledObjectGVK.Version); err != nil {
			if meta.IsNoMatchError(err) {
				return found[*unstructured.Unstructured]{}, false, nil
			}
			return found[*unstructured.Unstructured]{}, false, fmt.Errorf("look up the ScaledObject kind: %w", err)
		}
		if err := r.keda.watch(); err != nil {
			return found[*unstructured.Unstructured]{}, true, err
		}
		rd, _ = r.keda.reader(r.Client)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(ScaledObjectGVK)
	if err := rd.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Name}, u); err != nil {
		switch {
		case meta.IsNoMatchError(err):
			return found[*unstructured.Unstructured]{}, false, nil
		case client.IgnoreNotFound(err) == nil:
			return found[*unstructured.Unstructured]{}, true, nil
		}
		return found[*unstructured.Unstructured]{err: err}, true, nil
	}
	return found[*unstructured.Unstructured]{obj: u}, true, nil
}
