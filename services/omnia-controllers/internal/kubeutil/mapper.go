package kubeutil

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ByIndex maps a changed object to the objects of the list's kind, in the
// same namespace, whose field index holds its name: the ConfigMaps of
// PromptPacks and SkillSources, the Secrets of Providers, the SkillSources
// of PromptPacks. A failed list is logged and maps to nothing; the cache
// only fails that way when the index is missing, a programming error a
// test catches.
func ByIndex(c client.Client, newList func() client.ObjectList, field string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{field: o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "map through a field index", "index", field, "object", client.ObjectKeyFromObject(o))
			return nil
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			log.FromContext(ctx).Error(err, "read a mapped list", "index", field)
			return nil
		}
		out := make([]reconcile.Request, 0, len(items))
		for _, it := range items {
			if obj, ok := it.(client.Object); ok {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			}
		}
		return out
	}
}
