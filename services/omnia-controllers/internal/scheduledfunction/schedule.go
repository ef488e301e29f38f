package scheduledfunction

import (
	"fmt"
	"time"
	// The IANA database is built in, so spec.timeZone resolves in an image
	// without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// parser reads the five standard cron fields and nothing else: no
// seconds, no @every or @hourly descriptors (admission refuses them too).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// Schedule is a parsed spec.schedule in its time zone.
type Schedule struct {
	sched cron.Schedule
	loc   *time.Location
}

// Parse reads spec.schedule and spec.timeZone; the error's reason is the
// ScheduleValid condition's, its message names the field.
func Parse(spec omniav1.ScheduledFunctionSpec) (Schedule, string, error) {
	loc := time.UTC
	if spec.TimeZone != "" {
		l, err := time.LoadLocation(spec.TimeZone)
		if err != nil {
			return Schedule{}, omniav1.ReasonInvalidTimeZone, fmt.Errorf("spec.timeZone %q is not an IANA time zone: %w", spec.TimeZone, err)
		}
		loc = l
	}
	s, err := parser.Parse(spec.Schedule)
	if err != nil {
		return Schedule{}, omniav1.ReasonInvalidSchedule, fmt.Errorf("spec.schedule %q: %w", spec.Schedule, err)
	}
	return Schedule{sched: s, loc: loc}, "", nil
}

// Next is the first scheduled time after t.
func (s Schedule) Next(t time.Time) time.Time { return s.sched.Next(t.In(s.loc)).UTC() }

// maxCounted caps how many due times one pass walks through; past it the
// walk jumps to the last week, so a long suspension costs one bounded pass
// (missedRuns then counts the walked ones only).
const maxCounted = 100_000

// Due returns how many scheduled times lie in (after, now] and the latest
// of them (zero when none).
func (s Schedule) Due(after, now time.Time) (count int64, latest time.Time) {
	for t := s.Next(after); !t.After(now); t = s.Next(t) {
		count++
		latest = t
		if count == maxCounted {
			if jump := now.Add(-7 * 24 * time.Hour); jump.After(t) {
				t = jump
			}
		}
	}
	return count, latest
}
