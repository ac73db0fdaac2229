package activities

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/store"
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
	res, err := withCarriedEvents(waits, newRunAppends(rec, appended), slog.Default())(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, 3, res.EventsThrough)

	in.Events = draftBatch(2, 5) // 2 and 3 unconfirmed as far as the interpreter knows
	res, err = withCarriedEvents(waits, newRunAppends(rec, appended), slog.Default())(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, 5, res.EventsThrough)

	in.RunID = "other" // nothing known of this run: everything is sent
	in.Events = draftBatch(4, 5)
	_, err = withCarriedEvents(waits, newRunAppends(rec, appended), slog.Default())(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"k1", "k2", "k3"}, {"k4", "k5"}, {"k4", "k5"}}, rec.calls)

	// An attempt that never waits confirms at most its own batch, and never
	// more than is known committed.
	in.RunID = "r"
	in.Events = draftBatch(6, 6)
	res, err = withCarriedEvents(answers, newRunAppends(rec, appended), slog.Default())(context.Background(), in)
	require.NoError(t, err)
	require.Contains(t, []int{5, 6}, res.EventsThrough)
}

func TestUnappended(t *testing.T) {
	b := draftBatch(4, 6)
	for known, want := range map[int]int{0: 3, 3: 3, 4: 2, 5: 1, 6: 0, 9: 0} {
		require.Len(t, unappended(b, known), want, "known %d", known)
	}
}

// blockingAppender records each append's keys; each call first says so
// on entered, then waits for a token on gate.
type blockingAppender struct {
	recordingAppender
	entered, gate chan struct{}
}

func newBlockingAppender(tokens int) *blockingAppender {
	return &blockingAppender{entered: make(chan struct{}, 16), gate: make(chan struct{}, tokens)}
}

func (b *blockingAppender) AppendEvents(ctx context.Context, tenantID, runID string, evs []execution.EventDraft, upd *execution.RunUpdate) error {
	b.entered <- struct{}{}
	select {
	case <-b.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.recordingAppender.AppendEvents(ctx, tenantID, runID, evs, upd)
}

func (b *blockingAppender) sent() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]string(nil), b.calls...)
}

// laneUsers is how many appends of run r are in its lane, sending or waiting.
func laneUsers(r *runAppends, runID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.lanes[runKey{"t", runID}]; l != nil {
		return l.users
	}
	return 0
}

// Carried batches of one run that wait behind its append in flight are
// sent as one append of the latest, less what the first committed: every
// event once, two appends instead of four; each waiting carrier returns
// once its events are committed.
func TestCarriedAppendsOfARunTakeTurnsAndCoalesce(t *testing.T) {
	app := newBlockingAppender(0)
	r := newRunAppends(app, newAppendedRuns(8))
	ctx := context.Background()
	errs := make(chan error, 4)
	go func() { errs <- r.carry(ctx, "t", "r", draftBatch(1, 2)) }()
	<-app.entered // sending its batch
	for through := 3; through <= 5; through++ {
		go func() { errs <- r.carry(ctx, "t", "r", draftBatch(1, through)) }() // the whole unconfirmed prefix
	}
	require.Eventually(t, func() bool { return laneUsers(r, "r") == 4 }, 30*time.Second, time.Millisecond)
	require.Empty(t, app.sent(), "nothing is sent before the gate opens")
	for range 2 {
		app.gate <- struct{}{}
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, [][]string{{"k1", "k2"}, {"k3", "k4", "k5"}}, app.sent())
	require.Equal(t, 5, r.appended.through("t", "r"))
	require.Zero(t, laneUsers(r, "r"), "the lane is dropped once nobody uses it")
}

// Suffixes of one run (interpreter version 7: each attempt carries only
// its own events) that wait behind its append in flight are sent as one
// append: the chain of batches each continuing the one before, every
// event once, two appends instead of four, whichever waiting carrier gets
// the turn first.
func TestCarriedSuffixesOfARunCoalesce(t *testing.T) {
	app := newBlockingAppender(0)
	r := newRunAppends(app, newAppendedRuns(8))
	ctx := context.Background()
	errs := make(chan error, 4)
	go func() { errs <- r.carry(ctx, "t", "r", draftBatch(1, 2)) }()
	<-app.entered                               // sending its batch
	for through := 5; through >= 3; through-- { // the later ones first: any may get the turn
		go func() { errs <- r.carry(ctx, "t", "r", suffixBatch(through-1, through)) }()
		require.Eventually(t, func() bool { return laneUsers(r, "r") == 7-through }, 30*time.Second, time.Millisecond)
	}
	for range 2 {
		app.gate <- struct{}{}
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, [][]string{{"k1", "k2"}, {"k3", "k4", "k5"}}, app.sent())
	require.Equal(t, 5, r.appended.through("t", "r"))
}

