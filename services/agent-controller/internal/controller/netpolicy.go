package controller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	"github.com/agentplane/agentplane/services/agent-controller/internal/runpolicy"
)

// ensureRunPolicy makes sure the namespace policy that guards the pod of
// job (runpolicy.For) exists as built, before job is created, so the
// run's pod never starts unguarded; without Options.RunNetworkPolicy it
// does nothing. A policy found under the name, whoever wrote it, is set
// back to the controller's spec: the name is the controller's.
//
// The policy is read again at most once a poll interval per namespace
// (runPolicies holds when it was last found as built), so a burst of runs
// costs no request for it, and one deleted or rewritten by a namespace
// user is restored at the first start after that. Such a user could as
// well open the run pods with a policy of another name: policies add up.
// An error is worth retrying; the Job waits for the policy.
func (c *Controller) ensureRunPolicy(ctx context.Context, a *agentsv1alpha1.Agent, job *batchv1.Job) error {
	if c.opts.RunNetworkPolicy == nil {
		return nil
	}
	want := runpolicy.For(a.Namespace, job, *c.opts.RunNetworkPolicy)
	key := want.Namespace + "/" + want.Name
	now := c.opts.Now()
	if at, ok := c.runPolicies.Load(key); ok && now.Sub(at.(time.Time)) < c.opts.PollInterval {
		return nil
	}
	policies := c.kube.NetworkingV1().NetworkPolicies(a.Namespace)
	_, err := policies.Create(ctx, want, metav1.CreateOptions{})
	switch {
	case err == nil:
		c.runPolicies.Store(key, now)
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("create NetworkPolicy %s: %w", want.Name, err)
	}
	existing, err := policies.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		// Gone meanwhile, or unreadable for now: the next pass tries again.
		return fmt.Errorf("read NetworkPolicy %s, which already exists: %w", want.Name, err)
	}
	if equality.Semantic.DeepEqual(existing.Spec, want.Spec) {
		c.runPolicies.Store(key, now)
		return nil
	}
	existing.Spec = want.Spec
	if _, err := policies.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set NetworkPolicy %s back to the controller's spec: %w", want.Name, err)
	}
	c.runPolicies.Store(key, now)
	c.log.Info("set a namespace's run NetworkPolicy back to the controller's spec", "namespace", a.Namespace, "networkPolicy", want.Name)
	return nil
}
