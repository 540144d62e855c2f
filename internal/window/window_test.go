package window

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestOpenAndNextOpen(t *testing.T) {
	// Saturdays 02:00 to 04:00 UTC; 2026-11-28 is a Saturday.
	w, err := Parse("0 2 * * 6", "2h")
	require.NoError(t, err)
	for _, tc := range []struct {
		now  string
		open bool
		next string
	}{
		{"2026-11-27T23:00:00Z", false, "2026-11-28T02:00:00Z"},
		{"2026-11-28T01:59:59Z", false, "2026-11-28T02:00:00Z"},
		{"2026-11-28T02:00:00Z", true, "2026-11-28T02:00:00Z"},
		{"2026-11-28T03:59:59Z", true, "2026-11-28T03:59:59Z"},
		{"2026-11-28T04:00:00Z", false, "2026-12-05T02:00:00Z"},
		// Another zone is the same instant.
		{"2026-11-28T03:30:00+01:00", true, "2026-11-28T02:30:00Z"},
	} {
		now := at(tc.now)
		assert.Equal(t, tc.open, w.Open(now), "open at %s", tc.now)
		assert.Equal(t, at(tc.next), w.NextOpen(now), "next open after %s", tc.now)
		assert.Equal(t, time.UTC, w.NextOpen(now).Location())
	}
}

func TestReadInUTCWhateverTheHostsZone(t *testing.T) {
	old := time.Local
	time.Local = time.FixedZone("host", 5*3600)
	defer func() { time.Local = old }()
	w, err := Parse("@daily", "1h")
	require.NoError(t, err)
	assert.True(t, w.Open(at("2026-11-24T00:30:00Z")))
	assert.Equal(t, at("2026-11-25T00:00:00Z"), w.NextOpen(at("2026-11-24T01:00:00Z")))
}

func TestAWindowLongerThanItsPeriodIsAlwaysOpen(t *testing.T) {
	w, err := Parse("*/5 * * * *", "10m")
	require.NoError(t, err)
	for m := range 30 {
		assert.True(t, w.Open(at("2026-11-24T10:00:00Z").Add(time.Duration(m)*time.Minute+17*time.Second)))
	}
}

func TestRefused(t *testing.T) {
	for _, tc := range []struct{ schedule, duration, says string }{
		{"0 0 30 2 *", "1h", "never fires"},
		{"", "1h", "empty"},
		{"0 2 * *", "1h", "schedule"},
		{"61 2 * * *", "1h", "schedule"},
		{"CRON_TZ=Europe/Paris 0 2 * * *", "1h", "UTC"},
		{"TZ=../../../etc/passwd 0 2 * * *", "1h", "UTC"},
		{"@every 1h", "1h", "@every"},
		{"0 2 * * *", "30s", "outside"},
		{"0 2 * * *", "200h", "outside"},
		{"0 2 * * *", "two hours", "duration"},
		{strings.Repeat("1", 300), "1h", "characters"},
		{"0 2 * * *", strings.Repeat("1", 40) + "h", "characters"},
	} {
		_, err := Parse(tc.schedule, tc.duration)
		require.Error(t, err, "%q for %q", tc.schedule, tc.duration)
		assert.Contains(t, err.Error(), tc.says)
	}
	_, err := Parse("0 0 30 2 *", "1h")
	assert.True(t, errors.Is(err, ErrNeverOpens))
	// February 29th fires, in leap years.
	w, err := Parse("0 0 29 2 *", "1h")
	require.NoError(t, err)
	assert.Equal(t, at("2028-02-29T00:00:00Z"), w.NextOpen(at("2026-11-24T00:00:00Z")))
}

func TestTheZeroWindowIsNeverOpen(t *testing.T) {
	var w Window
	assert.False(t, w.Open(time.Now()))
	assert.True(t, w.NextOpen(time.Now()).IsZero())
}

// FuzzWindow: no schedule panics or takes long, and what NextOpen answers
// is open.
func FuzzWindow(f *testing.F) {
	for _, s := range []string{"0 2 * * 6", "*/7 1-5 */3 1,6 *", "@weekly", "0 0 30 2 *", "59 23 31 12 *", "0 0 29 2 1"} {
		f.Add(s, int64(3600), int64(0))
	}
	f.Fuzz(func(t *testing.T, schedule string, seconds, offset int64) {
		w, err := New(schedule, time.Duration(seconds)*time.Second)
		if err != nil {
			return
		}
		now := at("2026-11-24T10:00:00Z").Add(time.Duration(offset%(10*365*86400)) * time.Second)
		next := w.NextOpen(now)
		if next.IsZero() {
			return
		}
		if next.Before(now) || !w.Open(next) {
			t.Fatalf("%s: next open %s after %s is not open", w, next, now)
		}
	})
}
