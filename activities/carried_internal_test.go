package activities

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
)

// recordingAppender records what each append sent.
type recordingAppender struct {
	mu    sync.Mutex
	calls [][]string // event keys per call
}

func (r *recordingAppender) AppendEvents(_ context.Context, _, _ string, evs []execution.EventDraft, _ *execution.RunUpdate) error {
	keys := []string{}
	for _, e := range evs {
		keys = append(keys, e.Key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, keys)
	return nil
}

func draftBatch(first, through int) *execution.EventBatch {
	b := &execution.EventBatch{Through: through}
	for o := first; o <= through; o++ {
		b.Events = append(b.Events, execution.EventDraft{Key: fmt.Sprintf("k%d", o)})
	}
	return b
}

// A batch carries the whole unconfirmed prefix; what this worker already
// saw committed is not sent again, and an attempt that waited confirms its
// whole batch while one that did not confirms what is known committed.
func TestCarriedAppendSendsOnlyWhatIsNotKnownAppended(t *testing.T) {
	rec := &recordingAppender{}
	appended := newAppendedRuns(8)
	waits := func(ctx context.Context, _ execution.NodeInput) (execution.NodeResult, error) {
		return execution.NodeResult{Port: "out"}, awaitCarried(ctx)
	}
	answers := func(context.Context, execution.NodeInput) (execution.NodeResult, error) {
		return execution.NodeResult{Port: "out"}, nil
	}
	in := execution.NodeInput{TenantID: "t", RunID: "r", Events: draftBatch(1, 3)}
	res, err := withCarriedEvents(waits, rec, appended, slog.Default())(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, 3, res.EventsThrough)

	in.Events = draftBatch(2, 5) // 2 and 3 unconfirmed as far as the interpreter knows
	res, err = withCarriedEvents(waits, rec, appended, slog.Default())(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, 5, res.EventsThrough)

	in.RunID = "other" // nothing known of this run: everything is sent
	in.Events = draftBatch(4, 5)
	_, err = withCarriedEvents(waits, rec, appended, slog.Default())(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"k1", "k2", "k3"}, {"k4", "k5"}, {"k4", "k5"}}, rec.calls)

	// An attempt that never waits confirms at most its own batch, and never
	// more than is known committed.
	in.RunID = "r"
	in.Events = draftBatch(6, 6)
	res, err = withCarriedEvents(answers, rec, appended, slog.Default())(context.Background(), in)
	require.NoError(t, err)
	require.Contains(t, []int{5, 6}, res.EventsThrough)
}

func TestUnappended(t *testing.T) {
	b := draftBatch(4, 6)
	for known, want := range map[int]int{0: 3, 3: 3, 4: 2, 5: 1, 6: 0, 9: 0} {
		require.Len(t, unappended(b, known), want, "known %d", known)
	}
}
