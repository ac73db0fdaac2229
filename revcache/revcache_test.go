package revcache_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/revcache"
	"github.com/weftworks/weft/store"
)

// The polls below wait for what the cache does in the background; their
// deadline is generous because CI's machine is busy. Nothing sleeps to
// synchronise.
const (
	waitFor = 60 * time.Second
	tick    = 10 * time.Millisecond
	// longLease keeps a cache usable through the stalls of a busy
	// machine, where a test needs it usable throughout.
	longLease = 20 * time.Second
)

// reads counts the revocation reads a pool sends (store.RevokedScopes).
type reads struct{ n atomic.Int64 }

func (r *reads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "FROM revocations WHERE tenant_id = $1 AND sub = $2") {
		r.n.Add(1)
	}
	return ctx
}

func (r *reads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the reads counted since the last take.
func (r *reads) take() int64 { return r.n.Swap(0) }

// backend is the store a cache runs on, with switches a test flips: a
// failing heartbeat, and a listener on another store (through a proxy).
type backend struct {
	*store.Store
	listen    *store.Store
	failBeats atomic.Bool
	// deaf drops every notification before the cache sees it.
	deaf atomic.Bool
}

var errBeatsOff = errors.New("heartbeats switched off by the test")

func (b *backend) BeatRevocationHolder(ctx context.Context, id string, acked int64, lease time.Duration) (int64, error) {
	if b.failBeats.Load() {
		return 0, errBeatsOff
	}
	return b.Store.BeatRevocationHolder(ctx, id, acked, lease)
}

func (b *backend) ListenRevocations(ctx context.Context, logger *slog.Logger, l store.RevocationListener) {
	src := b.Store
	if b.listen != nil {
		src = b.listen
	}
	src.ListenRevocations(ctx, logger, deafListener{l, &b.deaf})
}

type deafListener struct {
	store.RevocationListener
	deaf *atomic.Bool
}

func (d deafListener) Changed(ch store.RevocationChange) {
	if !d.deaf.Load() {
		d.RevocationListener.Changed(ch)
	}
}

type harness struct {
	t      *testing.T
	url    string
	reads  *reads
	cached *backend
	// writer revokes, as the API process does: another pool.
	writer *store.Store
	cache  *revcache.Cache
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newHarness starts a cache with cfg on a fresh database; the cache stops
// when the test ends. listenVia, when given, is the URL its listener
// connects to.
func newHarness(t *testing.T, cfg revcache.Config, listenVia func(url string) string) *harness {
	t.Helper()
	url := testinfra.NewDatabase(t)
	h := &harness{t: t, url: url, reads: &reads{}}
	pcfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	pcfg.ConnConfig.Tracer = h.reads
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	h.cached = &backend{Store: &store.Store{Pool: pool}}
	if listenVia != nil {
		ls, err := store.Open(context.Background(), listenVia(url))
		require.NoError(t, err)
		t.Cleanup(ls.Close)
		h.cached.listen = ls
	}
	h.writer, err = store.Open(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(h.writer.Close)
	h.cache, err = revcache.New(cfg, h.cached, quiet())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.cache.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return h
}

func (h *harness) waitUntil(what string, cond func(revcache.Status) bool) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return cond(h.cache.Status()) }, waitFor, tick, "%s; status %+v", what, h.cache.Status())
}

func (h *harness) waitUsable() {
	h.t.Helper()
	h.waitUntil("the cache becomes usable", func(s revcache.Status) bool { return s.Usable })
}

func (h *harness) lookup(tenant, sub string) []string {
	h.t.Helper()
	v, err := h.cache.RevokedScopes(context.Background(), tenant, sub)
	require.NoError(h.t, err)
	return v
}

// epoch is the revocations' current seq.
func (h *harness) epoch() int64 {
	h.t.Helper()
	var seq int64
	require.NoError(h.t, h.writer.Pool.QueryRow(context.Background(), `SELECT seq FROM revocation_epoch`).Scan(&seq))
	return seq
}

// ackedInDB is the holder's acked seq as its row says.
func (h *harness) ackedInDB() int64 {
	h.t.Helper()
	var acked int64
	require.NoError(h.t, h.writer.Pool.QueryRow(context.Background(),
		`SELECT acked_seq FROM revocation_cache_holders WHERE holder_id = $1`, h.cache.Status().Holder).Scan(&acked))
	return acked
}

// TestCacheHitsDoNoQuery: a usable cache reads a key once; every later
// lookup of it sends nothing to PostgreSQL.
func TestCacheHitsDoNoQuery(t *testing.T) {
	t.Parallel()
	h := newHarness(t, revcache.Config{Lease: longLease}, nil)
	require.NoError(t, h.writer.Revoke(context.Background(), "t1", "ada", "notes.write"))
	h.waitUsable()
	h.reads.take()

	require.Equal(t, []string{"notes.write"}, h.lookup("t1", "ada"))
	require.EqualValues(t, 1, h.reads.take(), "a miss reads through once")
	for range 100 {
		require.Equal(t, []string{"notes.write"}, h.lookup("t1", "ada"))
	}
	require.EqualValues(t, 0, h.reads.take(), "hits send no query")
	require.Empty(t, h.lookup("t2", "ada"), "another tenant's key")
	require.EqualValues(t, 1, h.reads.take(), "another key is a miss")
	require.True(t, h.cache.Status().Usable, "the cache stayed usable, so the counts above are the cache's: %+v", h.cache.Status())
}

