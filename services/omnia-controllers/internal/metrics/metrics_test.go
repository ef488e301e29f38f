package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/libs/service/servicetest"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

// perObject are the families with a series per object.
var perObject = []string{"omnia_agentruntime_ready", "omnia_rollout_in_progress", "omnia_rollout_canary_weight",
	"omnia_rollout_steps_total", "omnia_provider_ready", "omnia_promptpack_valid", "omnia_promptpack_validation_failures_total"}

func registry(t *testing.T) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

func count(t *testing.T, reg prometheus.Gatherer, names ...string) int {
	t.Helper()
	n, err := testutil.GatherAndCount(reg, names...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRegisterRules: the binary registers the metrics on controller-runtime's
// one registry each time its manager starts, which tests do more than once
// per process; a different collector under one of the names is still
// refused.
func TestRegisterRules(t *testing.T) {
	t.Run("registering again on the same registry is no error", func(t *testing.T) {
		reg := registry(t)
		if err := Register(reg); err != nil {
			t.Fatalf("second Register: %v", err)
		}
	})
	t.Run("another collector of the same name is refused", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "omnia_provider_ready", Help: "impostor"}, []string{"namespace", "provider"}))
		if err := Register(reg); err == nil {
			t.Fatal("Register accepted a clash")
		}
	})
	t.Run("both results exist before any rollout ends", func(t *testing.T) {
		reg := registry(t)
		if n := count(t, reg, "omnia_rollouts_finished_total"); n != 2 {
			t.Fatalf("%d series of omnia_rollouts_finished_total, want 2", n)
		}
	})
}

// TestSeriesFollowTheObject: a pass sets an object's series, a later pass
// changes them and counts what it changed, and a deleted object's series
// are gone while the per-result counters stay.
func TestSeriesFollowTheObject(t *testing.T) {
	reg := registry(t)
	promoted := testutil.ToFloat64(RolloutsFinished.WithLabelValues(ResultPromoted))
	ready := []metav1.Condition{{Type: omniav1.ConditionReady, Status: metav1.ConditionTrue, Reason: "R"}}
	stable := &omniav1.AgentRuntimeStatus{Conditions: ready}
	canary := &omniav1.AgentRuntimeStatus{Conditions: ready, Rollout: running("1.1.0", 1, 20)}
	inPromotion := &omniav1.AgentRuntimeStatus{Conditions: ready, Rollout: promoting("1.1.0", 1, 20)}
	done := &omniav1.AgentRuntimeStatus{Conditions: ready, Rollout: rollout.Outcome("promoted")}

	SetAgentRuntime("ns", "agent", AgentRuntimePass{Before: stable, After: canary})
	SetProviderReady("ns", "llm", true)
	SetPromptPackValid("ns", "support-v1", false)
	failed := []metav1.Condition{{Type: omniav1.ConditionSourceValid, Status: metav1.ConditionFalse, Reason: "R"}}
	CountPromptPackFailures("ns", "support-v1", nil, failed)
	CountPromptPackFailures("ns", "support-v1", failed, failed)
	for _, c := range []struct {
		what string
		got  float64
		want float64
	}{
		{"ready", testutil.ToFloat64(AgentRuntimeReady.WithLabelValues("ns", "agent")), 1},
		{"in progress", testutil.ToFloat64(RolloutInProgress.WithLabelValues("ns", "agent")), 1},
		{"weight", testutil.ToFloat64(RolloutCanaryWeight.WithLabelValues("ns", "agent")), 20},
		{"steps", testutil.ToFloat64(RolloutSteps.WithLabelValues("ns", "agent")), 1},
		{"provider", testutil.ToFloat64(ProviderReady.WithLabelValues("ns", "llm")), 1},
		{"pack", testutil.ToFloat64(PromptPackValid.WithLabelValues("ns", "support-v1")), 0},
		{"source failures (one stored, then seen again)", testutil.ToFloat64(PromptPackValidationFailures.WithLabelValues("ns", "support-v1", StageSource)), 1},
		{"schema failures (created at 0)", testutil.ToFloat64(PromptPackValidationFailures.WithLabelValues("ns", "support-v1", StageSchema)), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	servicetest.Lint(t, reg)

	// The same status again (an idle pass, or one whose write failed)
	// counts nothing more.
	SetAgentRuntime("ns", "agent", AgentRuntimePass{Before: canary, After: canary})
	SetAgentRuntime("ns", "agent", AgentRuntimePass{Before: canary, After: inPromotion})
	SetAgentRuntime("ns", "agent", AgentRuntimePass{Before: inPromotion, After: done})
	SetAgentRuntime("ns", "agent", AgentRuntimePass{Before: done, After: done})
	if got := testutil.ToFloat64(RolloutSteps.WithLabelValues("ns", "agent")); got != 1 {
		t.Errorf("steps = %v after passes that took none, want 1", got)
	}
	if got := testutil.ToFloat64(RolloutsFinished.WithLabelValues(ResultPromoted)) - promoted; got != 1 {
		t.Errorf("promoted rose by %v, want 1", got)
	}
	if got := testutil.ToFloat64(RolloutInProgress.WithLabelValues("ns", "agent")) + testutil.ToFloat64(RolloutCanaryWeight.WithLabelValues("ns", "agent")); got != 0 {
		t.Errorf("in progress + weight = %v after the promotion, want 0", got)
	}

	DeleteAgentRuntime("ns", "agent")
	DeleteProvider("ns", "llm")
	DeletePromptPack("ns", "support-v1")
	if n := count(t, reg, perObject...); n != 0 {
		t.Errorf("%d series left of deleted objects", n)
	}
	if n := count(t, reg, "omnia_rollouts_finished_total"); n != 2 {
		t.Errorf("%d series of omnia_rollouts_finished_total after the deletes, want 2", n)
	}
}
