package agentruntime

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/kubeutil"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/oidc"
)

// maxRounds bounds the decide-and-write rounds of one pass. A round that
// does not end the pass makes at least one write or answers one question,
// and decide never plans a made write again nor asks an answered question
// (both are in the snapshot). A pass makes at most eight writes (two of
// the rollout, the tools ConfigMap, the stable Deployment, the Service,
// the HPA and the KEDA ScaledObject — one of them written, the other
// deleted —, the key mirror, the activator slice) and asks at most three
// questions (an analysis, a key set, the Service's slices), so twelve
// rounds always suffice; the rest is margin. (The stale slices a route
// deletes are writes of one round when they succeed.) A plan that does not settle within
// the bound is a bug in decide, returned as an error rather than looped on.
const maxRounds = 16

// settle runs decide over s, makes the writes each plan adds, records
// their outcomes and answers its questions, until a plan has nothing left
// to do; it returns that plan and the agent as the writes left it. A
// failed write ends its round: what comes after it depends on the failure
// (decide may fall back, record it or stop), so decide plans again. The
// writes after a successful one are made in the same round, as planned
// on the success decide assumed: no write's content depends on what an
// earlier one returned, only the status does.
func (r *Reconciler) settle(ctx context.Context, s snapshot, decide func(snapshot) plan) (plan, *omniav1.AgentRuntime, error) {
	cur := s.in.Agent.DeepCopy()
	for range maxRounds {
		p := decide(s)
		if len(s.done) < len(p.writes) {
			for _, w := range p.writes[len(s.done):] {
				o := r.write(ctx, cur, w)
				s.done = append(s.done, o)
				if o.err != nil {
					break
				}
			}
			// Even when every write succeeded: the API server's answers
			// (a created Deployment's defaults) feed the status.
			continue
		}
		if p.ask != nil {
			r.answer(ctx, &s, p.ask)
			continue
		}
		return p, cur, nil
	}
	a := s.in.Agent
	return plan{}, cur, fmt.Errorf("AgentRuntime %s/%s: the pass did not settle in %d rounds of writes", a.Namespace, a.Name, maxRounds)
}

// write makes one write. Writes to the agent go onto cur, the agent as
// the pass last wrote it, so they carry its current resourceVersion, and
// cur follows each one that succeeds. The error is returned as the API
// server gave it: decide says what it means.
func (r *Reconciler) write(ctx context.Context, cur *omniav1.AgentRuntime, w write) outcome {
	var err error
	switch w.op {
	case opCreate:
		err = r.Client.Create(ctx, w.obj)
	case opUpdate:
		err = r.Client.Update(ctx, w.obj)
	case opDelete:
		var opts []client.DeleteOption
		if w.preconditions != nil {
			opts = append(opts, client.Preconditions(*w.preconditions))
		}
		if w.background {
			opts = append(opts, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}
		err = r.Client.Delete(ctx, w.obj, opts...)
	case opUpdateAgent:
		upd := cur.DeepCopy()
		want := w.obj.(*omniav1.AgentRuntime)
		upd.Spec, upd.Annotations = *want.Spec.DeepCopy(), want.DeepCopy().Annotations
		if err = r.Client.Update(ctx, upd); err == nil {
			r.superseded.Wrote(upd, cur.ResourceVersion)
			*cur = *upd
		}
	case opRecordStatus:
		upd := cur.DeepCopy()
		upd.Status = *w.obj.(*omniav1.AgentRuntime).Status.DeepCopy()
		if err = r.Client.Status().Update(ctx, upd); err == nil {
			r.superseded.Wrote(upd, cur.ResourceVersion)
			*cur = *upd
		}
	default:
		err = fmt.Errorf("unknown write %v", w.op)
	}
	return outcome{obj: w.obj, err: err}
}

// answer answers one of decide's questions into s.
func (r *Reconciler) answer(ctx context.Context, s *snapshot, q *question) {
	switch {
	case q.analysis != nil:
		s.analysis = r.runAnalysis(ctx, s.in.Agent, q.analysis)
	case q.slices != "":
		s.slices = r.listSlices(ctx, s.in.Agent.Namespace, q.slices)
	default:
		f := r.JWKSFetcher
		if f == nil {
			f = &oidc.Fetcher{}
		}
		jwks, err := f.FetchJWKS(ctx, q.issuer)
		s.keySet = &keySetAnswer{jwks: jwks}
		if err != nil {
			s.keySet = &keySetAnswer{failure: err.Error()}
		}
	}
}

// finish emits the settled plan's events and log lines, writes its
// status, and returns what the pass returns.
func (r *Reconciler) finish(ctx context.Context, cur *omniav1.AgentRuntime, p plan) (reconcile.Result, error) {
	for _, e := range p.events {
		kubeutil.Emit(r.Recorder, cur, e.action, []kubeutil.Event{e.Event})
	}
	for _, l := range p.logs {
		log.FromContext(ctx).Error(l.err, l.msg)
	}
	var statusErr error
	if p.status != nil {
		statusErr = r.writeStatus(ctx, cur, p.status)
	}
	err := p.err
	switch {
	case statusErr != nil && err != nil:
		err = joinStatus(err, statusErr)
	case statusErr != nil:
		err = statusErr
	case err == nil:
		err = p.retry
	}
	return reconcile.Result{RequeueAfter: p.requeueAfter}, err
}

// listSlices lists the EndpointSlices of Service svc from the API server.
func (r *Reconciler) listSlices(ctx context.Context, ns, svc string) *slicesAnswer {
	rd := r.Reader
	if rd == nil {
		rd = r.Client
	}
	var l discoveryv1.EndpointSliceList
	err := rd.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc})
	return &slicesAnswer{items: l.Items, err: err}
}
