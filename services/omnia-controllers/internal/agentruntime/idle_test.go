package agentruntime

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// TestDecideIdle checks each rule of the idle deadline on the pure
// decision: when the timer runs, what it counts from, what reaping does
// and what wakes a reaped agent.
func TestDecideIdle(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	cond := func(typ string, s metav1.ConditionStatus, reason string, since time.Duration, gen int64, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, LastTransitionTime: at(since), ObservedGeneration: gen, Message: msg}
	}
	running := cond(omniav1.ConditionReady, metav1.ConditionTrue, omniav1.ReasonRuntimeReady, 0, 1, "")
	reapedMsg := func(ann map[string]string) string {
		return "no session for 10m0s; scaled to zero " + wakeMarkPrefix + wakeMark(ann) + ")"
	}
	reaped := func(ann map[string]string) metav1.Condition {
		return cond(omniav1.ConditionIdle, metav1.ConditionTrue, omniav1.ReasonIdleTimeoutExceeded, 20*time.Minute, 1, reapedMsg(ann))
	}
	type want struct {
		plan   idlePlan
		delete bool
		reaped bool
		remove bool
		reason string // Idle reason written; "" for none
		status metav1.ConditionStatus
	}
	cases := []struct {
		name   string
		gen    int64
		ann    map[string]string
		action omniav1.IdleAction
		noIdle bool
		// timeout is spec.idleTimeout: 10m when zero, 0 when negative.
		timeout time.Duration
		st      omniav1.AgentRuntimeStatus
		now     time.Duration
		want    want
	}{
		{name: "without idleTimeout the agent is not reapable and has no Idle condition", noIdle: true,
			st: omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{running}}, now: time.Hour,
			want: want{remove: true}},
		{name: "before the deadline the timer is the time left, counted from becoming Running",
			st: omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{running}}, now: 3 * time.Minute,
			want: want{plan: idlePlan{RequeueAfter: 7 * time.Minute}, reason: omniav1.ReasonActive, status: metav1.ConditionFalse}},
		{name: "later session activity moves the deadline",
			st:   omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{running}, LastActivityTime: ptr(at(5 * time.Minute)), ActiveSessions: ptr(int32(0))},
			now:  12 * time.Minute,
			want: want{plan: idlePlan{RequeueAfter: 3 * time.Minute}, reason: omniav1.ReasonActive, status: metav1.ConditionFalse}},
		{name: "open sessions stop the timer",
			st:   omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{running}, ActiveSessions: ptr(int32(2))},
			now:  time.Hour,
			want: want{reason: omniav1.ReasonActive, status: metav1.ConditionFalse}},
		{name: "an agent never Running and never used has no timer",
			st: omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{
				cond(omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, 0, 1, "")}},
			now:  time.Hour,
			want: want{reason: omniav1.ReasonActive, status: metav1.ConditionFalse}},
		{name: "past the deadline scaleToZero holds the agent at zero",
			st: omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{running}}, now: 10 * time.Minute,
			want: want{plan: idlePlan{ScaleToZero: true}, reaped: true, reason: omniav1.ReasonIdleTimeoutExceeded, status: metav1.ConditionTrue}},
		{name: "past the deadline delete deletes the agent", action: omniav1.IdleDelete,
			st: omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{running}}, now: 11 * time.Minute,
			want: want{delete: true, reaped: true}},
		{name: "a reaped agent stays at zero with no timer", gen: 1,
			st:   omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{reaped(nil)}},
			now:  48 * time.Hour,
			want: want{plan: idlePlan{ScaleToZero: true}}},
		{name: "a reaped agent keeps its wake annotation value without waking", gen: 1,
			ann:  map[string]string{omniav1.AnnotationWakeRequestedAt: "2026-11-29T11:00:00Z"},
			st:   omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{reaped(map[string]string{omniav1.AnnotationWakeRequestedAt: "2026-11-29T11:00:00Z"})}},
			now:  48 * time.Hour,
			want: want{plan: idlePlan{ScaleToZero: true}}},
		{name: "a spec change wakes a reaped agent and restarts the deadline", gen: 2,
			st:   omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{reaped(nil)}},
			now:  time.Hour,
			want: want{plan: idlePlan{RequeueAfter: 10 * time.Minute}, reason: omniav1.ReasonWakeRequested, status: metav1.ConditionFalse}},
		{name: "setting the wake annotation wakes a reaped agent", gen: 1,
			ann:  map[string]string{omniav1.AnnotationWakeRequestedAt: "now"},
			st:   omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{reaped(nil)}},
			now:  time.Hour,
			want: want{plan: idlePlan{RequeueAfter: 10 * time.Minute}, reason: omniav1.ReasonWakeRequested, status: metav1.ConditionFalse}},
		{name: "changing the wake annotation wakes a reaped agent", gen: 1,
			ann:  map[string]string{omniav1.AnnotationWakeRequestedAt: "second"},
			st:   omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{reaped(map[string]string{omniav1.AnnotationWakeRequestedAt: "first"})}},
			now:  time.Hour,
			want: want{plan: idlePlan{RequeueAfter: 10 * time.Minute}, reason: omniav1.ReasonWakeRequested, status: metav1.ConditionFalse}},
		{name: "the last fraction of a second before the deadline waits a whole second",
			st: omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{running}}, now: 10*time.Minute - time.Millisecond,
			want: want{plan: idlePlan{RequeueAfter: time.Second}, reason: omniav1.ReasonActive, status: metav1.ConditionFalse}},
		{name: "a sub-second idleTimeout waits a whole second after a wake", gen: 2, timeout: time.Millisecond,
			st:   omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{reaped(nil)}},
			now:  time.Hour,
			want: want{plan: idlePlan{RequeueAfter: time.Second}, reason: omniav1.ReasonWakeRequested, status: metav1.ConditionFalse}},
		{name: "an idleTimeout of 0 still arms a timer after a wake", gen: 2, timeout: -1,
			st:   omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{reaped(nil)}},
			now:  time.Hour,
			want: want{plan: idlePlan{RequeueAfter: time.Second}, reason: omniav1.ReasonWakeRequested, status: metav1.ConditionFalse}},
		{name: "the deadline counts from the last wake, not the older Running time",
			st: omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{running,
				cond(omniav1.ConditionIdle, metav1.ConditionFalse, omniav1.ReasonWakeRequested, time.Hour, 2, "woken")}},
			now:  time.Hour + 4*time.Minute,
			want: want{plan: idlePlan{RequeueAfter: 6 * time.Minute}}},
		{name: "a Ready=False transition time does not count as becoming Running",
			st: omniav1.AgentRuntimeStatus{Conditions: []metav1.Condition{
				cond(omniav1.ConditionReady, metav1.ConditionFalse, omniav1.ReasonRuntimeNotReady, time.Hour, 1, "")},
				LastActivityTime: ptr(at(0))},
			now:  time.Hour,
			want: want{plan: idlePlan{ScaleToZero: true}, reaped: true, reason: omniav1.ReasonIdleTimeoutExceeded, status: metav1.ConditionTrue}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := &omniav1.AgentRuntimeSpec{IdleAction: tc.action}
			if !tc.noIdle {
				timeout := tc.timeout
				switch {
				case timeout == 0:
					timeout = 10 * time.Minute
				case timeout < 0:
					timeout = 0
				}
				spec.IdleTimeout = &metav1.Duration{Duration: timeout}
			}
			gen := tc.gen
			if gen == 0 {
				gen = 1
			}
			d := decideIdle(gen, tc.ann, spec, &tc.st, t0.Add(tc.now))
			if d.Plan != tc.want.plan || d.Delete != tc.want.delete || d.Reaped != tc.want.reaped || d.Remove != tc.want.remove {
				t.Fatalf("decision %+v; want %+v", d, tc.want)
			}
			switch {
			case tc.want.reason == "" && d.Cond != nil:
				t.Fatalf("condition %+v written; want the Idle condition left as it is", *d.Cond)
			case tc.want.reason != "" && (d.Cond == nil || d.Cond.Reason != tc.want.reason || d.Cond.Status != tc.want.status):
				t.Fatalf("condition %+v; want %s/%s", d.Cond, tc.want.status, tc.want.reason)
			}
		})
	}
}