func TestCoalesced(t *testing.T) {
	b := suffixBatch(3, 4)
	waiting := []*execution.EventBatch{suffixBatch(5, 6), b, suffixBatch(4, 5), suffixBatch(8, 9)}
	send := coalesced(b, waiting, 3)
	require.Equal(t, 3, send.After)
	require.Equal(t, 6, send.Through)
	require.Equal(t, []string{"k4", "k5", "k6"}, []string{send.Events[0].Key, send.Events[1].Key, send.Events[2].Key})

	// An earlier batch not known committed comes first: the chain from it holds b.
	send = coalesced(b, []*execution.EventBatch{b, suffixBatch(2, 3)}, 2)
	require.Equal(t, 2, send.After)
	require.Equal(t, 4, send.Through)
	require.Len(t, send.Events, 2)

	// A chain broken before b: b goes with what continues it.
	send = coalesced(b, []*execution.EventBatch{b, suffixBatch(1, 2), suffixBatch(4, 5)}, 0)
	require.Equal(t, 3, send.After)
	require.Equal(t, 5, send.Through)

	// A later whole prefix holds everything unconfirmed.
	prefix := draftBatch(1, 7)
	require.Same(t, prefix, coalesced(b, []*execution.EventBatch{b, prefix, suffixBatch(4, 5)}, 0))
}

// A flush waits for the run's append in flight, then sends all it was
// given (a flush's batch is never coalesced).
func TestFlushWaitsForTheRunsAppendInFlight(t *testing.T) {
	app := newBlockingAppender(0)
	r := newRunAppends(app, newAppendedRuns(8))
	ctx := context.Background()
	carried := make(chan error, 1)
	go func() { carried <- r.carry(ctx, "t", "r", draftBatch(1, 2)) }()
	<-app.entered
	flushed := make(chan error, 1)
	go func() {
		flushed <- r.Flush(ctx, execution.AppendEventsInput{TenantID: "t", RunID: "r", Events: draftBatch(1, 3).Events})
	}()
	require.Eventually(t, func() bool { return laneUsers(r, "r") == 2 }, 30*time.Second, time.Millisecond)
	require.Empty(t, app.entered, "the flush started sending while the run's append was in flight")

	app.gate <- struct{}{}
	require.NoError(t, <-carried)
	app.gate <- struct{}{}
	require.NoError(t, <-flushed)
	require.Equal(t, [][]string{{"k1", "k2"}, {"k1", "k2", "k3"}}, app.sent())
}

// A flush that names its last ordinal (interpreter version 4 on) leaves
// out the events this worker saw committed by the time it has the run's
// turn, and always applies its run update; without an ordinal it sends
// all it was given. A flush never counts as a committed carried batch.
func TestFlushLeavesOutWhatIsKnownCommitted(t *testing.T) {
	app := &updateRecorder{}
	r := newRunAppends(app, newAppendedRuns(8))
	ctx := context.Background()
	require.NoError(t, r.carry(ctx, "t", "r", draftBatch(1, 2)))
	done := &execution.RunUpdate{Status: execution.StatusSucceeded}

	flush := func(first, through int, upd *execution.RunUpdate, named bool) {
		in := execution.AppendEventsInput{TenantID: "t", RunID: "r", Events: draftBatch(first, through).Events, Run: upd}
		if named {
			in.Through = through
		}
		require.NoError(t, r.Flush(ctx, in))
	}
	flush(1, 4, done, true)  // k1, k2 committed by the carried batch
	flush(1, 4, done, false) // no ordinal (before version 4): all of it
	flush(1, 2, nil, true)   // nothing new, no update: no append at all
	flush(2, 2, done, true)  // nothing new, but the run's update
	require.Equal(t, []updateCall{
		{keys: []string{"k1", "k2"}},
		{keys: []string{"k3", "k4"}, status: execution.StatusSucceeded},
		{keys: []string{"k1", "k2", "k3", "k4"}, status: execution.StatusSucceeded},
		{keys: []string{}, status: execution.StatusSucceeded},
	}, app.calls)
	require.Equal(t, 2, r.appended.through("t", "r"), "a flush is not recorded as committed")
}

