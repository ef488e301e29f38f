package agentruntime

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestSettle drives the loop that makes a plan's writes on a fake API: a
// pass whose writes all succeed ends with the status they lead to, and a
// refused write ends its round, so nothing planned after it on the
// assumption of its success is written, and decide plans on from the
// refusal.
func TestSettle(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := omniav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		// refuse is the kind whose create the API refuses; nil for none.
		refuse client.Object
		// created are the kinds the API holds afterwards.
		created []string
		phase   omniav1.AgentRuntimePhase
		refused bool
	}{
		{name: "every write succeeds: the Deployment and Service exist, the agent is Pending",
			created: []string{"Deployment", "Service"}, phase: omniav1.AgentRuntimePhasePending},
		{name: "a refused Deployment create stops the pass before the Service, and fails the agent",
			refuse: &appsv1.Deployment{}, created: nil, phase: omniav1.AgentRuntimePhaseFailed, refused: true},
		{name: "a refused Service create fails the agent after the Deployment is written",
			refuse: &corev1.Service{}, created: []string{"Deployment"}, phase: omniav1.AgentRuntimePhaseFailed, refused: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := readySnapshot(nil)
			var creates []string
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(s.in.Agent).WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					creates = append(creates, kindOf(obj))
					if tc.refuse != nil && kindOf(obj) == kindOf(tc.refuse) {
						return apierrors.NewForbidden(appsv1.Resource("any"), obj.GetName(), nil)
					}
					return c.Create(ctx, obj, opts...)
				},
			}).Build()
			r := &Reconciler{Client: c, Config: testConfig}
			p, _, err := r.settle(context.Background(), s, decide)
			if err != nil {
				t.Fatal(err)
			}
			var held []string
			for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
				if c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "agent"}, obj) == nil {
					held = append(held, kindOf(obj))
				}
			}
			if !slices.Equal(held, tc.created) {
				t.Fatalf("the API holds %v; want %v (creates tried: %v)", held, tc.created, creates)
			}
			tried := len(tc.created)
			if tc.refused {
				tried++ // the refused one
			}
			if len(creates) != tried {
				t.Fatalf("creates tried %v; want %d", creates, tried)
			}
			if p.status == nil || p.status.Phase != tc.phase || apierrors.IsForbidden(p.err) != tc.refused {
				t.Fatalf("status %+v err %v; want phase %s, refused %v", p.status, p.err, tc.phase, tc.refused)
			}
		})
	}
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *corev1.Service:
		return "Service"
	}
	return "other"
}
