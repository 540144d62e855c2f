package window

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheGateSaysOneThingForEveryKindOfWork: a pause first, then the
// window; an update and a restart held by the same window read the same
// reason and the same words, but for what is held.
func TestTheGateSaysOneThingForEveryKindOfWork(t *testing.T) {
	now := time.Date(2026, 11, 24, 1, 30, 0, 0, time.UTC)
	for _, g := range []Gate{
		{Work: "updates", Field: "spec.updates.window", PauseAnnotation: "example/updates-paused", PauseReason: "UpdatesPaused"},
		{Work: "restarts", Field: "spec.updates.window", PauseAnnotation: "example/restarts-paused", PauseReason: "RestartsPaused"},
	} {
		t.Run(g.Work, func(t *testing.T) {
			open := &Spec{Schedule: "0 1 * * *", Duration: "1h"}
			assert.Nil(t, g.Check(false, nil, now), "no window: free")
			assert.Nil(t, g.Check(false, open, now), "inside its window")

			c := g.Check(true, open, now)
			require.NotNil(t, c, "a pause holds inside the window too")
			assert.Equal(t, &Closed{Reason: g.PauseReason,
				Message: g.Work + ` are paused by the annotation ` + g.PauseAnnotation + `: "true"; remove it to resume`}, c)

			c = g.Check(false, &Spec{Schedule: "0 2 * * *", Duration: "1h"}, now)
			require.NotNil(t, c)
			assert.Equal(t, ReasonOutside, c.Reason)
			assert.Equal(t, time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC), c.Next)
			assert.Equal(t, 30*time.Minute, c.After)
			assert.Equal(t, `spec.updates.window "0 2 * * *" for 1h0m0s is closed; it opens next at 2026-11-24T02:00:00Z`, c.Message)

			c = g.Check(false, &Spec{Schedule: "0 0 30 2 *", Duration: "1h"}, now)
			require.NotNil(t, c)
			assert.Equal(t, ReasonInvalid, c.Reason)
			assert.Contains(t, c.Message, "spec.updates.window: ", "the field is named")
			assert.Contains(t, c.Message, "never fires")
			assert.Contains(t, c.Message, "no "+g.Work+" start until it is fixed")
			assert.Zero(t, c.After, "looked at again when the spec changes")

			// A schedule cron finds no firing for within five years (New
			// refuses those it can tell): invalid as well, for every work.
			c = g.check(Window{}, nil, now)
			require.NotNil(t, c)
			assert.Equal(t, ReasonInvalid, c.Reason)
			assert.Contains(t, c.Message, "opens no more within five years")
			assert.Zero(t, c.After)
		})
	}
}

func TestTheWindowsReasonsAreDeclaredOnceWithTheRemedy(t *testing.T) {
	rs := Reasons()
	require.Len(t, rs, 2)
	assert.Equal(t, ReasonOutside, rs[0].Name)
	assert.Equal(t, ReasonInvalid, rs[1].Name)
	assert.Contains(t, rs[1].Remedy, "five-field cron schedule")
}
