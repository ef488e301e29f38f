package controller

import (
	"context"
	"fmt"
	"maps"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	networkingv1 "k8s.io/api/networking/v1"
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
// back to the controller's spec and labels: the name is the
// controller's. Its owners are left as found: changing them takes delete
// permission on the policy (the OwnerReferencesPermissionEnforcement
// admission plugin), and a user who could make the garbage collector
// delete it through a planted owner could delete it as well.
//
// The policy is read again at most once a poll interval per namespace
// (runPolicies holds when it was last found as built), and the starts
// that need it at the same moment wait on one sync (runPolicySync) rather
// than each making its own, so a burst of runs costs one request for it,
// and one deleted or rewritten by a namespace
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
	fresh := func() (seen, ok bool) {
		at, seen := c.runPolicies.Load(key)
		return seen, seen && now.Sub(at.(time.Time)) < c.opts.PollInterval
	}
	if _, ok := fresh(); ok {
		return nil
	}
	_, err, _ := c.runPolicySync.Do(key, func() (any, error) {
		// A start that missed another's sync by a moment finds it done.
		seen, ok := fresh()
		if ok {
			return nil, nil
		}
		if err := c.syncRunPolicy(ctx, want, seen); err != nil {
			return nil, err
		}
		c.runPolicies.Store(key, now)
		return nil, nil
	})
	return err
}

// syncRunPolicy creates want or sets the policy under its name back to
// it. A policy this controller has seen is most likely still there, so it
// is read first; one not seen yet most likely is not, so it is created
// first. Either way a policy costs one request while it stays as built.
func (c *Controller) syncRunPolicy(ctx context.Context, want *networkingv1.NetworkPolicy, seen bool) error {
	policies := c.kube.NetworkingV1().NetworkPolicies(want.Namespace)
	if !seen {
		_, err := policies.Create(ctx, want, metav1.CreateOptions{})
		switch {
		case err == nil:
			return nil
		case !apierrors.IsAlreadyExists(err):
			return fmt.Errorf("create NetworkPolicy %s: %w", want.Name, err)
		}
	}
	existing, err := policies.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case seen && apierrors.IsNotFound(err):
		if _, err := policies.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("make NetworkPolicy %s again: %w", want.Name, err)
		}
		c.log.Info("made a deleted run NetworkPolicy again", "namespace", want.Namespace, "networkPolicy", want.Name)
		return nil
	case err != nil:
		// Gone meanwhile, or unreadable for now: the next pass tries again.
		return fmt.Errorf("read NetworkPolicy %s: %w", want.Name, err)
	}
	if asBuilt(existing, want) {
		return nil
	}
	existing.Spec = want.Spec
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	maps.Copy(existing.Labels, want.Labels)
	if _, err := policies.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set NetworkPolicy %s back to the controller's spec: %w", want.Name, err)
	}
	c.log.Info("set a namespace's run NetworkPolicy back to the controller's spec", "namespace", want.Namespace, "networkPolicy", want.Name)
	return nil
}

// asBuilt reports whether have is the policy want describes: its spec
// and its labels among have's.
func asBuilt(have, want *networkingv1.NetworkPolicy) bool {
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return false
		}
	}
	return equality.Semantic.DeepEqual(have.Spec, want.Spec)
}
