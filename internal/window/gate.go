package window

import (
	"fmt"
	"time"

	"github.com/object-store-operator/operator/internal/reason"
)

// The reasons a closed window gives, the same in every condition a window
// holds (an update's, a certificate restart's).
const (
	// ReasonOutside: the window is closed; the message says when it opens.
	ReasonOutside = "OutsideWindow"
	// ReasonInvalid: the window does not parse, or never opens again.
	ReasonInvalid = "InvalidWindow"
)

// Reasons declares the window's reasons, with the remedy of an invalid
// one, for the Reasons of each controller a window holds.
func Reasons() []reason.Reason {
	return []reason.Reason{
		{Name: ReasonOutside, Severity: reason.Normal},
		{Name: ReasonInvalid, Severity: reason.Warning,
			Remedy: "spec.updates.window takes a five-field cron schedule, read in UTC (\"0 2 * * *\"), and a duration (\"2h\")"},
	}
}

// Spec is a window as a tenant writes it.
type Spec struct {
	Schedule string
	Duration string
}

// Gate holds a tenant's scheduled work to its say: a pause first, then
// its maintenance window. Every kind of work (updates, certificate
// restarts) asks its own Gate, so a tenant reads the same answer, in the
// same words, in each condition.
type Gate struct {
	// Work is what is held, as messages say it ("updates", "restarts").
	Work string
	// Field is where the window is written ("spec.updates.window").
	Field string
	// PauseAnnotation pauses the work; PauseReason is the reason a pause
	// is reported with (each kind of work has its own).
	PauseAnnotation, PauseReason string
}

// Closed is why work may not start now.
type Closed struct {
	// Reason is the gate's PauseReason, ReasonOutside or ReasonInvalid.
	Reason string
	// Message says what holds the work and what ends the hold.
	Message string
	// Next is when a closed window opens (ReasonOutside), After how long
	// that is from now; both zero when only a change of the spec ends
	// the hold.
	Next  time.Time
	After time.Duration
}

// Check answers for work that is paused or not, held to the window w
// (nil: none) at now; nil: the work may start.
func (g Gate) Check(paused bool, w *Spec, now time.Time) *Closed {
	if paused {
		return g.Paused()
	}
	if w == nil {
		return nil
	}
	win, err := Parse(w.Schedule, w.Duration)
	return g.check(win, err, now)
}

// check answers for the window win, or err when it does not parse.
func (g Gate) check(win Window, err error, now time.Time) *Closed {
	if err != nil {
		return &Closed{Reason: ReasonInvalid, Message: fmt.Sprintf("%s: %v; no %s start until it is fixed", g.Field, err, g.Work)}
	}
	if win.Open(now) {
		return nil
	}
	next := win.NextOpen(now)
	if next.IsZero() {
		return &Closed{Reason: ReasonInvalid,
			Message: fmt.Sprintf("%s %s opens no more within five years; no %s start until it is fixed", g.Field, win, g.Work)}
	}
	return &Closed{Reason: ReasonOutside, Next: next, After: next.Sub(now),
		Message: fmt.Sprintf("%s %s is closed; it opens next at %s", g.Field, win, next.Format(time.RFC3339))}
}

// Paused is the answer for paused work.
func (g Gate) Paused() *Closed {
	return &Closed{Reason: g.PauseReason,
		Message: fmt.Sprintf("%s are paused by the annotation %s: \"true\"; remove it to resume", g.Work, g.PauseAnnotation)}
}
