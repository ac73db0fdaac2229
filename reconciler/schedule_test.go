package reconciler

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSchedule: a full pass first, recent passes from shortly before the
// last successful pass while the last full one is younger than the full
// interval, a full pass again after a failed recent one (its window would
// be lost) and once the interval is over.
func TestSchedule(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	every := 5 * time.Minute
	var s schedule

	full, _ := s.next(t0, every)
	require.True(t, full, "the first pass is full")
	s.done(t0, true, errors.New("postgres down"))
	full, _ = s.next(t0.Add(10*time.Second), every)
	require.True(t, full, "until a full pass succeeds")
	s.done(t0.Add(10*time.Second), true, nil)

	now := t0.Add(20 * time.Second)
	full, since := s.next(now, every)
	require.False(t, full)
	require.Equal(t, t0.Add(10*time.Second).Add(-recentOverlap), since, "from before the last successful pass")
	s.done(now, false, nil)

	now = now.Add(10 * time.Second)
	full, since = s.next(now, every)
	require.False(t, full)
	require.Equal(t, t0.Add(20*time.Second).Add(-recentOverlap), since)
	s.done(now, false, errors.New("visibility cannot answer"))

	now = now.Add(10 * time.Second)
	full, _ = s.next(now, every)
	require.True(t, full, "a failed recent pass is followed by a full one")
	s.done(now, true, nil)

	full, _ = s.next(now.Add(every-time.Second), every)
	require.False(t, full)
	full, _ = s.next(now.Add(every), every)
	require.True(t, full, "a full pass every full interval")

	s.fullOnly = true // visibility refused the query
	full, _ = s.next(now.Add(time.Second), every)
	require.True(t, full, "without visibility every pass is full")
}
