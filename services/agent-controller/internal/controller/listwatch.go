package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/services/agent-controller/internal/metalist"
)

// listWatch lists and watches one kind for an informer's reflector,
// decoding each object on its own. Objects travel as unstructured JSON,
// which any stored object is, and each is then converted to its Go type:
// one that does not convert (a value its type refuses, stored before
// admission checked it) is left out and reported (see undecodables), so
// it can never fail a whole LIST or end a watch, which would leave the
// informer unsynced and the controller idle while it holds the Lease.
//
// client-go's reflector does the rest: paginated LIST, resuming from the
// last resourceVersion, a fresh re-list on 410 Gone, server-side
// timeoutSeconds, and exponential backoff with jitter on errors.
type listWatch struct {
	c   client.WithWatch
	gvk schema.GroupVersionKind
	// newList returns the typed list the reflector and the poll read.
	newList       func() client.ObjectList
	newObj        func() client.Object
	namespace     string
	labelSelector string
	pageSize      int64
	// watchTimeout, when set, caps the server-side timeoutSeconds the
	// reflector asks for (5-10 minutes by default).
	watchTimeout time.Duration
	// onList is called for each full LIST that answers (its first page),
	// onWatch for each watch opened.
	onList  func()
	onWatch func(reconnect bool)
	// slim, when set, turns each object of a typed kind into the smaller
	// form the cache holds of it (decision.RunJobOf for a Job), pages and
	// watch events alike, so the decoded object is garbage at once; a
	// page of slim's objects is a metainternalversion.List.
	slim func(runtime.Object) runtime.Object
	// typed lists and watches the kind as its Go type, which the client
	// reads as protobuf for a built-in kind: several times cheaper to
	// decode than JSON through unstructured, for the kind the controller
	// caches most of (a Job per run). The API server validates a built-in
	// kind in full against the same types, so, unlike a custom kind, no
	// stored object fails to decode: the per-object decoding has nothing
	// to guard against.
	typed   bool
	watches atomic.Int64
	bad     *undecodables
	// versions is the REST client of the poll's metadata LISTs (see
	// listVersions), of the kind's resource; versionPages counts the pages
	// they read.
	versions     rest.Interface
	resource     string
	versionPages atomic.Int64
}

// listVersions LISTs every page of lw's objects as metadata only (see
// metalist), handing each object's identity and resourceVersion to each
// with the LIST's resourceVersion, and returns that version.
func (lw *listWatch) listVersions(ctx context.Context, each func(m *metalist.Item, listRV string)) (string, error) {
	res, err := metalist.List(ctx, metalist.Request{Client: lw.versions, Resource: lw.resource,
		Path:  metalist.CollectionPath(lw.gvk.Group, lw.gvk.Version, lw.namespace, lw.resource),
		Limit: lw.pageSize, LabelSelector: lw.labelSelector}, each)
	lw.versionPages.Add(int64(res.Pages))
	return res.ResourceVersion, err
}

var _ cache.ListerWatcherWithContext = (*listWatch)(nil)

// IsWatchListSemanticsUnSupported makes the reflector use paginated LISTs
// rather than a streaming watch-list: re-lists are LISTs the poll and the
// resync metric can reason about, a LIST's end tells which undecodable
// objects are gone, and a watch only ever carries changes.
func (lw *listWatch) IsWatchListSemanticsUnSupported() bool { return true }

