package activities

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
)

// lazyInput is an attempt's input carrying the prefix 1..through of run r
// lazily (interpreter version 9), appended only from until.
func lazyInput(through int, until time.Time) execution.NodeInput {
	c := &execution.CompactBatch{Base: time.Unix(1, 0).UTC(), Through: through}
	for o := 1; o <= through; o++ {
		c.Events = append(c.Events, execution.CompactEvent{Key: "n/1/e" + string(rune('0'+o))})
	}
	return execution.NodeInput{TenantID: "t", RunID: "r", Carried: c, CarryLazyUntil: until}
}

func (c *checkingAppender) loggedKeys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.logged...)
}

// Events carried lazily are appended only if the attempt still runs at
// their time: a quick attempt appends nothing, reports nothing appended
// and no append starts after it returned; a slow one appends them while
// it runs and confirms them (EventsThrough) before it answers; one that
// waits for them (awaitCarried) appends them at once; a refused suffix is
// reported as for any carrier.
func TestLazilyCarriedEventsAppendOnlyPastTheirTime(t *testing.T) {
	ctx := context.Background()
	answers := func(context.Context, execution.NodeInput) (execution.NodeResult, error) {
		return execution.NodeResult{Port: "out"}, nil
	}

	st := &checkingAppender{}
	r := newRunAppends(st, newAppendedRuns(8))
	res, err := withCarriedEvents(answers, r, slog.Default())(ctx, lazyInput(3, time.Now().Add(2*time.Second)))
	require.NoError(t, err)
	require.Zero(t, res.EventsThrough, "nothing appended")
	time.Sleep(2500 * time.Millisecond) // past its time: still nothing, the attempt returned
	require.Empty(t, st.loggedKeys())

	var during []string
	slow := func(context.Context, execution.NodeInput) (execution.NodeResult, error) {
		time.Sleep(2 * time.Second)
		during = st.loggedKeys()
		return execution.NodeResult{Port: "out"}, nil
	}
	res, err = withCarriedEvents(slow, r, slog.Default())(ctx, lazyInput(3, time.Now().Add(100*time.Millisecond)))
	require.NoError(t, err)
	require.Equal(t, 3, res.EventsThrough)
	require.Equal(t, eventKeys(1, 3), during, "appended while the attempt ran")

	st2 := &checkingAppender{}
	r2 := newRunAppends(st2, newAppendedRuns(8))
	waits := func(ctx context.Context, _ execution.NodeInput) (execution.NodeResult, error) {
		return execution.NodeResult{Port: "out"}, awaitCarried(ctx)
	}
	res, err = withCarriedEvents(waits, r2, slog.Default())(ctx, lazyInput(2, time.Now().Add(time.Hour)))
	require.NoError(t, err)
	require.Equal(t, 2, res.EventsThrough, "an attempt that waits starts the append at once")
	require.Equal(t, eventKeys(1, 2), st2.loggedKeys())

	st3 := &checkingAppender{}
	r3 := newRunAppends(st3, newAppendedRuns(8))
	r3.gapWait = 50 * time.Millisecond
	in := suffixInput(3, 5)
	in.CarryLazyUntil = time.Now()
	slowSuffix := func(context.Context, execution.NodeInput) (execution.NodeResult, error) {
		time.Sleep(2 * time.Second)
		return execution.NodeResult{Port: "out"}, nil
	}
	res, err = withCarriedEvents(slowSuffix, r3, slog.Default())(ctx, in)
	require.NoError(t, err)
	require.True(t, res.EventsRefused, "the events before the suffix never came")
	require.Zero(t, res.EventsThrough)
	require.Empty(t, st3.loggedKeys())
}
