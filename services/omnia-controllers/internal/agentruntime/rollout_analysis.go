package agentruntime

import (
	"context"
	"errors"
	"fmt"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// errNoPrometheus holds an analysis step when the operator was started
// without a Prometheus address.
var errNoPrometheus = errors.New("the operator has no Prometheus configured (--prometheus-url)")

// runAnalysis runs one analysis step: it reads the RolloutAnalysis from the
// agent's namespace, fills in its query and judges the query's result.
// Every failure to run is an outcome with Err, never a reconcile error:
// the step holds and retries on its own timer.
func (r *Reconciler) runAnalysis(ctx context.Context, a *omniav1.AgentRuntime, step *omniav1.RolloutAnalysisStep) *rollout.AnalysisOutcome {
	fail := func(err error) *rollout.AnalysisOutcome { return &rollout.AnalysisOutcome{Err: err} }
	if r.Metrics == nil {
		return fail(errNoPrometheus)
	}
	tmpl := &omniav1.RolloutAnalysis{}
	found, err := r.get(ctx, a.Namespace, step.TemplateName, tmpl)
	if err != nil {
		return fail(err)
	}
	if !found {
		return fail(fmt.Errorf("RolloutAnalysis %q not found", step.TemplateName))
	}
	query, cond, err := rollout.Prepare(tmpl.Spec, step)
	if err != nil {
		return fail(err)
	}
	result, err := r.Metrics.Query(ctx, query)
	o := rollout.Judge(cond, result, err)
	return &o
}