// List returns one page of objects.
func (lw *listWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// ListWithContext returns one page of the objects that decode.
func (lw *listWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	// Only a LIST of the newest state ("") or of any state ("0") is cut
	// into pages. The reflector's relist after a watch ends asks for at
	// least its last version: with a limit, the API server would read
	// exactly that version from etcd instead of a newer one from its watch
	// cache, and after an API server restart, whose cache starts later,
	// every watch from it is refused as too old: the informer would list
	// the same old state again and again until etcd compacts it (minutes).
	// client-go's reflector leaves such a LIST unpaginated for that reason.
	if opts.Limit == 0 && (opts.ResourceVersion == "" || opts.ResourceVersion == "0") {
		opts.Limit = lw.pageSize
	}
	if lw.labelSelector != "" {
		opts.LabelSelector = lw.labelSelector
	}
	if lw.typed {
		return lw.listTyped(ctx, opts)
	}
	page := &unstructured.UnstructuredList{}
	page.SetGroupVersionKind(lw.gvk.GroupVersion().WithKind(lw.gvk.Kind + "List"))
	// Limit and Continue go on the options themselves: the client
	// overwrites Raw's with them.
	err := lw.c.List(ctx, page, &client.ListOptions{Namespace: lw.namespace, Limit: opts.Limit, Continue: opts.Continue, Raw: &opts})
	if err != nil {
		return nil, err
	}
	// Counted once it answers: after a 410 the reflector first asks for
	// the expired resourceVersion, which is refused, then for the newest.
	if opts.Continue == "" && lw.onList != nil {
		lw.onList()
	}
	listRV := page.GetResourceVersion()
	objs := make([]runtime.Object, 0, len(page.Items))
	for i := range page.Items {
		u := &page.Items[i]
		obj, err := decode(u, lw.gvk.Kind, lw.newObj())
		if err != nil {
			lw.bad.failed(err, u.GetResourceVersion(), listRV)
			continue
		}
		lw.bad.readable(u)
		objs = append(objs, obj)
	}
	if page.GetContinue() == "" {
		lw.bad.listed(listRV)
	}
	list := lw.newList()
	if err := meta.SetList(list, objs); err != nil {
		return nil, err
	}
	list.SetResourceVersion(listRV)
	list.SetContinue(page.GetContinue())
	list.SetRemainingItemCount(page.GetRemainingItemCount())
	return list, nil
}

// Watch opens a watch from opts.ResourceVersion.
func (lw *listWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// WatchWithContext opens a watch from opts.ResourceVersion whose events
// carry decoded objects.
func (lw *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if secs := int64(lw.watchTimeout / time.Second); secs > 0 && (opts.TimeoutSeconds == nil || *opts.TimeoutSeconds > secs) {
		opts.TimeoutSeconds = &secs
	}
	if lw.labelSelector != "" {
		opts.LabelSelector = lw.labelSelector
	}
	n := lw.watches.Add(1)
	if lw.onWatch != nil {
		lw.onWatch(n > 1)
	}
	if lw.typed {
		w, err := lw.c.Watch(ctx, lw.typedList(), &client.ListOptions{Namespace: lw.namespace, Raw: &opts})
		if err != nil {
			return nil, err
		}
		return newDecodingWatch(w, lw.slimEvent), nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(lw.gvk.GroupVersion().WithKind(lw.gvk.Kind + "List"))
	w, err := lw.c.Watch(ctx, list, &client.ListOptions{Namespace: lw.namespace, Raw: &opts})
	if err != nil {
		return nil, err
	}
	return newDecodingWatch(w, lw.event), nil
}

// typedList is an empty list of the kind's Go type, its kind set so the
// client (and a test's interceptor) can tell it.
func (lw *listWatch) typedList() client.ObjectList {
	list := lw.newList()
	list.GetObjectKind().SetGroupVersionKind(lw.gvk.GroupVersion().WithKind(lw.gvk.Kind + "List"))
	return list
}

// listTyped returns one page of the kind as its Go type, or as slim's
// form when it is set.
func (lw *listWatch) listTyped(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	list := lw.typedList()
	err := lw.c.List(ctx, list, &client.ListOptions{Namespace: lw.namespace, Limit: opts.Limit, Continue: opts.Continue, Raw: &opts})
	if err != nil {
		return nil, err
	}
	if opts.Continue == "" && lw.onList != nil {
		lw.onList()
	}
	if lw.slim == nil {
		return list, nil
	}
	page := &metainternalversion.List{Items: make([]runtime.Object, 0, meta.LenList(list))}
	page.ResourceVersion, page.Continue, page.RemainingItemCount = list.GetResourceVersion(), list.GetContinue(), list.GetRemainingItemCount()
	err = meta.EachListItem(list, func(o runtime.Object) error {
		page.Items = append(page.Items, lw.slim(o))
		return nil
	})
	return page, err
}

// slimEvent turns the object of a typed watch event into slim's form;
// a bookmark's too, since the reflector takes only objects of the type
// it caches. An error (a Status) goes on as it is.
func (lw *listWatch) slimEvent(ev watch.Event) watch.Event {
	if lw.slim == nil || ev.Type == watch.Error {
		return ev
	}
	return watch.Event{Type: ev.Type, Object: lw.slim(ev.Object)}
}

// event turns a watch event on an unstructured object into one on its
// decoded form. An object that does not decode becomes, to the informer,
// an object that is not there: its event deletes a readable version the
// cache may still hold, or, when the cache holds none, is a bookmark that
// only moves the resourceVersion on, so the watch resumes past it.
func (lw *listWatch) event(ev watch.Event) watch.Event {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok || ev.Type == watch.Error {
		// Errors (a Status) go to the reflector as they are: a 410 Gone
		// there is what makes it re-list.
		return ev
	}
	if ev.Type == watch.Bookmark {
		return watch.Event{Type: watch.Bookmark, Object: lw.stub(u)}
	}
	obj, err := decode(u, lw.gvk.Kind, lw.newObj())
	if err == nil {
		if ev.Type == watch.Deleted {
			lw.bad.deleted(u)
		} else {
			lw.bad.readable(u)
		}
		return watch.Event{Type: ev.Type, Object: obj}
	}
	var cached bool
	switch ev.Type {
	case watch.Added:
		// New to this watch: the cache cannot hold it.
		lw.bad.failed(err, u.GetResourceVersion(), u.GetResourceVersion())
	case watch.Modified:
		cached = !lw.bad.failed(err, u.GetResourceVersion(), u.GetResourceVersion())
	case watch.Deleted:
		cached = !lw.bad.deleted(u)
	}
	if cached {
		return watch.Event{Type: watch.Deleted, Object: lw.stub(u)}
	}
	return watch.Event{Type: watch.Bookmark, Object: lw.stub(u)}
}

// stub is the typed object holding only u's identity, resourceVersion,
// owners and annotations: enough for a bookmark or a deletion, and for
// the Job handler to find the owning Agent.
func (lw *listWatch) stub(u *unstructured.Unstructured) client.Object {
	obj := lw.newObj()
	obj.SetNamespace(u.GetNamespace())
	obj.SetName(u.GetName())
	obj.SetUID(u.GetUID())
	obj.SetResourceVersion(u.GetResourceVersion())
	obj.SetOwnerReferences(u.GetOwnerReferences())
	obj.SetAnnotations(u.GetAnnotations())
	return obj
}

// decodingWatch passes a watch's events through a conversion until it is
// stopped. Unlike watch.Filter it never blocks on a reader that is gone.
type decodingWatch struct {
	src     watch.Interface
	out     chan watch.Event
	done    chan struct{}
	stopped sync.Once
}

func newDecodingWatch(src watch.Interface, convert func(watch.Event) watch.Event) *decodingWatch {
	w := &decodingWatch{src: src, out: make(chan watch.Event), done: make(chan struct{})}
	go func() {
		defer close(w.out)
		for {
			select {
			case <-w.done:
				return
			case ev, ok := <-src.ResultChan():
				if !ok {
					return
				}
				select {
				case w.out <- convert(ev):
				case <-w.done:
					return
				}
			}
		}
	}()
	return w
}

// Stop ends the watch and the underlying one.
func (w *decodingWatch) Stop() {
	w.stopped.Do(func() {
		close(w.done)
		w.src.Stop()
	})
}

// ResultChan returns the converted events.
func (w *decodingWatch) ResultChan() <-chan watch.Event { return w.out }
