package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// gatedGroups records each group's runs; each call first says so on
// entered, then waits for a token on gate. A run named in refuse gets an
// error of its own.
type gatedGroups struct {
	entered, gate chan struct{}
	refuse        string

	mu     sync.Mutex
	groups [][]string
}

func newGatedGroups() *gatedGroups {
	return &gatedGroups{entered: make(chan struct{}, 16), gate: make(chan struct{}, 16)}
}

func (g *gatedGroups) AppendEventsGroup(ctx context.Context, reqs []store.AppendRequest) []error {
	g.entered <- struct{}{}
	<-g.gate
	runs := make([]string, len(reqs))
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		runs[i] = r.RunID
		if r.RunID == g.refuse {
			errs[i] = errors.New("refused " + r.RunID)
		}
	}
	slices.Sort(runs)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.groups = append(g.groups, runs)
	return errs
}

func (g *gatedGroups) sent() [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.groups)
}

func waitingAppends(g *appendGroups) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

// An append on an idle worker goes out at once, alone; those that arrive
// while it is in flight go out together as the next group, each learning
// its own outcome.
func TestCarriedAppendsOfDifferentRunsShareTheNextCommit(t *testing.T) {
	st := newGatedGroups()
	st.refuse = "c"
	g := newAppendGroups(st, maxAppendGroup)
	ctx := context.Background()
	errs := map[string]chan error{}
	for _, run := range []string{"a", "b", "c", "d"} {
		errs[run] = make(chan error, 1)
	}
	go func() { errs["a"] <- g.AppendEvents(ctx, "t", "a", draftBatch(1, 1).Events, nil) }()
	<-st.entered // a's group is in flight
	for _, run := range []string{"b", "c", "d"} {
		go func() { errs[run] <- g.AppendEvents(ctx, "t", run, draftBatch(1, 2).Events, nil) }()
	}
	require.Eventually(t, func() bool { return waitingAppends(g) == 3 }, 30*time.Second, time.Millisecond)
	st.gate <- struct{}{}
	require.NoError(t, <-errs["a"])
	st.gate <- struct{}{}
	require.NoError(t, <-errs["b"])
	require.EqualError(t, <-errs["c"], "refused c")
	require.NoError(t, <-errs["d"])
	require.Equal(t, [][]string{{"a"}, {"b", "c", "d"}}, st.sent())
	g.mu.Lock()
	defer g.mu.Unlock()
	require.False(t, g.leading, "the group sender still runs with nobody waiting")
}

// A group carries at most max appends; the rest go in the next.
func TestAppendGroupsAreBounded(t *testing.T) {
	st := newGatedGroups()
	g := newAppendGroups(st, 2)
	ctx := context.Background()
	errs := make(chan error, 5)
	go func() { errs <- g.AppendEvents(ctx, "t", "a", nil, nil) }()
	<-st.entered
	for _, run := range []string{"b", "c", "d", "e"} {
		go func() { errs <- g.AppendEvents(ctx, "t", run, nil, nil) }()
	}
	require.Eventually(t, func() bool { return waitingAppends(g) == 4 }, 30*time.Second, time.Millisecond)
	for range 3 {
		st.gate <- struct{}{}
	}
	for range 5 {
		require.NoError(t, <-errs)
	}
	sizes := []int{}
	for _, grp := range st.sent() {
		sizes = append(sizes, len(grp))
	}
	require.Equal(t, []int{1, 2, 2}, sizes)
}

// An append whose caller gave up while it waited is not sent.
func TestAppendGroupsLeaveOutAnAppendItsCallerGaveUp(t *testing.T) {
	st := newGatedGroups()
	g := newAppendGroups(st, maxAppendGroup)
	first := make(chan error, 1)
	go func() { first <- g.AppendEvents(context.Background(), "t", "a", nil, nil) }()
	<-st.entered
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- g.AppendEvents(ctx, "t", "b", nil, nil) }()
	kept := make(chan error, 1)
	go func() { kept <- g.AppendEvents(context.Background(), "t", "c", nil, nil) }()
	require.Eventually(t, func() bool { return waitingAppends(g) == 2 }, 30*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-gaveUp, context.Canceled)
	st.gate <- struct{}{}
	st.gate <- struct{}{}
	require.NoError(t, <-first)
	require.NoError(t, <-kept)
	assert.Equal(t, [][]string{{"a"}, {"c"}}, st.sent())
}