// A flush behind the run's carried append in flight sends only what that
// append did not commit.
func TestFlushAfterTheAppendInFlightSendsTheRest(t *testing.T) {
	app := newBlockingAppender(0)
	r := newRunAppends(app, newAppendedRuns(8))
	ctx := context.Background()
	carried := make(chan error, 1)
	go func() { carried <- r.carry(ctx, "t", "r", draftBatch(1, 2)) }()
	<-app.entered
	flushed := make(chan error, 1)
	go func() {
		flushed <- r.Flush(ctx, execution.AppendEventsInput{TenantID: "t", RunID: "r", Events: draftBatch(1, 3).Events, Through: 3})
	}()
	require.Eventually(t, func() bool { return laneUsers(r, "r") == 2 }, 30*time.Second, time.Millisecond)
	require.Empty(t, app.entered, "the flush started sending while the run's append was in flight")
	app.gate <- struct{}{}
	require.NoError(t, <-carried)
	app.gate <- struct{}{}
	require.NoError(t, <-flushed)
	require.Equal(t, [][]string{{"k1", "k2"}, {"k3"}}, app.sent())
}

// updateRecorder records each append's keys and the status of its run update.
type updateRecorder struct {
	calls []updateCall
}

type updateCall struct {
	keys   []string
	status string
}

func (u *updateRecorder) AppendEvents(_ context.Context, _, _ string, evs []execution.EventDraft, upd *execution.RunUpdate) error {
	c := updateCall{keys: []string{}}
	for _, e := range evs {
		c.keys = append(c.keys, e.Key)
	}
	if upd != nil {
		c.status = upd.Status
	}
	u.calls = append(u.calls, c)
	return nil
}

// A carrier waiting for its run's turn gives up with its context.
func TestCarriedAppendWaitingForItsTurnEndsWithItsContext(t *testing.T) {
	app := newBlockingAppender(0)
	r := newRunAppends(app, newAppendedRuns(8))
	first := make(chan error, 1)
	go func() { first <- r.carry(context.Background(), "t", "r", draftBatch(1, 1)) }()
	<-app.entered
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error, 1)
	go func() { waiting <- r.carry(ctx, "t", "r", draftBatch(1, 2)) }()
	require.Eventually(t, func() bool { return laneUsers(r, "r") == 2 }, 30*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-waiting, context.Canceled)
	app.gate <- struct{}{}
	require.NoError(t, <-first)
	require.Equal(t, [][]string{{"k1"}}, app.sent())
	require.Equal(t, 1, r.appended.through("t", "r"))
}

// checkingAppender is a store's carried appends in memory: it logs keys
// once, refuses a suffix (After) unless an append vouched for every event
// through After (Through), and counts the events each call sent.
type checkingAppender struct {
	mu       sync.Mutex
	logged   []string
	has      map[string]bool
	through  int
	sent     int
	refusals int
}

func (c *checkingAppender) AppendEvents(ctx context.Context, tenantID, runID string, evs []execution.EventDraft, upd *execution.RunUpdate) error {
	return c.AppendCarried(ctx, store.AppendRequest{TenantID: tenantID, RunID: runID, Events: evs, Update: upd})
}

func (c *checkingAppender) AppendCarried(_ context.Context, r store.AppendRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.After > 0 && c.through < r.After {
		c.refusals++
		return store.ErrEventsGap
	}
	if c.has == nil {
		c.has = map[string]bool{}
	}
	for _, e := range r.Events {
		c.sent++
		if !c.has[e.Key] {
			c.has[e.Key] = true
			c.logged = append(c.logged, e.Key)
		}
	}
	c.through = max(c.through, r.Through)
	return nil
}

func suffixBatch(after, through int) *execution.EventBatch {
	b := draftBatch(after+1, through)
	b.After = after
	return b
}

// suffixInput is an attempt's input carrying the suffix after..through of
// run r as interpreter version 7 sends it (NodeInput.Suffix); its events'
// keys expand to r/n/1/e<ordinal>.
func suffixInput(after, through int) execution.NodeInput {
	c := &execution.CompactBatch{Base: time.Unix(1, 0).UTC(), After: after, Through: through}
	for o := after + 1; o <= through; o++ {
		c.Events = append(c.Events, execution.CompactEvent{Key: fmt.Sprintf("n/1/e%d", o)})
	}
	return execution.NodeInput{TenantID: "t", RunID: "r", Suffix: c}
}

