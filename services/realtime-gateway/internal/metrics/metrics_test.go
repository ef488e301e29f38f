package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestEveryPromptCodeStartsAtZero: a refused prompt must show on a rate()
// graph from the first one, which needs the series scraped before it is
// counted.
func TestEveryPromptCodeStartsAtZero(t *testing.T) {
	m := New()
	if n := testutil.CollectAndCount(m.PromptsTotal); n != 17 {
		t.Fatalf("%d series before any call, want one per gRPC code (17)", n)
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	zero := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "realtime_gateway_prompts_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			if s.GetCounter().GetValue() == 0 {
				zero[s.GetLabel()[0].GetValue()] = true
			}
		}
	}
	for _, code := range []string{"OK", "Unauthenticated", "PermissionDenied", "Unavailable", "FailedPrecondition"} {
		if !zero[code] {
			t.Errorf("code %s is not exported at zero before any call", code)
		}
	}
}
