package controller

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/agentplane/agentplane/services/agent-controller/internal/metrics"
)

// TestOnlyListsOfTheNewestOrAnyStateArePaged: a LIST at a given
// resourceVersion (the reflector's relist after its watch ended) must not
// carry a limit, or the API server reads exactly that, possibly long past,
// version from etcd; after an API server restart the informer would then
// list the old state over and over, each watch from it refused as too old.
func TestOnlyListsOfTheNewestOrAnyStateArePaged(t *testing.T) {
	tests := []struct {
		name      string
		opts      metav1.ListOptions
		wantLimit int64
	}{
		{name: "the newest state is paged", opts: metav1.ListOptions{}, wantLimit: 500},
		{name: "any state (the watch cache) is paged", opts: metav1.ListOptions{ResourceVersion: "0"}, wantLimit: 500},
		{name: "a relist from the last version is not paged", opts: metav1.ListOptions{ResourceVersion: "355"}, wantLimit: 0},
		{name: "a limit the caller set is kept", opts: metav1.ListOptions{ResourceVersion: "355", Limit: 20}, wantLimit: 20},
		{name: "a continued page keeps its limit", opts: metav1.ListOptions{Continue: "token", Limit: 500}, wantLimit: 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got *client.ListOptions
			base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			c := interceptor.NewClient(base, interceptor.Funcs{
				List: func(_ context.Context, _ client.WithWatch, _ client.ObjectList, opts ...client.ListOption) error {
					got = &client.ListOptions{}
					got.ApplyOptions(opts)
					return nil
				},
			})
			ctl := New(c, env.Kube, metrics.New(), Options{Log: quiet, PageSize: 500})
			if _, err := ctl.lw.ListWithContext(context.Background(), tt.opts); err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("no LIST was sent")
			}
			if got.Limit != tt.wantLimit {
				t.Errorf("limit %d, want %d", got.Limit, tt.wantLimit)
			}
			if rv := got.AsListOptions().ResourceVersion; rv != tt.opts.ResourceVersion {
				t.Errorf("resourceVersion %q, want %q", rv, tt.opts.ResourceVersion)
			}
		})
	}
}
