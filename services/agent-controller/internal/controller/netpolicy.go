package controller

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/runpolicy"
)

// ensureRunPolicy creates the NetworkPolicy of a's run (runpolicy.For)
// before job, so the run's pod never starts unguarded; without
// Options.RunNetworkPolicy it does nothing. A policy of that name that an
// earlier pass wrote, or that anyone wrote claiming a as its controller,
// is set back to the wanted spec. One the Agent does not control is left
// alone and the run goes on: NetworkPolicies are additive (a pod admits
// what any policy selecting it admits), so whoever may write one in the
// run's namespace can open its own run pods wider with a policy of any
// name anyway, and such a policy takes nothing from other namespaces.
// An error is worth retrying; the Job waits for the policy.
func (c *Controller) ensureRunPolicy(ctx context.Context, a *agentsv1alpha1.Agent, job *batchv1.Job) error {
	if c.opts.RunNetworkPolicy == nil {
		return nil
	}
	want := runpolicy.For(a, job, *c.opts.RunNetworkPolicy)
	policies := c.kube.NetworkingV1().NetworkPolicies(a.Namespace)
	_, err := policies.Create(ctx, want, metav1.CreateOptions{})
	switch {
	case err == nil:
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("create NetworkPolicy %s: %w", want.Name, err)
	}
	existing, err := policies.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		// Gone meanwhile, or unreadable for now: the next pass tries again.
		return fmt.Errorf("read NetworkPolicy %s, which already exists: %w", want.Name, err)
	}
	if !metav1.IsControlledBy(existing, a) {
		c.log.Info("a run's NetworkPolicy name is taken by a policy the run does not control; left alone",
			"agent", a.Namespace+"/"+a.Name, "networkPolicy", want.Name)
		return nil
	}
	if equality.Semantic.DeepEqual(existing.Spec, want.Spec) {
		return nil
	}
	existing.Spec = want.Spec
	if _, err := policies.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set NetworkPolicy %s back to the run's spec: %w", want.Name, err)
	}
	c.log.Info("set a run's NetworkPolicy back to its spec", "agent", a.Namespace+"/"+a.Name, "networkPolicy", want.Name)
	return nil
}
