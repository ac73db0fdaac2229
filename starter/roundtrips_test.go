package starter

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// statements records what a pool sends: each Query/Exec (BEGIN and COMMIT
// included) and each batch is one round trip once the connection's
// statement cache is warm.
type statements struct {
	mu   sync.Mutex
	sent []string
}

func (s *statements) add(sql string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, strings.Join(strings.Fields(sql), " "))
}

func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL)
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	s.add("batch of " + strings.Repeat("I", d.Batch.Len()))
	return ctx
}

func (s *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// checkedCall reports whether sent is store.EnqueueRunExpecting's one
// statement, weft_enqueue_run_checked, preceded by the reads' batch when
// batch is not "", and nothing else.
func checkedCall(sent []string, batch string) bool {
	if batch != "" {
		if len(sent) == 0 || sent[0] != batch {
			return false
		}
		sent = sent[1:]
	}
	return len(sent) == 1 && strings.HasPrefix(sent[0], "SELECT * FROM weft_enqueue_run_checked(")
}

// TestEnqueueRoundTrips pins the database round trips of an enqueue (issue
// 14: enqueue throughput). A workflow's first enqueue in a process reads
// everything it decides with in one batch and writes the run in one
// statement; after that, it decides from the reads cache and the one
// statement both checks that and writes the run, and a repeated key is
// that statement too. A regression that adds a round trip to this path
// fails here.
func TestEnqueueRoundTrips(t *testing.T) {
	t.Parallel()
	rec := &statements{}
	cfg, err := pgxpool.ParseConfig(testinfra.NewDatabase(t))
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := &store.Store{Pool: pool}
	_, tc := testinfra.SharedClient(t)
	s, err := New(Deps{Store: st, Temporal: tc, TaskQueue: "starter-test-" + uuid.NewString(), Resolver: resolver(t, st),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	require.NoError(t, err)
	tenant := "t1-" + uuid.NewString()
	publish(t, st, tenant, "items", itemGraph)
	ctx := context.Background()
	enqueue := func(key string) Accepted {
		t.Helper()
		acc, err := s.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: key}, trusted(tenant))
		require.NoError(t, err)
		return acc
	}
	rec.take()
	// The first enqueue loads and caches the compiled revision and the
	// reads: the batch, then the checked statement (weft_enqueue_run
	// alone carries no check).
	enqueue("warm")
	sent := rec.take()
	require.Len(t, sent, 3, "round trips of the first enqueue: %q", sent)
	require.Equal(t, "batch of III", sent[0], "round trips of the first enqueue: %q", sent)
	require.True(t, strings.HasPrefix(sent[1], "SELECT"), "round trips of the first enqueue (the compiled revision): %q", sent)
	require.True(t, checkedCall(sent[2:], ""), "round trips of the first enqueue: %q", sent)

	acc := enqueue("k1")
	require.True(t, acc.Created, "accepted = %+v", acc)
	require.Equal(t, execution.StatusQueued, acc.Status, "accepted = %+v", acc)
	sent = rec.take()
	require.True(t, checkedCall(sent, ""),
		"round trips of a new live enqueue: the run in one statement, no reads, no transaction around it: %q", sent)
	// (Before the batch: 13 round trips in all; before weft_enqueue_run, 9:
	// BEGIN, claim the binding, the limits check, the shared admission
	// lock and the check again under it, insert the run, read it back,
	// COMMIT; before the reads cache, 2: the batch and the statement.)

	again := enqueue("k1")
	require.False(t, again.Created, "accepted = %+v", again)
	require.Equal(t, acc.RunID, again.RunID, "accepted = %+v", again)
	sent = rec.take()
	require.True(t, checkedCall(sent, ""), "round trips of a repeated key: %q", sent)

	// A simulation reads no revocations, and shares the workflow's cached
	// reads.
	sim, err := s.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "s1",
		Mode: execution.ModeSimulation}, trusted(tenant))
	require.NoError(t, err)
	require.True(t, sim.Created, "accepted = %+v", sim)
	sent = rec.take()
	require.True(t, checkedCall(sent, ""), "round trips of a new simulation: %q", sent)

	// Another principal's revocations are not cached yet: the batch reads
	// them (and the workflow's part again), then the statement.
	bob := trusted(tenant)
	bob.Actor.Sub = "bob"
	_, err = s.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "b1"}, bob)
	require.NoError(t, err)
	sent = rec.take()
	require.True(t, checkedCall(sent, "batch of III"), "round trips of another principal's first enqueue: %q", sent)

	// A publish makes the cached revision stale: the statement refuses,
	// the batch reads the new one, the statement writes the run.
	publish(t, st, tenant, "items", strings.Replace(itemGraph, `"minLength": 1`, `"minLength": 1, "maxLength": 9`, 1))
	rec.take()
	two := enqueue("k2")
	require.Equal(t, 2, two.Revision, "accepted = %+v", two)
	sent = rec.take()
	require.Len(t, sent, 4, "round trips after a publish: %q", sent)
	require.True(t, checkedCall(sent[:1], ""), "round trips after a publish (the refused statement first): %q", sent)
	require.Equal(t, "batch of III", sent[1], "round trips after a publish: %q", sent)
	require.True(t, strings.HasPrefix(sent[2], "SELECT"), "round trips after a publish (the new compiled revision): %q", sent)
	require.True(t, checkedCall(sent[3:], ""), "round trips after a publish: %q", sent)
}
