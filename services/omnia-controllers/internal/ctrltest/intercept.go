package ctrltest

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Intercept wraps a client — the manager's cached one, or a direct one —
// in controller-runtime's interceptor client: the calls funcs names go
// through those functions (to fail, delay or observe one call), every
// other call reaches the wrapped client unchanged.
func Intercept(c client.Client, funcs interceptor.Funcs) client.Client {
	return interceptor.NewClient(noWatch{c}, funcs)
}

// noWatch gives a plain client the Watch method the interceptor's
// signature asks for; no controller of this module watches through its
// client (watches go through the manager's cache).
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("ctrltest: watch through an intercepted client is not supported")
}