// Many runs' attempts carrying their growing prefixes at once, through
// the worker's grouped appends into PostgreSQL: every run's log holds each
// event once, in order, its chain verifying, whichever appends shared a
// commit.
func TestGroupedCarriedAppendsKeepEveryRunsLog(t *testing.T) {
	st := testinfra.NewStore(t)
	ctx := context.Background()
	const runs, attempts = 12, 5
	r := newGroupedRunAppends(st, newAppendedRuns(appendedRunsSize))
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("run-%d", i)
		_, _, err := st.CreateRun(ctx, store.Run{RunID: ids[i], TenantID: "t", WorkflowKey: "wf", Checksum: "c",
			Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-" + ids[i]}, ids[i])
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, runs*attempts)
	for _, id := range ids {
		for a := 1; a <= attempts; a++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b := &execution.EventBatch{Through: a, Run: &execution.RunUpdate{Status: execution.StatusRunning}}
				for o := 1; o <= a; o++ {
					b.Events = append(b.Events, execution.EventDraft{Key: fmt.Sprintf("%s/n/%d/node.started", id, o),
						Type: execution.EventNodeStarted, NodeID: "n", Attempt: o, At: time.Now(), Data: json.RawMessage(`{}`)})
				}
				errs <- r.carry(ctx, "t", id, b)
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, id := range ids {
		evs, err := st.ListEvents(ctx, "t", id, 0, 100)
		require.NoError(t, err)
		require.Len(t, evs, attempts, "run %s", id)
		for i, e := range evs {
			require.Equal(t, i+1, e.Attempt, "run %s seq %d", id, e.Seq)
		}
		require.NoError(t, st.VerifyChain(ctx, "t", id))
		run, err := st.GetRun(ctx, "t", id)
		require.NoError(t, err)
		require.Equal(t, execution.StatusRunning, run.Status)
		require.Equal(t, attempts, r.appended.through("t", id))
	}
}

// groupsOnly is a gatedGroups that refuses to append alone: with
// newGroupedRunAppends every append, flushes included, goes through a group.
type groupsOnly struct {
	*gatedGroups
	events map[string][]string // run -> keys sent in groups
}

func (g groupsOnly) AppendEvents(context.Context, string, string, []execution.EventDraft, *execution.RunUpdate) error {
	return errors.New("an append went out alone, outside a group")
}

func (g groupsOnly) AppendEventsGroup(ctx context.Context, reqs []store.AppendRequest) []error {
	errs := g.gatedGroups.AppendEventsGroup(ctx, reqs)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range reqs {
		for _, e := range r.Events {
			g.events[r.RunID] = append(g.events[r.RunID], e.Key)
		}
	}
	return errs
}

// A flush (the AppendEvents local activity) shares the next commit with
// other runs' carried appends that wait at the same time, sending exactly
// the events it was given; on an idle worker it goes out at once.
func TestFlushesJoinTheNextGroupCommit(t *testing.T) {
	st := groupsOnly{newGatedGroups(), map[string][]string{}}
	r := newGroupedRunAppends(st, newAppendedRuns(8))
	ctx := context.Background()
	errs := map[string]chan error{}
	for _, run := range []string{"a", "b", "c"} {
		errs[run] = make(chan error, 1)
	}
	go func() {
		errs["a"] <- r.Flush(ctx, execution.AppendEventsInput{TenantID: "t", RunID: "a", Events: draftBatch(1, 2).Events})
	}()
	select { // a's flush is in flight, alone
	case <-st.entered:
	case err := <-errs["a"]:
		t.Fatalf("the flush did not go through a group: %v", err)
	}
	go func() { errs["b"] <- r.carry(ctx, "t", "b", draftBatch(1, 2)) }()
	go func() {
		errs["c"] <- r.Flush(ctx, execution.AppendEventsInput{TenantID: "t", RunID: "c", Events: draftBatch(2, 3).Events})
	}()
	g := r.events.(*appendGroups)
	require.Same(t, g, r.carried, "flushes and carried batches share one group sender")
	require.Eventually(t, func() bool { return waitingAppends(g) == 2 }, 30*time.Second, time.Millisecond)
	st.gate <- struct{}{}
	st.gate <- struct{}{}
	for _, run := range []string{"a", "b", "c"} {
		require.NoError(t, <-errs[run])
	}
	require.Equal(t, [][]string{{"a"}, {"b", "c"}}, st.sent())
	st.mu.Lock()
	defer st.mu.Unlock()
	require.Equal(t, map[string][]string{"a": {"k1", "k2"}, "b": {"k1", "k2"}, "c": {"k2", "k3"}}, st.events)
	require.Equal(t, 2, r.appended.through("t", "b"))
	require.Zero(t, r.appended.through("t", "c"), "a flush confirms nothing to the carried batches' record")
}