func prefixBatch(first, through int) *execution.EventBatch {
	b := &execution.EventBatch{Through: through}
	for o := first; o <= through; o++ {
		b.Events = append(b.Events, execution.EventDraft{Key: fmt.Sprintf("r/n/1/e%d", o)})
	}
	return b
}

func eventKeys(first, through int) []string {
	var out []string
	for o := first; o <= through; o++ {
		out = append(out, fmt.Sprintf("r/n/1/e%d", o))
	}
	return out
}

func TestMerged(t *testing.T) {
	b := draftBatch(1, 3)
	require.Same(t, b, merged(b, nil))
	require.Same(t, b, merged(b, draftBatch(1, 2)))
	prefix := draftBatch(2, 5)
	require.Same(t, prefix, merged(b, prefix), "a later prefix holds everything unconfirmed")
	require.Same(t, b, merged(b, suffixBatch(4, 6)), "a suffix after a gap waits for its own turn")
	m := merged(b, suffixBatch(3, 6))
	require.Equal(t, 6, m.Through)
	require.Zero(t, m.After)
	require.Len(t, m.Events, 6)
	require.Equal(t, "k6", m.Events[5].Key)
	m = merged(suffixBatch(3, 4), suffixBatch(4, 6))
	require.Equal(t, 3, m.After)
	require.Equal(t, []string{"k4", "k5", "k6"}, []string{m.Events[0].Key, m.Events[1].Key, m.Events[2].Key})
}

// A suffix whose preceding events are not in the log is refused and
// tried again until they are; it is never appended before them, and an
// attempt that waited for it fails as an infrastructure fault (EVENTS_GAP)
// when they never come, while one that answered after the refusal was
// final says so (EventsRefused).
func TestCarriedSuffixWaitsForTheEventsBeforeIt(t *testing.T) {
	ctx := context.Background()
	st := &checkingAppender{}
	r := newRunAppends(st, newAppendedRuns(8))
	r.gapWait = 200 * time.Millisecond
	waits := func(ctx context.Context, _ execution.NodeInput) (execution.NodeResult, error) {
		return execution.NodeResult{Port: "out"}, awaitCarried(ctx)
	}

	// The first carrier's prefix (1-3) arrives while the suffix (4-5) is
	// being refused: the suffix goes once it has.
	done := make(chan error, 1)
	go func() {
		_, err := withCarriedEvents(waits, r, slog.Default())(ctx, suffixInput(3, 5))
		done <- err
	}()
	require.Eventually(t, func() bool { st.mu.Lock(); defer st.mu.Unlock(); return st.refusals > 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, r.carry(ctx, "t", "r", prefixBatch(1, 3)))
	require.NoError(t, <-done)
	require.Equal(t, eventKeys(1, 5), st.logged)
	require.Equal(t, 5, st.sent, "each event sent once")

	// Nothing ever brings 6: the suffix 7 is refused for good.
	_, err := withCarriedEvents(waits, r, slog.Default())(ctx, suffixInput(6, 7))
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, execution.ErrEventsGap, app.Type())
	require.False(t, app.NonRetryable())
	require.True(t, execution.IsInfraError(app.Type()))

	slow := func(ctx context.Context, _ execution.NodeInput) (execution.NodeResult, error) {
		<-ctx.Value(carriedKey{}).(*carried).done // answers once the append gave up
		return execution.NodeResult{Port: "out"}, nil
	}
	res, err := withCarriedEvents(slow, r, slog.Default())(ctx, suffixInput(6, 7))
	require.NoError(t, err)
	require.True(t, res.EventsRefused)
	require.Equal(t, 5, res.EventsThrough)
	require.Equal(t, eventKeys(1, 5), st.logged)

	// A recorder that knows no ordinals refuses every suffix.
	require.ErrorIs(t, newRunAppends(&recordingAppender{}, newAppendedRuns(8)).carry(ctx, "t", "x", suffixBatch(1, 2)), store.ErrEventsGap)
}

