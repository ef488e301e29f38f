package agentselect

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Workers is the policy controllers' worker count, fixed at three (see
// docs/omnia-controllers.md, "Concurrency").
const Workers = 3

// Watch adds the watches a policy controller needs besides its own kind:
// the kind again, so a policy created, deleted or edited reaches the
// namespace's other policies (their overlaps change), and AgentRuntimes,
// created, deleted or relabelled, which change what every policy of their
// namespace selects. Status writes pass neither filter, so no write of a
// policy controller enqueues anything.
func Watch(b *builder.Builder, c client.Reader, policy client.Object, newList func() client.ObjectList) *builder.Builder {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		return inNamespace(ctx, c, newList(), o.GetNamespace())
	})
	return b.
		Watches(policy, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&omniav1.AgentRuntime{}, all, builder.WithPredicates(predicate.LabelChangedPredicate{}))
}

// inNamespace lists the policies of ns as requests; a failed list enqueues
// nothing (the cache lists from memory, so it fails only for a kind it
// does not serve).
func inNamespace(ctx context.Context, c client.Reader, list client.ObjectList, ns string) []reconcile.Request {
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(co)})
		}
		return nil
	})
	return reqs
}
