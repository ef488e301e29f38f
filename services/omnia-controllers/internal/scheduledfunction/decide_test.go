package scheduledfunction

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// created is every test object's creationTimestamp: 10:00:30 UTC.
var created = time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)

func fn(mutate func(*omniav1.ScheduledFunction)) *omniav1.ScheduledFunction {
	f := &omniav1.ScheduledFunction{
		ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: "ns", Generation: 1, CreationTimestamp: metav1.NewTime(created)},
		Spec:       omniav1.ScheduledFunctionSpec{Schedule: "*/5 * * * *", AgentRuntimeRef: omniav1.LocalObjectReference{Name: "fn"}},
	}
	if mutate != nil {
		mutate(f)
	}
	return f
}

func function() *omniav1.AgentRuntime {
	return &omniav1.AgentRuntime{ObjectMeta: metav1.ObjectMeta{Name: "fn", Namespace: "ns"}, Spec: omniav1.AgentRuntimeSpec{Mode: omniav1.AgentModeFunction}}
}

func at(hhmmss string) time.Time {
	t, err := time.Parse("15:04:05", hhmmss)
	if err != nil {
		panic(err)
	}
	return time.Date(2026, 1, 1, t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

func last(t time.Time) func(*omniav1.ScheduledFunction) {
	return func(f *omniav1.ScheduledFunction) { m := metav1.NewTime(t); f.Status.LastScheduleTime = &m }
}

func deadline(s int64) func(*omniav1.ScheduledFunction) {
	return func(f *omniav1.ScheduledFunction) { f.Spec.StartingDeadlineSeconds = &s }
}

func both(a, b func(*omniav1.ScheduledFunction)) func(*omniav1.ScheduledFunction) {
	return func(f *omniav1.ScheduledFunction) { a(f); b(f) }
}

func TestDecide(t *testing.T) {
	agentMode := function()
	agentMode.Spec.Mode = omniav1.AgentModeAgent
	cases := []struct {
		name    string
		f       *omniav1.ScheduledFunction
		agent   *omniav1.AgentRuntime
		now     string
		fire    string // the scheduled time run now; "" none
		next    string // nextScheduleTime; "" unset
		missed  int64
		outcome omniav1.RunOutcome // lastResult's; "" none
		ready   string             // Ready's reason
		retry   bool
	}{
		{name: "before the first scheduled time nothing runs; the next time is set and waited for",
			f: fn(nil), agent: function(), now: "10:02:00", next: "10:05:00", ready: omniav1.ReasonScheduled},
		{name: "at the scheduled time the run is due and recorded as Running first",
			f: fn(nil), agent: function(), now: "10:05:00", fire: "10:05:00", next: "10:10:00", outcome: omniav1.RunRunning, ready: omniav1.ReasonScheduled},
		{name: "a scheduled time already handled is not run again",
			f: fn(last(at("10:05:00"))), agent: function(), now: "10:09:59", next: "10:10:00", ready: omniav1.ReasonScheduled},
		{name: "without a deadline only the latest of several missed times runs; the others are counted",
			f: fn(last(at("10:05:00"))), agent: function(), now: "10:21:00", fire: "10:20:00", next: "10:25:00", missed: 2, outcome: omniav1.RunRunning, ready: omniav1.ReasonScheduled},
		{name: "a late run within the starting deadline still runs",
			f: fn(both(last(at("10:05:00")), deadline(60))), agent: function(), now: "10:11:00", fire: "10:10:00", next: "10:15:00", outcome: omniav1.RunRunning, ready: omniav1.ReasonScheduled},
		{name: "a time further back than the starting deadline is skipped, recorded as Missed and counted",
			f: fn(both(last(at("10:05:00")), deadline(60))), agent: function(), now: "10:11:01", next: "10:15:00", missed: 1, outcome: omniav1.RunMissed, ready: omniav1.ReasonScheduled},
		{name: "the time zone moves the schedule: 11:00 in Berlin is 10:00 UTC",
			f: fn(func(f *omniav1.ScheduledFunction) { f.Spec.Schedule, f.Spec.TimeZone = "0 11 * * *", "Europe/Berlin" }), agent: function(),
			now: "10:01:00", next: "10:00:00", ready: omniav1.ReasonScheduled},
		{name: "suspend runs nothing and unsets the next time",
			f: fn(func(f *omniav1.ScheduledFunction) { f.Spec.Suspend = true }), agent: function(), now: "10:05:00", ready: omniav1.ReasonSuspended},
		{name: "a schedule the parser refuses is a condition naming the field, no error",
			f: fn(func(f *omniav1.ScheduledFunction) { f.Spec.Schedule = "61 * * * *" }), agent: function(), now: "10:05:00", ready: omniav1.ReasonInvalidSchedule},
		{name: "an unknown time zone is a condition naming the field, no error",
			f: fn(func(f *omniav1.ScheduledFunction) { f.Spec.TimeZone = "Mars/Olympus" }), agent: function(), now: "10:05:00", ready: omniav1.ReasonInvalidTimeZone},
		{name: "a missing AgentRuntime is an error, retried, and nothing runs",
			f: fn(nil), now: "10:05:00", ready: omniav1.ReasonAgentNotFound, retry: true},
		{name: "an AgentRuntime not in mode function is a condition, no error, and nothing runs",
			f: fn(nil), agent: agentMode, now: "10:05:00", ready: omniav1.ReasonAgentNotFunction},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(Snapshot{Function: c.f, Agent: c.agent, Now: at(c.now)})
			fire := ""
			if d.Fire != nil {
				fire = d.Fire.Format("15:04:05")
			}
			next := ""
			if n := d.Status.NextScheduleTime; n != nil {
				next = n.UTC().Format("15:04:05")
				// The timer waits exactly until the next scheduled time.
				if d.RequeueAfter != n.Sub(at(c.now)) {
					t.Errorf("requeue after %s, want %s", d.RequeueAfter, n.Sub(at(c.now)))
				}
			} else if d.RequeueAfter != 0 {
				t.Errorf("requeue after %s without a next time", d.RequeueAfter)
			}
			outcome := omniav1.RunOutcome("")
			if d.Status.LastResult != nil {
				outcome = d.Status.LastResult.Outcome
			}
			r := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionReady)
			if fire != c.fire || next != c.next || d.Status.MissedRuns != c.missed || outcome != c.outcome || r == nil || r.Reason != c.ready || (d.Retry != nil) != c.retry {
				t.Fatalf("fire %q next %q missed %d outcome %q Ready %+v retry %v; want fire %q next %q missed %d outcome %q Ready %s retry %v",
					fire, next, d.Status.MissedRuns, outcome, r, d.Retry, c.fire, c.next, c.missed, c.outcome, c.ready, c.retry)
			}
			if c.fire != "" && !d.Status.LastScheduleTime.Time.Equal(*d.Fire) {
				t.Errorf("lastScheduleTime %v, want the fired time", d.Status.LastScheduleTime)
			}
		})
	}
}