// On one worker a chain's carriers take turns: a suffix waiting behind its
// predecessor is sent with it, and each event goes once.
func TestCarriedSuffixJoinsThePrefixAheadOfIt(t *testing.T) {
	ctx := context.Background()
	gate := newBlockingAppender(0)
	st := &checkingAppender{}
	both := &gatedChecking{blockingAppender: gate, st: st}
	r := newRunAppends(both, newAppendedRuns(8))
	first := make(chan error, 1)
	go func() { first <- r.carry(ctx, "t", "r", draftBatch(1, 3)) }()
	<-gate.entered // 1-3 holds the run's turn
	second := make(chan error, 1)
	go func() { second <- r.carry(ctx, "t", "r", suffixBatch(3, 5)) }()
	require.Eventually(t, func() bool { return laneUsers(r, "r") == 2 }, 5*time.Second, time.Millisecond)
	gate.gate <- struct{}{}
	gate.gate <- struct{}{}
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	go func() { gate.gate <- struct{}{} }()
	require.NoError(t, r.carry(ctx, "t", "r", suffixBatch(5, 6)))
	require.Equal(t, []string{"k1", "k2", "k3", "k4", "k5", "k6"}, st.logged)
	require.Equal(t, 6, st.sent, "each event sent once")
	require.Zero(t, st.refusals)
}

// gatedChecking is checkingAppender behind blockingAppender's gate.
type gatedChecking struct {
	*blockingAppender
	st *checkingAppender
}

func (g *gatedChecking) AppendCarried(ctx context.Context, r store.AppendRequest) error {
	g.entered <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.st.AppendCarried(ctx, r)
}

// keyedGroups records each group as its requests' event keys; each group
// first says so on entered, then waits for a token on gate.
type keyedGroups struct {
	entered, gate chan struct{}

	mu     sync.Mutex
	groups [][][]string
}

func (g *keyedGroups) AppendEventsGroup(_ context.Context, reqs []store.AppendRequest) []error {
	g.entered <- struct{}{}
	<-g.gate
	group := make([][]string, len(reqs))
	for i, r := range reqs {
		group[i] = []string{}
		for _, e := range r.Events {
			group[i] = append(group[i], e.Key)
		}
		if r.Update != nil {
			group[i] = append(group[i], "update:"+r.Update.Status)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.groups = append(g.groups, group)
	return make([]error, len(reqs))
}

// A run's final flush that comes while its carried appends are in flight
// and waiting is sent in the transaction of the waiting ones, right after
// them, instead of waiting for that commit and making one of its own: two
// commits where there were three. It sends what it would have sent alone
// (what was known committed before that transaction, and its update).
func TestFlushRidesWithTheWaitingCarriedAppend(t *testing.T) {
	store := &keyedGroups{entered: make(chan struct{}, 16), gate: make(chan struct{}, 16)}
	r := newRunAppends(&recordingAppender{}, newAppendedRuns(8))
	g := newAppendGroups(store, maxAppendGroup)
	r.events, r.carried, r.together = g, g, g
	ctx := context.Background()

	carried := make(chan error, 2)
	go func() { carried <- r.carry(ctx, "t", "r", draftBatch(1, 2)) }()
	<-store.entered // in flight
	go func() { carried <- r.carry(ctx, "t", "r", suffixBatch(2, 4)) }()
	require.Eventually(t, func() bool { return laneUsers(r, "r") == 2 }, 30*time.Second, time.Millisecond)
	flushed := make(chan error, 1)
	go func() {
		flushed <- r.Flush(ctx, execution.AppendEventsInput{TenantID: "t", RunID: "r", Events: draftBatch(1, 6).Events, Through: 6,
			Run: &execution.RunUpdate{Status: execution.StatusSucceeded}})
	}()
	require.Eventually(t, func() bool { return laneUsers(r, "r") == 3 }, 30*time.Second, time.Millisecond)

	for range 3 { // one more than it takes: a flush sent alone does not hang the test
		store.gate <- struct{}{}
	}
	require.NoError(t, <-carried)
	require.NoError(t, <-carried)
	require.NoError(t, <-flushed)
	require.Equal(t, [][][]string{
		{{"k1", "k2"}},
		{{"k3", "k4"}, {"k3", "k4", "k5", "k6", "update:succeeded"}},
	}, store.groups)
	require.Equal(t, 4, r.appended.through("t", "r"), "the flush is never recorded as committed")
	require.Zero(t, laneUsers(r, "r"))
}
