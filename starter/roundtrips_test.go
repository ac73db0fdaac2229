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

// oneEnqueueCall reports whether sent is the reads' batch (named) and then
// store.EnqueueRun's one statement, weft_enqueue_run, and nothing else.
func oneEnqueueCall(sent []string, batch string) bool {
	return len(sent) == 2 && sent[0] == batch && strings.HasPrefix(sent[1], "SELECT * FROM weft_enqueue_run(")
}

// TestEnqueueRoundTrips pins the database round trips of an enqueue (issue
// 14: enqueue throughput). Everything read before the run is written is
// one batch, and the run is written in one statement; a repeated key costs
// that batch and nothing else. A regression that adds a round trip to this
// path fails here.
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
	// The first enqueue loads and caches the compiled revision.
	enqueue("warm")
	rec.take()

	acc := enqueue("k1")
	require.True(t, acc.Created, "accepted = %+v", acc)
	require.Equal(t, execution.StatusQueued, acc.Status, "accepted = %+v", acc)
	sent := rec.take()
	require.True(t, oneEnqueueCall(sent, "batch of III"),
		"round trips of a new live enqueue: the reads, then the run in one statement with no transaction around it: %q", sent)
	// (Before the batch: 13 round trips in all; before weft_enqueue_run, 9:
	// BEGIN, claim the binding, the limits check, the shared admission
	// lock and the check again under it, insert the run, read it back,
	// COMMIT.)

	again := enqueue("k1")
	require.False(t, again.Created, "accepted = %+v", again)
	require.Equal(t, acc.RunID, again.RunID, "accepted = %+v", again)
	sent = rec.take()
	require.Equal(t, []string{"batch of III"}, sent, "round trips of a repeated key")

	// A simulation reads no revocations.
	sim, err := s.Enqueue(ctx, Request{WorkflowKey: "items", Input: json.RawMessage(`{"id":"a"}`), IdempotencyKey: "s1",
		Mode: execution.ModeSimulation}, trusted(tenant))
	require.NoError(t, err)
	require.True(t, sim.Created, "accepted = %+v", sim)
	sent = rec.take()
	require.True(t, oneEnqueueCall(sent, "batch of II"), "round trips of a new simulation: %q", sent)
}
