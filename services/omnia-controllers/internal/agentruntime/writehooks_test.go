package agentruntime

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// withWriteHooks is funcs with every write the reconciler makes (create,
// update, patch, delete, and a subresource update, whose verb is the
// subresource's name) passed first to before, whose error fails the write
// unmade, then made, then reported with its result to after. A nil hook is
// skipped; funcs' reads are kept.
func withWriteHooks(funcs interceptor.Funcs, before func(ctx context.Context, verb string, obj client.Object) error,
	after func(verb string, obj client.Object, err error)) interceptor.Funcs {
	hooked := func(ctx context.Context, verb string, obj client.Object, write func() error) error {
		if before != nil {
			if err := before(ctx, verb, obj); err != nil {
				return err
			}
		}
		err := write()
		if after != nil {
			after(verb, obj, err)
		}
		return err
	}
	funcs.Create = func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		return hooked(ctx, "create", obj, func() error { return cl.Create(ctx, obj, opts...) })
	}
	funcs.Update = func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		return hooked(ctx, "update", obj, func() error { return cl.Update(ctx, obj, opts...) })
	}
	funcs.Patch = func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		return hooked(ctx, "patch", obj, func() error { return cl.Patch(ctx, obj, patch, opts...) })
	}
	funcs.Delete = func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		return hooked(ctx, "delete", obj, func() error { return cl.Delete(ctx, obj, opts...) })
	}
	funcs.SubResourceUpdate = func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		return hooked(ctx, sub, obj, func() error { return cl.SubResource(sub).Update(ctx, obj, opts...) })
	}
	return funcs
}
