// Package window evaluates maintenance windows: a cron schedule (when a
// window opens, UTC) and a duration (how long it stays open), as Strimzi's
// maintenanceTimeWindows. It is pure: every answer is a function of the
// window and the time it is asked about, so controllers can decide with it
// and tests need no clock.
package window

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Limits on what a tenant may write: a schedule is five short fields, and
// a window shorter than a minute could be missed between two looks (cron's
// granularity is the minute), longer than a week is no window.
const (
	MaxScheduleLength = 256
	MinDuration       = time.Minute
	MaxDuration       = 7 * 24 * time.Hour
)

// ErrNeverOpens is returned for a schedule that matches no time, such as
// "0 0 30 2 *" (February 30th).
var ErrNeverOpens = errors.New("the schedule never fires")

// reference is where New looks for a first opening: cron's own search
// gives up after five years, which covers every schedule that fires at
// all (February 29th included).
var reference = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Window is a recurring window: it opens at each time its schedule fires
// and stays open for its duration.
type Window struct {
	schedule cron.Schedule
	spec     string
	duration time.Duration
}

// New parses a standard five-field cron schedule ("0 2 * * 6": Saturdays
// at 02:00) or a descriptor (@daily, @weekly), read in UTC, and a duration
// between MinDuration and MaxDuration. A time zone prefix (CRON_TZ=, TZ=)
// is refused: windows are UTC so that every replica and every message
// agrees.
func New(schedule string, duration time.Duration) (Window, error) {
	if len(schedule) > MaxScheduleLength {
		return Window{}, fmt.Errorf("schedule is %d characters long, more than %d", len(schedule), MaxScheduleLength)
	}
	s := strings.TrimSpace(schedule)
	if s == "" {
		return Window{}, errors.New("schedule is empty")
	}
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return Window{}, fmt.Errorf("schedule %q names a time zone; schedules are read in UTC", s)
	}
	if strings.HasPrefix(s, "@every") {
		// Relative to when it was parsed: no fixed opening every replica
		// agrees on.
		return Window{}, fmt.Errorf("schedule %q: @every is not a window; use five cron fields", s)
	}
	if duration < MinDuration || duration > MaxDuration {
		return Window{}, fmt.Errorf("duration %s is outside %s to %s", duration, MinDuration, MaxDuration)
	}
	sched, err := cron.ParseStandard(s)
	if err != nil {
		return Window{}, fmt.Errorf("schedule %q: %w", s, err)
	}
	// Without a zone prefix cron reads the schedule in time.Local: the
	// operator's host's zone, which differs between replicas and hosts.
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return Window{}, fmt.Errorf("schedule %q is not a cron schedule", s)
	}
	spec.Location = time.UTC
	if sched.Next(reference).IsZero() {
		return Window{}, fmt.Errorf("schedule %q: %w", s, ErrNeverOpens)
	}
	return Window{schedule: sched, spec: s, duration: duration}, nil
}

// Parse is New with the duration written as Go writes it ("2h", "90m").
func Parse(schedule, duration string) (Window, error) {
	if len(duration) > 32 {
		return Window{}, fmt.Errorf("duration is %d characters long", len(duration))
	}
	d, err := time.ParseDuration(strings.TrimSpace(duration))
	if err != nil {
		return Window{}, fmt.Errorf("duration %q: %w", duration, err)
	}
	return New(schedule, d)
}

// String is the schedule and duration as given.
func (w Window) String() string { return fmt.Sprintf("%q for %s", w.spec, w.duration) }

// Duration is how long the window stays open.
func (w Window) Duration() time.Duration { return w.duration }

// Open tells whether now falls in a window: one opened at or after
// now-duration and at or before now (windows are half-open, [start,
// start+duration)).
func (w Window) Open(now time.Time) bool {
	if w.schedule == nil {
		return false
	}
	start := w.lastStart(now)
	return !start.IsZero() && now.Before(start.Add(w.duration))
}

// lastStart is the latest opening in (now-duration, now], zero for none.
func (w Window) lastStart(now time.Time) time.Time {
	now = now.UTC()
	// Next returns the first activation strictly after its argument, to
	// the second; start from just before the earliest opening that could
	// still be open.
	from := now.Add(-w.duration)
	t := w.schedule.Next(from)
	if t.IsZero() || t.After(now) {
		return time.Time{}
	}
	// More than one opening can fall in the span (a window longer than
	// the period): any of them makes now open.
	return t
}

// NextOpen is when the window is next open: now when it is open, else the
// schedule's next firing after now, in UTC. It is zero only when the
// schedule stops firing (cron looks five years ahead), which New refuses
// for schedules that never fire.
func (w Window) NextOpen(now time.Time) time.Time {
	if w.schedule == nil {
		return time.Time{}
	}
	if w.Open(now) {
		return now.UTC()
	}
	return w.schedule.Next(now.UTC()).UTC()
}