// TestRevokeReturnsAfterTheHolderAcked: a revocation and its removal
// return only once the live holder acknowledged them, and the very next
// lookup from the cache sees each.
func TestRevokeReturnsAfterTheHolderAcked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, revcache.Config{Lease: longLease}, nil)
	ctx := context.Background()
	h.waitUsable()
	require.Empty(t, h.lookup("t1", "ada"))
	require.Empty(t, h.lookup("t1", "bob"))
	h.reads.take()

	for i := range 5 {
		require.NoError(t, h.writer.Revoke(ctx, "t1", "ada", "notes.write"))
		require.GreaterOrEqual(t, h.ackedInDB(), h.epoch(), "round %d: the revoke returned before the holder acked", i)
		require.Equal(t, []string{"notes.write"}, h.lookup("t1", "ada"), "round %d: the next lookup after the revoke", i)
		require.NoError(t, h.writer.Unrevoke(ctx, "t1", "ada", "notes.write"))
		require.GreaterOrEqual(t, h.ackedInDB(), h.epoch(), "round %d: the restore returned before the holder acked", i)
		require.Empty(t, h.lookup("t1", "ada"), "round %d: the next lookup after the restore", i)
	}
	// Only the changed key was dropped: bob's entry still answers.
	h.reads.take()
	require.Empty(t, h.lookup("t1", "bob"))
	require.EqualValues(t, 0, h.reads.take(), "an unchanged key stays cached")
	require.True(t, h.cache.Status().Usable, "status %+v", h.cache.Status())
}

// TestLostNotificationIsCaughtByTheHeartbeat: a holder that hears no
// notification still acks at its next heartbeat, having dropped its whole
// cache, and the revoke waits for that.
func TestLostNotificationIsCaughtByTheHeartbeat(t *testing.T) {
	t.Parallel()
	h := newHarness(t, revcache.Config{Lease: longLease, Heartbeat: time.Second}, nil)
	ctx := context.Background()
	h.waitUsable()
	require.Empty(t, h.lookup("t1", "ada"))
	require.Empty(t, h.lookup("t1", "bob"))
	h.cached.deaf.Store(true)

	require.NoError(t, h.writer.Revoke(ctx, "t1", "ada", "notes.write"))
	require.GreaterOrEqual(t, h.ackedInDB(), h.epoch(), "the revoke returned before the holder acked")
	require.Equal(t, []string{"notes.write"}, h.lookup("t1", "ada"), "the next lookup after the revoke")
	h.reads.take()
	require.Empty(t, h.lookup("t1", "bob"))
	require.EqualValues(t, 1, h.reads.take(), "a heartbeat ahead of the notifications drops every key")
}

// TestLapsedHolderReadsThrough: once its heartbeats fail for a lease the
// cache answers nothing from memory, and a revocation no longer waits for
// it; when they succeed again the cache is used again.
func TestLapsedHolderReadsThrough(t *testing.T) {
	t.Parallel()
	h := newHarness(t, revcache.Config{Lease: 2 * time.Second, Heartbeat: 200 * time.Millisecond}, nil)
	ctx := context.Background()
	h.waitUsable()
	h.cached.failBeats.Store(true)
	h.waitUntil("the lease lapses", func(s revcache.Status) bool { return !s.Usable })

	h.reads.take()
	require.Empty(t, h.lookup("t1", "ada"))
	require.Empty(t, h.lookup("t1", "ada"))
	require.EqualValues(t, 2, h.reads.take(), "a lapsed cache reads every lookup through")

	// The holder's row lapses by the database clock too: the revoke
	// returns without its ack, and the next lookup reads it.
	require.NoError(t, h.writer.Revoke(ctx, "t1", "ada", "notes.write"))
	require.Equal(t, []string{"notes.write"}, h.lookup("t1", "ada"))

	// Heartbeats succeed again: lookups are answered from the cache again
	// (polled: on a stalled machine the short lease may lapse between two
	// lookups).
	h.cached.failBeats.Store(false)
	h.waitUsable()
	var wrong string
	require.Eventually(t, func() bool {
		for i := range 2 {
			if i == 1 {
				h.reads.take()
			}
			v, err := h.cache.RevokedScopes(ctx, "t1", "ada")
			if err != nil || len(v) != 1 || v[0] != "notes.write" {
				wrong = fmt.Sprintf("%q, %v", v, err)
				return true
			}
		}
		return h.reads.take() == 0
	}, waitFor, tick, "a renewed lease never answered from the cache; status %+v", h.cache.Status())
	require.Empty(t, wrong, "a lookup after the lease was renewed")
}