// TestReapedMessageCarriesWakeMark: the Idle=True message records the
// wake annotation value it was reaped with, so the same value does not
// wake the agent and any other value (or none) does.
func TestReapedMessageCarriesWakeMark(t *testing.T) {
	ann := map[string]string{omniav1.AnnotationWakeRequestedAt: "2026-11-29T10:00:00Z"}
	spec := &omniav1.AgentRuntimeSpec{IdleTimeout: &metav1.Duration{Duration: time.Minute}}
	st := &omniav1.AgentRuntimeStatus{LastActivityTime: ptr(metav1.NewTime(time.Unix(0, 0)))}
	d := decideIdle(1, ann, spec, st, time.Unix(3600, 0))
	if d.Cond == nil || d.Cond.Status != metav1.ConditionTrue {
		t.Fatalf("decision %+v; want reaped", d)
	}
	if got := markIn(d.Cond.Message); got != wakeMark(ann) {
		t.Fatalf("mark %q in %q; want %q", got, d.Cond.Message, wakeMark(ann))
	}
	if strings.Contains(d.Cond.Message, ann[omniav1.AnnotationWakeRequestedAt]) {
		t.Fatalf("message %q quotes the annotation; want only its digest", d.Cond.Message)
	}
	if wakeMark(nil) == wakeMark(map[string]string{omniav1.AnnotationWakeRequestedAt: ""}) {
		t.Fatal("an empty annotation has the mark of no annotation; setting it would not wake")
	}
	if markIn("edited by hand") != "" {
		t.Fatal("a message without a mark yields one")
	}
}
