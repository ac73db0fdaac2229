package activities

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
)

// fakeConstants answers RunConstants from runs by tenant and run, counting
// the reads; err, when set, is every read's answer.
type fakeConstants struct {
	mu    sync.Mutex
	runs  map[runKey]execution.RunConstants
	err   error
	reads []runKey
}

func (f *fakeConstants) RunConstants(_ context.Context, tenantID, runID string) (execution.RunConstants, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := runKey{tenantID, runID}
	f.reads = append(f.reads, k)
	if f.err != nil {
		return execution.RunConstants{}, f.err
	}
	c, ok := f.runs[k]
	if !ok {
		return execution.RunConstants{}, failure.ErrNotFound
	}
	return c, nil
}

var aliceRun = execution.RunConstants{WorkflowKey: "wf", Checksum: "sha256-a", Mode: execution.ModeLive,
	Actor: execution.Actor{Kind: "user", Sub: "alice"}, Permissions: []string{"notes.write"}, TenantName: "A"}

// echoInput is a node runner answering with the input it was given.
func echoInput(got *execution.NodeInput) nodeRunner {
	return func(_ context.Context, in execution.NodeInput) (execution.NodeResult, error) {
		*got = in
		return execution.NodeResult{Port: "out"}, nil
	}
}

// The cache is keyed by tenant and run: a run's constants are read once
// per worker, and the same run id under another tenant is another read,
// which finds nothing.
func TestRunConstantsCacheIsKeyedByTenantAndRun(t *testing.T) {
	src := &fakeConstants{runs: map[runKey]execution.RunConstants{{"tenant-a", "run-1"}: aliceRun}}
	var got execution.NodeInput
	run := withRunConstants(echoInput(&got), newRunConstants(src, 8))
	in := execution.NodeInput{TenantID: "tenant-a", RunID: "run-1", NodeID: "n", Attempt: 1, Lean: true}
	for range 3 {
		_, err := run(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, in.WithConstants(aliceRun), got)
		require.False(t, got.Lean)
	}
	require.Equal(t, []runKey{{"tenant-a", "run-1"}}, src.reads, "one read for the run's three attempts")

	other := in
	other.TenantID = "tenant-b"
	_, err := run(context.Background(), other)
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, execution.ErrRunNotFound, ae.Type())
	require.True(t, ae.NonRetryable())
	_, err = run(context.Background(), other)
	require.ErrorAs(t, err, &ae, "a run not found is not remembered either way")
	require.Equal(t, []runKey{{"tenant-a", "run-1"}, {"tenant-b", "run-1"}, {"tenant-b", "run-1"}}, src.reads)

	// A full input reads nothing and is passed on as it came.
	full := in.WithConstants(execution.RunConstants{WorkflowKey: "own", Mode: execution.ModeSimulation})
	_, err = run(context.Background(), full)
	require.NoError(t, err)
	require.Equal(t, full, got)
	require.Len(t, src.reads, 3)
}

// An unreachable store while reading the constants is an infrastructure
// fault (STORE_UNAVAILABLE: the interpreter re-dispatches the attempt
// without spending it), not remembered: the next dispatch reads again.
func TestRunConstantsOutageIsAnInfrastructureFault(t *testing.T) {
	src := &fakeConstants{runs: map[runKey]execution.RunConstants{{"tenant-a", "run-1"}: aliceRun},
		err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	var got execution.NodeInput
	run := durable(withRunConstants(echoInput(&got), newRunConstants(src, 8)), 0)
	in := execution.NodeInput{TenantID: "tenant-a", RunID: "run-1", NodeID: "n", Attempt: 1, Lean: true}
	_, err := run(context.Background(), in)
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, execution.ErrStoreUnavailable, ae.Type(), "%v", err)
	require.True(t, execution.IsInfraError(ae.Type()))

	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	_, err = run(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, aliceRun.Permissions, got.Permissions)
}

// A record whose mode is neither live nor simulation runs nothing: an
// unknown mode is not safely either.
func TestRunConstantsRefuseAnUnknownMode(t *testing.T) {
	odd := aliceRun
	odd.Mode = "dry-run"
	src := &fakeConstants{runs: map[runKey]execution.RunConstants{{"tenant-a", "run-1"}: odd}}
	var got execution.NodeInput
	run := withRunConstants(echoInput(&got), newRunConstants(src, 8))
	_, err := run(context.Background(), execution.NodeInput{TenantID: "tenant-a", RunID: "run-1", Lean: true})
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, execution.ErrRunNotFound, ae.Type())
	require.True(t, ae.NonRetryable())
}