// TestLostListenConnectionDropsTheCache: while the listener's connection
// is down the cache reads through, and it comes back empty.
func TestLostListenConnectionDropsTheCache(t *testing.T) {
	t.Parallel()
	var proxy *testinfra.TCPProxy
	h := newHarness(t, revcache.Config{Lease: longLease}, func(url string) string {
		u, err := neturl.Parse(url)
		require.NoError(t, err)
		proxy = testinfra.NewTCPProxy(t, u.Host)
		return testinfra.ThroughProxy(t, url, proxy)
	})
	h.waitUsable()
	require.Empty(t, h.lookup("t1", "ada"))
	h.reads.take()
	require.Empty(t, h.lookup("t1", "ada"))
	require.EqualValues(t, 0, h.reads.take(), "cached before the cut")
	connects := h.cache.Status().Connects

	proxy.Cut()
	h.waitUntil("the listener is lost", func(s revcache.Status) bool { return !s.Listening })
	require.Zero(t, h.cache.Status().Entries, "the cache was dropped with the connection")
	require.Empty(t, h.lookup("t1", "ada"))
	require.Empty(t, h.lookup("t1", "ada"))
	require.EqualValues(t, 2, h.reads.take(), "without a listener every lookup reads through")
	require.Zero(t, h.cache.Status().Entries, "nothing is cached without a listener")

	proxy.Restore()
	h.waitUntil("the listener reconnects", func(s revcache.Status) bool { return s.Connects > connects && s.Usable })
	require.Empty(t, h.lookup("t1", "ada"))
	require.EqualValues(t, 1, h.reads.take(), "the reconnected cache starts empty")
	require.Empty(t, h.lookup("t1", "ada"))
	require.EqualValues(t, 0, h.reads.take(), "and caches again")
}

// TestRevokeDoesNotWaitForADeadHolder: a holder that heartbeated and died
// holds a revocation only until its lease (and the margin) lapsed by the
// database clock; a holder row that lapsed long ago is pruned.
func TestRevokeDoesNotWaitForADeadHolder(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	_, err := st.BeatRevocationHolder(ctx, "dead", 0, 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, st.Revoke(ctx, "t1", "ada", "notes.write"))
	var lapsed bool
	require.NoError(t, st.Pool.QueryRow(ctx, `SELECT now() >= heartbeat_at + make_interval(secs => (lease_ms + $1) / 1000.0)
		FROM revocation_cache_holders WHERE holder_id = 'dead'`, store.RevocationLeaseMargin.Milliseconds()).Scan(&lapsed))
	require.True(t, lapsed, "the revoke returned while the dead holder's lease still ran")
	// Lapsed, it is not waited for at all.
	require.NoError(t, st.Unrevoke(ctx, "t1", "ada", "notes.write"))

	_, err = st.BeatRevocationHolder(ctx, "alive", 0, 2*time.Second)
	require.NoError(t, err)
	_, err = st.Pool.Exec(ctx, `UPDATE revocation_cache_holders SET heartbeat_at = now() - interval '2 hours' WHERE holder_id = 'dead'`)
	require.NoError(t, err)
	require.NoError(t, st.PruneRevocationHolders(ctx, time.Hour))
	var left []string
	rows, err := st.Pool.Query(ctx, `SELECT holder_id FROM revocation_cache_holders ORDER BY holder_id`)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"alive"}, left)
}

// TestStoppedCacheLeaves: a stopped cache reads through and removes its
// holder row, so revocations stop waiting for it at once.
func TestStoppedCacheLeaves(t *testing.T) {
	t.Parallel()
	url := testinfra.NewDatabase(t)
	st, err := store.Open(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	c, err := revcache.New(revcache.Config{Lease: longLease}, st, quiet())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Run(ctx)
	}()
	require.Eventually(t, func() bool { return c.Status().Usable }, waitFor, tick)
	var n int
	require.NoError(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM revocation_cache_holders WHERE holder_id = $1`, c.Status().Holder).Scan(&n))
	require.Equal(t, 1, n, "a running cache has its holder row")
	cancel()
	wg.Wait()
	require.False(t, c.Status().Usable)
	require.NoError(t, st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM revocation_cache_holders`).Scan(&n))
	require.Zero(t, n, "a stopped cache removed its holder row")
	v, err := c.RevokedScopes(context.Background(), "t1", "ada")
	require.NoError(t, err)
	require.Empty(t, v)
}

// TestConfigIsChecked: a lease out of bounds or a heartbeat too slow for
// it is refused.
func TestConfigIsChecked(t *testing.T) {
	st := &store.Store{}
	for _, cfg := range []revcache.Config{{Lease: -time.Second}, {Lease: time.Minute}, {Lease: 4 * time.Second, Heartbeat: 2 * time.Second}, {MaxEntries: -1}} {
		_, err := revcache.New(cfg, st, nil)
		require.Error(t, err, "%+v accepted", cfg)
	}
	_, err := revcache.New(revcache.Config{}, nil, nil)
	require.Error(t, err, "no backend accepted")
}
