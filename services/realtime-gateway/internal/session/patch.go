// Package session records a realtime run's vendor session id in the
// Agent's status.sessionId — the one status field the gateway owns.
package session

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// attempts bounds the retries after a conflict: the Agent changes often
// while Running, but a third conflict in a row means something else is
// racing for the field and the next prompt will try again.
const attempts = 3

// Patcher writes status.sessionId.
type Patcher struct{ c client.Client }

// NewPatcher patches through c (a direct, uncached client).
func NewPatcher(c client.Client) *Patcher { return &Patcher{c: c} }

// Record sets status.sessionId of a to id unless it already is. Each write
// is a merge patch carrying a's resourceVersion, so it applies only to the
// Agent as last read; on a conflict the Agent is read again and the write
// retried while the id still differs and the run has not finished (a
// finished run's id is the controller's, read from the pod log). It
// returns whether it wrote.
func (p *Patcher) Record(ctx context.Context, a *agentsv1alpha1.Agent, id string) (bool, error) {
	cur := a
	for i := 0; ; i++ {
		if id == "" || cur.Status.SessionID == id || cur.IsTerminal() {
			return false, nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": cur.ResourceVersion},
			"status":   map[string]any{"sessionId": id},
		})
		if err != nil {
			return false, err
		}
		obj := cur.DeepCopy()
		err = p.c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) || i+1 >= attempts {
			return false, fmt.Errorf("patch status.sessionId of Agent %s/%s: %w", a.Namespace, a.Name, err)
		}
		fresh := &agentsv1alpha1.Agent{}
		if err := p.c.Get(ctx, client.ObjectKeyFromObject(a), fresh); err != nil {
			return false, fmt.Errorf("re-read Agent %s/%s after a conflict: %w", a.Namespace, a.Name, err)
		}
		cur = fresh
	}
}