// observed logs a lean attempt with the constants read for it.
func TestObservedLogsTheCompletedInput(t *testing.T) {
	src := &fakeConstants{runs: map[runKey]execution.RunConstants{{"tenant-a", "run-1"}: aliceRun}}
	var got execution.NodeInput
	var out bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	run := observed(withRunConstants(echoInput(&got), newRunConstants(src, 8)), nil, logger)
	_, err := run(context.Background(), execution.NodeInput{TenantID: "tenant-a", RunID: "run-1", NodeID: "n", Lean: true})
	require.NoError(t, err)
	require.Contains(t, out.String(), `"workflowKey":"wf"`)
	require.Contains(t, out.String(), `"mode":"live"`)
}

// workflowConstants is fakeConstants that also answers by workflow id.
type workflowConstants struct {
	fakeConstants
	workflows map[runKey]string // (tenant, workflow id) → run id
}

func (w *workflowConstants) RunConstantsOfWorkflow(ctx context.Context, tenantID, workflowID string) (string, execution.RunConstants, error) {
	runID, ok := w.workflows[runKey{tenantID, workflowID}]
	if !ok {
		return "", execution.RunConstants{}, failure.ErrNotFound
	}
	c, err := w.RunConstants(ctx, tenantID, runID)
	return runID, c, err
}

// A prefetch keeps the run's constants under its tenant and run, so the
// run's first attempt reads nothing; one that finds no run of the tenant,
// or a run of an unknown mode, keeps nothing and the attempt reads (and
// refuses) as before.
func TestPrefetchedConstantsSpareTheFirstAttemptItsRead(t *testing.T) {
	odd := aliceRun
	odd.Mode = "replay"
	src := &workflowConstants{
		fakeConstants: fakeConstants{runs: map[runKey]execution.RunConstants{{"tenant-a", "run-1"}: aliceRun, {"tenant-a", "run-2"}: odd}},
		workflows:     map[runKey]string{{"tenant-a", "wf-1"}: "run-1", {"tenant-a", "wf-2"}: "run-2"},
	}
	consts := newRunConstants(src, 8)
	prefetch := func(tenantID, workflowID string) {
		var wg sync.WaitGroup
		wg.Add(1)
		consts.prefetch(tenantID, workflowID, wg.Done)
		wg.Wait()
	}
	prefetch("tenant-a", "wf-1")
	prefetch("tenant-b", "wf-1") // another tenant's workflow id: nothing
	prefetch("tenant-a", "wf-2") // a mode neither live nor simulation: not kept
	require.Equal(t, []runKey{{"tenant-a", "run-1"}, {"tenant-a", "run-2"}}, src.reads)

	var got execution.NodeInput
	run := withRunConstants(echoInput(&got), consts)
	_, err := run(context.Background(), execution.NodeInput{TenantID: "tenant-a", RunID: "run-1", Lean: true})
	require.NoError(t, err)
	require.Equal(t, aliceRun.Permissions, got.Permissions)
	require.Len(t, src.reads, 2, "the first attempt found the prefetched constants")

	_, err = run(context.Background(), execution.NodeInput{TenantID: "tenant-b", RunID: "run-1", Lean: true})
	requireErrType(t, err, execution.ErrRunNotFound)
	_, err = run(context.Background(), execution.NodeInput{TenantID: "tenant-a", RunID: "run-2", Lean: true})
	requireErrType(t, err, execution.ErrRunNotFound)
	require.Len(t, src.reads, 4, "what the prefetch did not keep is read by the attempt")

	// A source that cannot read by workflow id prefetches nothing.
	plain := newRunConstants(&fakeConstants{}, 8)
	done := false
	plain.prefetch("tenant-a", "wf-1", func() { done = true })
	require.True(t, done)
}

// requireErrType asserts err is an application error of type errType.
func requireErrType(t *testing.T, err error, errType string) {
	t.Helper()
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, errType, ae.Type())
}
