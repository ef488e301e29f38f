package provider

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/testenv"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/ctrltest"
)

// TestEndpointCredentialsNeverShown: a Provider whose base URL carries
// credentials (user:password@ and a ?key= query), unreachable, is judged
// Unavailable naming its endpoint, and neither credential appears in its
// status or in any event of the namespace: whoever may read a Provider
// may not read Secrets.
func TestEndpointCredentialsNeverShown(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	addr := testenv.FreeAddr(t) // nothing listens: the check fails with a transport error
	const password, key = "pa55-in-the-url", "key-in-the-query"
	p := &omniav1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: omniav1.ProviderSpec{Type: omniav1.ProviderTypeOllama, Model: "llama3",
			BaseURL: "http://admin:" + password + "@" + addr + "/v1?key=" + key}}
	ctrltest.Create(t, env, p)
	start(t)
	ctrltest.Eventually(t, wait, phaseIs(ns, omniav1.ProviderPhaseUnavailable, omniav1.ConditionEndpointReachable, omniav1.ReasonEndpointUnreachable))
	var evs eventsv1.EventList // whatever the controller has said of it
	if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	got, err := getProv(ns)
	if err != nil {
		t.Fatal(err)
	}
	reachable := ""
	for _, c := range got.Status.Conditions {
		if c.Type == omniav1.ConditionEndpointReachable {
			reachable = c.Message
		}
	}
	if !strings.Contains(reachable, "http://"+addr+"/v1") {
		t.Errorf("EndpointReachable says %q; want it to name the endpoint http://%s/v1", reachable, addr)
	}
	for what, v := range map[string]any{"the status": got.Status, "the events": evs} {
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{password, key} {
			if strings.Contains(string(out), secret) {
				t.Errorf("%s show %q:\n%s", what, secret, out)
			}
		}
	}
}
