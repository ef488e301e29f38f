package v1alpha1

import (
	"encoding/json"
	"testing"
)

func i32(v int32) *int32 { return &v }

func TestStationEffectiveMaxConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy ConcurrencyPolicy
		max    int32
		want   int
	}{
		{"allow uses maxConcurrentRuns", AllowConcurrent, 3, 3},
		{"allow with zero is unlimited", AllowConcurrent, 0, 0},
		{"unset policy behaves as allow", "", 2, 2},
		{"forbid allows one whatever maxConcurrentRuns says", ForbidConcurrent, 5, 1},
		{"forbid with zero still allows one", ForbidConcurrent, 0, 1},
		{"replace allows one whatever maxConcurrentRuns says", ReplaceConcurrent, 5, 1},
		{"replace with zero still allows one", ReplaceConcurrent, 0, 1},
		{"negative max never blocks every run", AllowConcurrent, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &StationSpec{ConcurrencyPolicy: tc.policy, MaxConcurrentRuns: tc.max}
			if got := s.EffectiveMaxConcurrent(); got != tc.want {
				t.Errorf("EffectiveMaxConcurrent() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestStationDeadline(t *testing.T) {
	for _, tc := range []struct {
		name        string
		minutes     int32
		wantMinutes int64
		wantSeconds int64
	}{
		{"unset deadline is the 30 minute default", 0, 30, 1800},
		{"negative deadline is the default, never instant", -5, 30, 1800},
		{"one minute is kept", 1, 1, 60},
		{"set deadline is kept", 45, 45, 2700},
		{"huge deadline does not overflow seconds", 1<<31 - 1, 1<<31 - 1, (1<<31 - 1) * 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &StationSpec{DeadlineMinutes: tc.minutes}
			if got := s.EffectiveDeadlineMinutes(); got != tc.wantMinutes {
				t.Errorf("EffectiveDeadlineMinutes() = %d, want %d", got, tc.wantMinutes)
			}
			if got := s.DeadlineSeconds(); got != tc.wantSeconds {
				t.Errorf("DeadlineSeconds() = %d, want %d", got, tc.wantSeconds)
			}
		})
	}
}

func TestStationHistoryLimits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		succ, fail *int32
		wantSucc   int
		wantFail   int
	}{
		{"unset limits default to three", nil, nil, 3, 3},
		{"zero keeps none", i32(0), i32(0), 0, 0},
		{"set limits are kept", i32(5), i32(10), 5, 10},
		{"negative limits keep none", i32(-1), i32(-2), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &StationSpec{SuccessfulRunsHistoryLimit: tc.succ, FailedRunsHistoryLimit: tc.fail}
			if got := s.SuccessfulHistoryLimit(); got != tc.wantSucc {
				t.Errorf("SuccessfulHistoryLimit() = %d, want %d", got, tc.wantSucc)
			}
			if got := s.FailedHistoryLimit(); got != tc.wantFail {
				t.Errorf("FailedHistoryLimit() = %d, want %d", got, tc.wantFail)
			}
			if got, ok := s.HistoryLimit(PhaseSucceeded); !ok || got != tc.wantSucc {
				t.Errorf("HistoryLimit(Succeeded) = %d, %v; want %d, true", got, ok, tc.wantSucc)
			}
			if got, ok := s.HistoryLimit(PhaseFailed); !ok || got != tc.wantFail {
				t.Errorf("HistoryLimit(Failed) = %d, %v; want %d, true", got, ok, tc.wantFail)
			}
		})
	}
	for _, phase := range []AgentPhase{"", PhasePending, PhaseRunning} {
		t.Run("phase "+string(phase)+" is never pruned", func(t *testing.T) {
			s := &StationSpec{}
			if _, ok := s.HistoryLimit(phase); ok {
				t.Errorf("HistoryLimit(%q) reported a limit", phase)
			}
		})
	}
}

func TestStationTemplateRoundTrip(t *testing.T) {
	// The schema keeps the template as opaque JSON; the Go type must still
	// read the agent container out of a typical manifest.
	raw := `{"spec":{"agentDefRef":"d","template":{"metadata":{"labels":{"team":"a"}},` +
		`"spec":{"containers":[{"name":"agent","image":"debian:bookworm-slim"}]}}}}`
	var s Station
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	cs := s.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != AgentContainerName || cs[0].Image != "debian:bookworm-slim" {
		t.Errorf("containers = %+v, want one container named %q", cs, AgentContainerName)
	}
	if s.Spec.Template.Labels["team"] != "a" {
		t.Errorf("template labels = %v", s.Spec.Template.Labels)
	}
}

func TestStationHistoryLimitZeroSurvivesEncoding(t *testing.T) {
	// A limit of 0 must reach the API server, or defaulting turns it into 3.
	b, err := json.Marshal(StationSpec{AgentDefRef: "d", SuccessfulRunsHistoryLimit: i32(0), FailedRunsHistoryLimit: i32(0)})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"successfulRunsHistoryLimit", "failedRunsHistoryLimit"} {
		if v, ok := m[k]; !ok || v.(float64) != 0 {
			t.Errorf("%s = %v, %v in %s; want an explicit 0", k, v, ok, b)
		}
	}
}
