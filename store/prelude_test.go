package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// TestReadForEnqueueAgreesWithSingleReads: the batch answers exactly what
// BoundRun, GetRevision / LatestRevision, GetWorkflow, GetWorkflowLimits
// and RevokedScopes answer one by one, in every state an enqueue meets.
func TestReadForEnqueueAgreesWithSingleReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	c1, p1, raw := compileExample(t, "")
	c2, p2, _ := compileExample(t, "true")

	check := func(name string, key, idem string, rev *int, sub string) {
		t.Helper()
		got, err := st.ReadForEnqueue(ctx, store.EnqueueLookup{TenantID: "t1", WorkflowKey: key, IdempotencyKey: idem,
			Revision: rev, RevokedOf: sub})
		require.NoError(t, err, name)

		bound, ok, err := st.BoundRun(ctx, "t1", key, idem)
		require.NoError(t, err, name)
		require.Equal(t, ok, got.BoundOK, "%s: bound", name)
		if ok {
			require.Equal(t, bound, got.Bound, "%s: bound run", name)
		}

		_, err = st.GetWorkflow(ctx, "t1", key)
		require.Equal(t, err == nil, got.WorkflowFound, "%s: workflow found (GetWorkflow: %v)", name, err)
		if err != nil {
			require.ErrorIs(t, err, failure.ErrNotFound, name)
		}
		limits, err := st.GetWorkflowLimits(ctx, "t1", key)
		if got.WorkflowFound {
			require.NoError(t, err, name)
			require.Equal(t, limits, got.Limits, "%s: limits", name)
		} else {
			require.ErrorIs(t, err, failure.ErrNotFound, name)
		}

		var want store.Revision
		if rev != nil {
			want, err = st.GetRevision(ctx, "t1", key, *rev)
		} else {
			want, err = st.LatestRevision(ctx, "t1", key)
		}
		require.Equal(t, err == nil, got.RevisionFound, "%s: revision found (single read: %v)", name, err)
		if err == nil {
			require.Equal(t, want, got.Revision, "%s: revision", name)
		} else {
			require.ErrorIs(t, err, failure.ErrNotFound, name)
		}

		if sub == "" {
			require.Nil(t, got.Revoked, "%s: no revocations asked for", name)
		} else {
			revoked, err := st.RevokedScopes(ctx, "t1", sub)
			require.NoError(t, err, name)
			require.Equal(t, revoked, got.Revoked, "%s: revocations", name)
		}
	}
	one, two, three := 1, 2, 3

	check("missing workflow", "orders", "k", nil, "alice")
	check("missing workflow, named revision", "orders", "k", &one, "alice")

	_, err := st.CreateWorkflow(ctx, "t1", "orders", raw, "alice")
	require.NoError(t, err)
	check("never published", "orders", "k", nil, "alice")
	check("never published, named revision", "orders", "k", &one, "")

	_, _, err = st.Publish(ctx, "t1", "orders", 1, c1, p1, "pub")
	require.NoError(t, err)
	_, err = st.SaveDraft(ctx, "t1", "orders", 1, raw, "alice")
	require.NoError(t, err)
	_, _, err = st.Publish(ctx, "t1", "orders", 2, c2, p2, "pub")
	require.NoError(t, err)
	check("latest of two", "orders", "k", nil, "alice")
	check("named first", "orders", "k", &one, "alice")
	check("named second", "orders", "k", &two, "alice")
	check("named missing", "orders", "k", &three, "alice")

	maxRuns, perMinute := 3, 10
	_, _, err = st.SetWorkflowLimits(ctx, store.WorkflowLimits{TenantID: "t1", WorkflowKey: "orders", MaxConcurrentRuns: &maxRuns,
		MaxStartsPerMinute: &perMinute, UpdatedBy: "admin"})
	require.NoError(t, err)
	_, _, err = st.AddRevocation(ctx, "t1", "alice", "notes.write")
	require.NoError(t, err)
	_, _, err = st.AddRevocation(ctx, "t1", "alice", "actions.run")
	require.NoError(t, err)
	_, _, err = st.AddRevocation(ctx, "t2", "alice", "other.tenant")
	require.NoError(t, err)
	check("limits and revocations", "orders", "k", nil, "alice")
	check("another actor", "orders", "k", nil, "bob")

	run := store.Run{RunID: "r1", TenantID: "t1", WorkflowKey: "orders", Revision: 2, Checksum: c2.Checksum, Mode: "live",
		Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-r1"}
	_, created, err := st.CreateRun(ctx, run, "k")
	require.NoError(t, err)
	require.True(t, created)
	check("bound key", "orders", "k", nil, "alice")
	check("bound key, named revision", "orders", "k", &one, "")
	check("another key", "orders", "k2", nil, "alice")
}

// BenchmarkEnqueueReads is what an enqueue reads before its transaction,
// from 20 goroutines at once (the weftbench enqueue load): the five single
// reads it made before (binding, latest revision number, revision,
// revocations, limits) against the one batch.
func BenchmarkEnqueueReads(b *testing.B) {
	ctx := context.Background()
	st := testinfra.NewStore(b)
	c, p, raw := compileExample(b, "")
	if _, err := st.CreateWorkflow(ctx, "t1", "orders", raw, "alice"); err != nil {
		b.Fatal(err)
	}
	if _, _, err := st.Publish(ctx, "t1", "orders", 1, c, p, "pub"); err != nil {
		b.Fatal(err)
	}
	b.Run("single", func(b *testing.B) {
		b.SetParallelism(10)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, _, err := st.BoundRun(ctx, "t1", "orders", "k"); err != nil {
					b.Error(err)
					return
				}
				if _, err := st.LatestRevision(ctx, "t1", "orders"); err != nil {
					b.Error(err)
					return
				}
				if _, err := st.RevokedScopes(ctx, "t1", "alice"); err != nil {
					b.Error(err)
					return
				}
				if _, err := st.GetWorkflowLimits(ctx, "t1", "orders"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("batch", func(b *testing.B) {
		b.SetParallelism(10)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := st.ReadForEnqueue(ctx, store.EnqueueLookup{TenantID: "t1", WorkflowKey: "orders",
					IdempotencyKey: "k", RevokedOf: "alice"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
