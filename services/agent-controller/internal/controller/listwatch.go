package controller

import (
	"context"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// agentListWatch lists and watches Agents for the reflector, counting full
// LISTs (the first page of each) and watch re-opens. client-go's reflector
// does the hard parts: paginated LIST, resuming from the last
// resourceVersion, a fresh re-list on 410 Gone, server-side timeoutSeconds,
// and exponential backoff with jitter on errors.
type agentListWatch struct {
	c         client.WithWatch
	namespace string
	pageSize  int64
	// watchTimeout, when set, caps the server-side timeoutSeconds the
	// reflector asks for (5-10 minutes by default).
	watchTimeout time.Duration
	onList       func()
	onWatch      func(reconnect bool)
	watches      atomic.Int64
}

var _ cache.ListerWatcher = (*agentListWatch)(nil)

// IsWatchListSemanticsUnSupported makes the reflector use paginated LISTs
// rather than a streaming watch-list, so re-lists are LISTs the poll and
// the resync metric can reason about.
func (lw *agentListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// List returns one page of Agents.
func (lw *agentListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue == "" && lw.onList != nil {
		lw.onList()
	}
	if opts.Limit == 0 {
		opts.Limit = lw.pageSize
	}
	list := &agentsv1alpha1.AgentList{}
	err := lw.c.List(context.Background(), list, &client.ListOptions{Namespace: lw.namespace, Raw: &opts})
	return list, err
}

// Watch opens a watch from opts.ResourceVersion.
func (lw *agentListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	if secs := int64(lw.watchTimeout / time.Second); secs > 0 && (opts.TimeoutSeconds == nil || *opts.TimeoutSeconds > secs) {
		opts.TimeoutSeconds = &secs
	}
	n := lw.watches.Add(1)
	if lw.onWatch != nil {
		lw.onWatch(n > 1)
	}
	return lw.c.Watch(context.Background(), &agentsv1alpha1.AgentList{}, &client.ListOptions{Namespace: lw.namespace, Raw: &opts})
}
