package agentruntime_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/activator"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/agentruntime"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

const wait = 30 * time.Second

// TestActivatorWakesOnNextSession: an agent reaped by its idle deadline
// has its Service routed to the activator (no selector, an EndpointSlice
// to the activator's address, no stale slice of the cluster's
// controller); a session sent to the activator with the agent's Service
// host wakes it and, once the test (playing the kubelet) marks the new
// pod Ready at 127.0.0.1, is answered by that "pod"; the Service then has
// its selector back and the activator slice is gone.
func TestActivatorWakesOnNextSession(t *testing.T) {
	env := agentruntime.EnvForTest()
	ctx := context.Background()
	// The agent's "pod": its facade port is this loopback listener's.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	podSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "pod answered %s", r.URL.Path)
	}))
	_ = podSrv.Listener.Close()
	podSrv.Listener = ln
	podSrv.Start()
	defer podSrv.Close()
	port := int32(ln.Addr().(*net.TCPAddr).Port)

	// The API server refuses a loopback address in an EndpointSlice, so
	// the slice names another; the test sends the request to the
	// activator itself, as kube-proxy would.
	ns, c, kubelet := agentruntime.ReapedAgentForTest(t, "10.0.0.7", 8082, func(a *omniav1.AgentRuntime) {
		a.Spec.Facades[0].Port = &port
	})
	key := types.NamespacedName{Namespace: ns, Name: "agent"}

	ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, key, func(svc *corev1.Service) error {
		if len(svc.Spec.Selector) != 0 {
			return fmt.Errorf("the reaped agent's Service still selects %v", svc.Spec.Selector)
		}
		return slicesAre(ctx, env.Client, ns, true)
	}))

	act := httptest.NewServer(&activator.Handler{Backend: &activator.Kube{Client: c}, Poll: 20 * time.Millisecond, Timeout: time.Minute})
	defer act.Close()
	type answer struct {
		code int
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, act.URL+"/session", nil)
		if err != nil {
			got <- answer{err: err}
			return
		}
		req.Host = "agent." + ns + ".svc:" + strconv.Itoa(int(port))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, string(b), err}
	}()

	// The request woke the agent: its Deployment is back at one replica.
	ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, key, func(a *omniav1.AgentRuntime) error {
		if _, ok := a.Annotations[omniav1.AnnotationWakeRequestedAt]; !ok {
			return fmt.Errorf("no wake annotation yet")
		}
		dep := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, key, dep); err != nil {
			return err
		}
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
			return fmt.Errorf("Deployment replicas %v", dep.Spec.Replicas)
		}
		return nil
	}))
	kubelet()

	select {
	case a := <-got:
		if a.err != nil || a.code != http.StatusOK || a.body != "pod answered /session" {
			t.Fatalf("activator answered %d %q (%v); want the pod's answer", a.code, a.body, a.err)
		}
	case <-time.After(wait):
		t.Fatal("no answer from the activator")
	}

	ctrltest.Eventually(t, wait, ctrltest.ObjectIs(env.Client, key, func(svc *corev1.Service) error {
		if len(svc.Spec.Selector) == 0 {
			return fmt.Errorf("the woken agent's Service has no selector")
		}
		return slicesAre(ctx, env.Client, ns, false)
	}))
}

// slicesAre checks the agent Service's slices: routed, the activator's
// slice to 10.0.0.7 and none of the cluster's controller; not routed,
// no activator slice.
func slicesAre(ctx context.Context, c client.Client, ns string, routed bool) error {
	var l discoveryv1.EndpointSliceList
	if err := c.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: "agent"}); err != nil {
		return err
	}
	var mine *discoveryv1.EndpointSlice
	for i := range l.Items {
		s := &l.Items[i]
		switch {
		case s.Name == agentruntime.ActivatorSliceName("agent"):
			mine = s
		case routed && s.Labels[discoveryv1.LabelManagedBy] == "endpointslice-controller.k8s.io":
			return fmt.Errorf("stale slice %s of the cluster's controller left", s.Name)
		}
	}
	switch {
	case routed && mine == nil:
		return fmt.Errorf("no activator slice")
	case routed && (len(mine.Endpoints) != 1 || mine.Endpoints[0].Addresses[0] != "10.0.0.7"):
		return fmt.Errorf("activator slice endpoints %+v", mine.Endpoints)
	case !routed && mine != nil:
		return fmt.Errorf("the activator slice is still there")
	}
	return nil
}
