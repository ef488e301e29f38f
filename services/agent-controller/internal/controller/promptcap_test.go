package controller

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
	batchpb "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// countingBatch stands in for batch-poller: it counts submits and the
// bytes of prompt they carry, and refuses them all. Its other methods are
// never reached in these tests (nil interface).
type countingBatch struct {
	batchpb.BatchServiceClient
	submits, promptBytes atomic.Int64
}

func (b *countingBatch) Submit(_ context.Context, in *batchpb.SubmitRequest, _ ...grpc.CallOption) (*batchpb.SubmitResponse, error) {
	b.submits.Add(1)
	b.promptBytes.Add(int64(len(in.GetPrompt())))
	return nil, errors.New("no batch-poller in this test")
}

// allocated is the bytes this process has allocated so far.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestAPromptBombFailsItsAgentAndTheControllerStaysUp is the attack of an
// Agent, within admission's limits (a 12 KB template of 4,000
// placeholders, one 16 KiB parameter), whose batch prompt renders to about
// 64 MB in the controller, where a batch run's prompt is rendered: repeated
// on every reconcile and by every new leader, it would exhaust the
// controller's memory. The Agent must fail with the cap and the sizes, no
// prompt may reach batch-poller, and the next, ordinary Agent must run.
func TestAPromptBombFailsItsAgentAndTheControllerStaysUp(t *testing.T) {
	ns := env.Namespace(t)
	batch := &countingBatch{}
	mkStation(t, ns, "bombed", nil)
	mkStation(t, ns, "ordinary", nil)
	ctx := context.Background()
	def := &agentsv1alpha1.AgentDefinition{}
	if err := env.Client.Get(ctx, keyOf(ns, "bombed-def"), def); err != nil {
		t.Fatal(err)
	}
	def.Spec.Execution = agentsv1alpha1.ExecutionBatch
	def.Spec.Prompt = strings.Repeat("{p}", 4000)
	if err := env.Client.Update(ctx, def); err != nil {
		t.Fatal(err)
	}
	// Started only now, so its first list holds the bombed definition: an
	// Agent reconciled against the definition's first version would run as
	// a Job instead.
	ctl, _ := startWith(t, ns, startOptions{batch: batch})
	before := allocated()
	bomb := &agentsv1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "bomb", Namespace: ns},
		Spec: agentsv1alpha1.AgentSpec{StationRef: "bombed", Parameters: map[string]string{"p": strings.Repeat("x", 16<<10)}}}
	if err := env.Client.Create(ctx, bomb); err != nil {
		t.Fatalf("admission refused the bomb, which is within its limits: %v", err)
	}
	a := waitPhase(t, ns, "bomb", agentsv1alpha1.PhaseFailed)
	for _, want := range []string{"more than the 1048576-byte cap", "12000-byte template", "AgentDefinition bombed-def"} {
		if !strings.Contains(a.Status.FailureReason, want) {
			t.Errorf("failureReason %q does not say %q", a.Status.FailureReason, want)
		}
	}
	if n := batch.submits.Load(); n != 0 {
		t.Fatalf("%d submits reached batch-poller, carrying %d bytes of prompt", n, batch.promptBytes.Load())
	}
	// Rendering it would allocate at least the 64 MB prompt; refusing it
	// costs what any reconcile does.
	if grew := allocated() - before; grew > 32<<20 {
		t.Errorf("the controller allocated %d MiB while refusing the bomb", grew>>20)
	}

	mkAgent(t, ns, "next", "ordinary")
	waitPhase(t, ns, "next", agentsv1alpha1.PhaseRunning)
	if !ctl.Synced() || !ctl.Healthy() {
		t.Fatal("the controller is not serving after the bomb")
	}
}