// TestDecideNamesTheField: a spec problem's message names the field.
func TestDecideNamesTheField(t *testing.T) {
	for field, mutate := range map[string]func(*omniav1.ScheduledFunction){
		"spec.schedule": func(f *omniav1.ScheduledFunction) { f.Spec.Schedule = "* * 32 * *" },
		"spec.timeZone": func(f *omniav1.ScheduledFunction) { f.Spec.TimeZone = "Nowhere/City" },
	} {
		d := Decide(Snapshot{Function: fn(mutate), Agent: function(), Now: at("10:05:00")})
		c := meta.FindStatusCondition(d.Status.Conditions, omniav1.ConditionScheduleValid)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, field) || len(d.Events) != 1 {
			t.Errorf("%s: ScheduleValid %+v, events %v", field, c, d.Events)
		}
	}
}

// TestRunLifecycle: a due run is Running in the status written before the
// call; Finish records its outcome in lastResult and the history's head;
// the next pass neither runs it again nor marks it Interrupted; the
// history keeps historyLimit runs, newest first.
func TestRunLifecycle(t *testing.T) {
	f := fn(func(f *omniav1.ScheduledFunction) { n := int32(2); f.Spec.HistoryLimit = &n })
	for i, now := range []string{"10:05:00", "10:10:00", "10:15:00"} {
		d := Decide(Snapshot{Function: f, Agent: function(), Now: at(now)})
		if d.Fire == nil {
			t.Fatalf("%s: no run", now)
		}
		f.Status = d.Status
		fin := metav1.NewTime(at(now).Add(time.Second))
		if !Finish(&f.Status, *d.Fire, omniav1.RunRecord{Outcome: omniav1.RunSucceeded, HTTPStatus: int32(200 + i), FinishTime: &fin}) {
			t.Fatal("Finish found no Running run")
		}
		again := Decide(Snapshot{Function: f, Agent: function(), Now: at(now).Add(2 * time.Second)})
		if again.Fire != nil || again.Status.LastResult.Outcome != omniav1.RunSucceeded {
			t.Fatalf("%s: second pass fire %v outcome %s", now, again.Fire, again.Status.LastResult.Outcome)
		}
	}
	h := f.Status.History
	if len(h) != 2 || h[0].HTTPStatus != 202 || h[1].HTTPStatus != 201 || !h[0].ScheduleTime.Time.Equal(at("10:15:00")) {
		t.Fatalf("history %+v", h)
	}
	if Finish(&f.Status, at("10:15:00"), omniav1.RunRecord{Outcome: omniav1.RunFailed}) {
		t.Fatal("Finish recorded a run that is no longer Running")
	}
}

// TestInterruptedRunIsNotRepeated: a pass that finds a run still Running
// (the controller stopped during the call) records it as Failed,
// Interrupted, and does not run that scheduled time again.
func TestInterruptedRunIsNotRepeated(t *testing.T) {
	f := fn(nil)
	d := Decide(Snapshot{Function: f, Agent: function(), Now: at("10:05:00")})
	f.Status = d.Status
	d = Decide(Snapshot{Function: f, Agent: function(), Now: at("10:06:00")})
	if d.Fire != nil || d.Status.LastResult.Outcome != omniav1.RunFailed || d.Status.LastResult.Reason != "Interrupted" || d.Status.History[0].Reason != "Interrupted" {
		t.Fatalf("fire %v lastResult %+v", d.Fire, d.Status.LastResult)
	}
}

// TestDueIsBounded: a schedule of every minute, last run a year ago, is
// walked in bounded time and still finds the latest due time.
func TestDueIsBounded(t *testing.T) {
	s, _, err := Parse(omniav1.ScheduledFunctionSpec{Schedule: "* * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	now := at("10:05:30")
	n, latest := s.Due(now.AddDate(-1, 0, 0), now)
	if !latest.Equal(at("10:05:00")) || n < maxCounted {
		t.Fatalf("due %d, latest %v", n, latest)
	}
}
