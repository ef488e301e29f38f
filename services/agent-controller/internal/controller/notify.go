package controller

import (
	"context"
	"encoding/json"
	"io"
	"time"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/libs/sinks"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/decision"
	"github.com/agentplane/agentplane/services/agent-controller/internal/runevents"
)

// notifyTimeout bounds how long one notice's delivery may take, retries
// to slow sinks included.
const notifyTimeout = time.Minute

// notify sends notice n's events for batch run a (its status just patched)
// to the definition's sinks and to the platform stream. It is called only
// after the patch that made the notice due succeeded, so each notice goes
// out at most once: a pass that lost the patch race sends nothing, and a
// new leader finds the transition already made. Delivery runs off the
// worker, so a slow sink never holds up reconciles.
func (c *Controller) notify(ctx context.Context, n decision.Notice, a *agentsv1alpha1.Agent, def *agentsv1alpha1.AgentDefinition, lines []string) {
	if n == decision.NoticeNone {
		return
	}
	evs := runevents.Batch(n, a, a.EffectiveModel(def), lines)
	if len(evs) == 0 {
		return
	}
	c.notices.Add(1)
	go func() {
		defer c.notices.Done()
		// Delivery outlives the reconcile pass that decided it: the run's
		// terminal events still go out when the pass's context ends.
		c.deliver(context.WithoutCancel(ctx), a, def, evs)
	}()
}

func (c *Controller) deliver(ctx context.Context, a *agentsv1alpha1.Agent, def *agentsv1alpha1.AgentDefinition, evs []*eventsv1.RunEvent) {
	var cfgs []sinks.Config
	var sel sinks.Select
	if def != nil && def.Spec.Output != nil {
		out := def.Spec.Output
		for _, s := range out.Sinks {
			// Admission refuses file sinks and header secrets for batch
			// runs (decision.ValidateBatch); stdout has no pod log here.
			if s.Type == agentsv1alpha1.SinkType(sinks.TypeHTTP) || s.Type == agentsv1alpha1.SinkType(sinks.TypeNATS) {
				cfgs = append(cfgs, sinks.Config{Type: string(s.Type), URL: s.URL})
			}
		}
		if len(out.Select) > 0 {
			raw, _ := json.Marshal(out.Select)
			sel, _ = sinks.ParseSelect(raw)
		}
	}
	set, err := sinks.Build(cfgs, sinks.BuildOptions{
		Getenv: func(string) string { return "" }, Stdout: io.Discard, Publisher: c.opts.Events,
		Select: sel, Logger: c.log,
	})
	if err != nil {
		c.log.Warn("some output sinks of a batch run could not be built", "agent", a.Namespace+"/"+a.Name, "err", err)
	}
	_ = set.DeliverAll(evs) // drops are counted and refusals logged by the set
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	if err := set.Close(ctx); err != nil {
		c.log.Warn("not every batch run event reached its sinks", "agent", a.Namespace+"/"+a.Name, "err", err)
	}
}
