package metrics

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
	"github.com/agentplane/agentplane/services/omnia-controllers/internal/rollout"
)

func ptr[T any](v T) *T { return &v }

// running is status.rollout of an active rollout of candidate at step and
// weight.
func running(candidate string, step, weight int32) *omniav1.RolloutStatus {
	return &omniav1.RolloutStatus{Active: true, CandidateVersion: candidate, CurrentStep: ptr(step), CurrentWeight: ptr(weight)}
}

// promoting is running with the promotion recorded.
func promoting(candidate string, step, weight int32) *omniav1.RolloutStatus {
	ro := running(candidate, step, weight)
	ro.Promoting, ro.PromotedGeneration = true, ptr(int64(4))
	return ro
}

func agentStatus(ready metav1.ConditionStatus, ro *omniav1.RolloutStatus) *omniav1.AgentRuntimeStatus {
	st := &omniav1.AgentRuntimeStatus{Rollout: ro}
	if ready != "" {
		st.Conditions = []metav1.Condition{{Type: omniav1.ConditionReady, Status: ready, Reason: "R"}}
	}
	return st
}

func TestAgentRuntimePassRules(t *testing.T) {
	const no, yes = metav1.ConditionFalse, metav1.ConditionTrue
	cases := []struct {
		rule          string
		before, after *omniav1.AgentRuntimeStatus
		rolledBack    bool
		want          AgentRuntimeObservation
	}{
		{"an agent never reconciled shows zeros", nil, nil, false, AgentRuntimeObservation{}},
		{"Ready=True sets ready", agentStatus(no, nil), agentStatus(yes, nil), false, AgentRuntimeObservation{Ready: true}},
		{"Ready=False is not ready", agentStatus(yes, nil), agentStatus(no, nil), false, AgentRuntimeObservation{}},
		{"a missing Ready condition is not ready", nil, agentStatus("", nil), false, AgentRuntimeObservation{}},

		{"a rollout's first setWeight counts one step and shows its weight",
			agentStatus(yes, nil), agentStatus(yes, running("1.1.0", 1, 50)), false,
			AgentRuntimeObservation{Ready: true, InProgress: true, CanaryWeight: 50, Steps: 1}},
		{"a rollout held on its first step counts no step",
			agentStatus(yes, nil), agentStatus(yes, running("1.1.0", 0, 0)), false,
			AgentRuntimeObservation{Ready: true, InProgress: true}},
		{"an advance of the step index counts one step",
			agentStatus(yes, running("1.1.0", 1, 50)), agentStatus(yes, running("1.1.0", 2, 50)), false,
			AgentRuntimeObservation{Ready: true, InProgress: true, CanaryWeight: 50, Steps: 1}},
		{"a pass that holds the step counts none",
			agentStatus(yes, running("1.1.0", 2, 50)), agentStatus(yes, running("1.1.0", 2, 50)), false,
			AgentRuntimeObservation{Ready: true, InProgress: true, CanaryWeight: 50}},
		{"a step index that moves back counts none",
			agentStatus(yes, running("1.1.0", 3, 50)), agentStatus(yes, running("1.1.0", 1, 50)), false,
			AgentRuntimeObservation{Ready: true, InProgress: true, CanaryWeight: 50}},
		{"a new candidate counts its steps from the first",
			agentStatus(yes, running("1.1.0", 3, 80)), agentStatus(yes, running("1.2.0", 1, 10)), false,
			AgentRuntimeObservation{Ready: true, InProgress: true, CanaryWeight: 10, Steps: 1}},
		{"a rollout after a finished one counts its steps from the first",
			agentStatus(yes, rollout.Outcome("promoted")), agentStatus(yes, running("1.1.0", 1, 20)), false,
			AgentRuntimeObservation{Ready: true, InProgress: true, CanaryWeight: 20, Steps: 1}},
		{"an active rollout without a recorded weight shows weight 0",
			agentStatus(yes, nil), agentStatus(yes, &omniav1.RolloutStatus{Active: true, CandidateVersion: "1.1.0"}), false,
			AgentRuntimeObservation{Ready: true, InProgress: true}},

		{"a promotion is in progress at the last weight and counts no step",
			agentStatus(yes, running("1.1.0", 2, 100)), agentStatus(yes, promoting("1.1.0", 2, 100)), false,
			AgentRuntimeObservation{Ready: true, InProgress: true, CanaryWeight: 100}},
		{"a promotion not yet stored as finished counts nothing",
			agentStatus(yes, promoting("1.1.0", 2, 100)), agentStatus(yes, promoting("1.1.0", 2, 100)), false,
			AgentRuntimeObservation{Ready: true, InProgress: true, CanaryWeight: 100}},
		{"a finished promotion counts promoted and ends the rollout",
			agentStatus(yes, promoting("1.1.0", 2, 100)), agentStatus(yes, rollout.Outcome("promoted")), false,
			AgentRuntimeObservation{Ready: true, Finished: ResultPromoted}},
		{"an outcome already stored counts nothing",
			agentStatus(yes, rollout.Outcome("promoted")), agentStatus(yes, rollout.Outcome("promoted")), false,
			AgentRuntimeObservation{Ready: true}},
		{"a rollout the user abandons by editing the spec counts no result",
			agentStatus(yes, running("1.1.0", 1, 50)), agentStatus(yes, nil), false,
			AgentRuntimeObservation{Ready: true}},

		{"a rollback counts rolled_back and ends the rollout",
			agentStatus(yes, running("1.1.0", 1, 20)), agentStatus(yes, rollout.Outcome("auto-rollback: analysis failed")), true,
			AgentRuntimeObservation{Ready: true, Finished: ResultRolledBack}},
		{"a rollback counts even when its status was not stored",
			agentStatus(yes, running("1.1.0", 1, 20)), agentStatus(yes, running("1.1.0", 1, 20)), true,
			AgentRuntimeObservation{Ready: true, InProgress: true, CanaryWeight: 20, Finished: ResultRolledBack}},
		{"a rollback in the rollout's first pass counts rolled_back",
			agentStatus(yes, nil), agentStatus(yes, rollout.Outcome("auto-rollback: analysis failed")), true,
			AgentRuntimeObservation{Ready: true, Finished: ResultRolledBack}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got := AgentRuntimePass{Before: tc.before, After: tc.after, RolledBack: tc.rolledBack}.Observe()
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPromptPackValidatedRules(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason}
	}
	sourceOK := cond(omniav1.ConditionSourceValid, metav1.ConditionTrue, omniav1.ReasonSourceValid)
	cases := []struct {
		rule  string
		conds []metav1.Condition
		want  bool
	}{
		{"a pack not validated yet is not valid", nil, false},
		{"a valid source and pack.json are valid",
			[]metav1.Condition{sourceOK, cond(omniav1.ConditionSchemaValid, metav1.ConditionTrue, omniav1.ReasonSchemaValid)}, true},
		{"a live source is valid from its spec",
			[]metav1.Condition{cond(omniav1.ConditionSourceValid, metav1.ConditionTrue, omniav1.ReasonLiveSource),
				cond(omniav1.ConditionSchemaValid, metav1.ConditionUnknown, omniav1.ReasonLiveSource)}, true},
		{"a pack.json that fails the schema is not valid",
			[]metav1.Condition{sourceOK, cond(omniav1.ConditionSchemaValid, metav1.ConditionFalse, omniav1.ReasonSchemaValidationFailed)}, false},
		{"a failed source is not valid",
			[]metav1.Condition{cond(omniav1.ConditionSourceValid, metav1.ConditionFalse, omniav1.ReasonSourceValidationFailed),
				cond(omniav1.ConditionSchemaValid, metav1.ConditionUnknown, omniav1.ReasonSourceInvalid)}, false},
		{"an unvalidated pack.json of a ConfigMap source is not valid",
			[]metav1.Condition{sourceOK, cond(omniav1.ConditionSchemaValid, metav1.ConditionUnknown, omniav1.ReasonSourceInvalid)}, false},
		{"a valid source without a schema verdict is not valid", []metav1.Condition{sourceOK}, false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if got := PromptPackValidated(tc.conds); got != tc.want {
				t.Fatalf("valid = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPromptPackFailuresRules(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "R"}
	}
	src := func(s metav1.ConditionStatus) metav1.Condition { return cond(omniav1.ConditionSourceValid, s) }
	sch := func(s metav1.ConditionStatus) metav1.Condition { return cond(omniav1.ConditionSchemaValid, s) }
	T, F, U := metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	cases := []struct {
		rule          string
		before, after []metav1.Condition
		want          []string
	}{
		{"a first validation that fails the source counts one source failure", nil, []metav1.Condition{src(F), sch(U)}, []string{StageSource}},
		{"a first validation that fails the schema counts one schema failure", nil, []metav1.Condition{src(T), sch(F)}, []string{StageSchema}},
		{"a failure still stored on the next pass counts nothing", []metav1.Condition{src(T), sch(F)}, []metav1.Condition{src(T), sch(F)}, nil},
		{"a valid pack counts nothing", nil, []metav1.Condition{src(T), sch(T)}, nil},
		{"a source that fails after it passed counts again", []metav1.Condition{src(T), sch(T)}, []metav1.Condition{src(F), sch(U)}, []string{StageSource}},
		{"a schema failure after a source failure counts the schema", []metav1.Condition{src(F), sch(U)}, []metav1.Condition{src(T), sch(F)}, []string{StageSchema}},
		{"a fix counts nothing", []metav1.Condition{src(T), sch(F)}, []metav1.Condition{src(T), sch(T)}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if got := PromptPackFailures(tc.before, tc.after); !slices.Equal(got, tc.want) {
				t.Fatalf("failures %q, want %q", got, tc.want)
			}
		})
	}
}
