// Package revcache caches, in a worker process, the scopes revoked from
// each (tenant, sub), so a node attempt re-authorizes without a PostgreSQL
// round trip, while a revocation still takes effect at the next attempt
// (SPEC §8) in every worker.
//
// The protocol (migration 00022, store/revocationcache.go):
//
//   - Every change of revocations bumps revocation_epoch.seq and notifies
//     weft_revocations with the seq and the (tenant, sub) changed, in the
//     changing transaction. Seqs commit, and so arrive, in order.
//   - A Cache is a holder: it listens (on the process's one listening
//     connection, store.Listener, which tells it of every lost and new
//     connection as a connection of its own would), drops the
//     changed key on each notification (the whole cache on a gap, an
//     unnamed key, or a lost or new connection), and heartbeats every
//     Heartbeat with the highest seq it has dropped (acked); the
//     heartbeat returns the current seq, and a holder behind it drops
//     everything, so a lost notification costs one heartbeat, never
//     correctness.
//   - A holder answers from its cache only while it is listening and less
//     than Lease has passed, by its monotonic clock, since it sent its last
//     heartbeat that succeeded. Otherwise it reads through, as without a
//     cache.
//   - A revocation (store.AddRevocation, DeleteRevocation) returns only
//     once every holder whose heartbeat, by the database clock, is younger
//     than its lease plus store.RevocationLeaseMargin has acked its seq.
//     The heartbeat's database time is later than its sending, so a holder
//     the revocation no longer waits for has stopped using its cache; both
//     sides measure the lease on one clock each (no skew between hosts
//     enters), and the margin absorbs their drift.
//   - A fill (a miss read through) is kept only if no change was handled
//     while it read, so a read that raced a change is never cached.
package revcache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/weftworks/weft/store"
)

// Defaults.
const (
	DefaultLease      = 5 * time.Second
	DefaultMaxEntries = 10000
	// pruneEvery is how many heartbeats apart a holder deletes the rows of
	// holders dead for pruneAfter.
	pruneEvery = 300
	pruneAfter = time.Hour
)

// Config is a Cache's settings.
type Config struct {
	// Lease is how long the cache is used after a heartbeat is sent that
	// succeeds (DefaultLease when 0; at most store.MaxRevocationLease).
	// A revocation waits at most about this long (plus the margin) for a
	// holder that died.
	Lease time.Duration
	// Heartbeat is the interval between heartbeats (Lease/5 when 0; below
	// Lease/2).
	Heartbeat time.Duration
	// MaxEntries bounds the cached keys (DefaultMaxEntries when 0); a full
	// cache is emptied.
	MaxEntries int
}

func (c Config) withDefaults() (Config, error) {
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = c.Lease / 5
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultMaxEntries
	}
	switch {
	case c.Lease < 0 || c.Lease > store.MaxRevocationLease:
		return c, fmt.Errorf("revcache: the lease must be in (0, %s], got %s", store.MaxRevocationLease, c.Lease)
	case c.Heartbeat <= 0 || c.Heartbeat >= c.Lease/2:
		return c, fmt.Errorf("revcache: the heartbeat (%s) must be positive and below half the lease (%s)", c.Heartbeat, c.Lease)
	case c.MaxEntries < 0:
		return c, fmt.Errorf("revcache: MaxEntries must not be negative, got %d", c.MaxEntries)
	}
	return c, nil
}

// Backend is what a Cache reads through and heartbeats to (*store.Store).
type Backend interface {
	RevokedScopes(ctx context.Context, tenantID, sub string) ([]string, error)
	BeatRevocationHolder(ctx context.Context, holderID string, acked int64, lease time.Duration) (int64, error)
	RemoveRevocationHolder(ctx context.Context, holderID string) error
	PruneRevocationHolders(ctx context.Context, expiredFor time.Duration) error
	ListenRevocations(ctx context.Context, logger *slog.Logger, l store.RevocationListener)
}

type key struct{ tenantID, sub string }

// Cache is one process's revocation cache and holder. Build it with New,
// run it with Run; RevokedScopes is safe for concurrent use and reads
// through whenever the cache may not be used.
type Cache struct {
	cfg     Config
	backend Backend
	log     *slog.Logger
	id      string
	kick    chan struct{}

	mu      sync.Mutex
	entries map[key][]string
	// gen counts invalidations: a fill is kept only under the gen it
	// started with.
	gen uint64
	// processed is the highest seq whose change is out of the cache:
	// every change up to it was dropped, by key or wholesale.
	processed int64
	// acked is processed as last recorded by a heartbeat that succeeded.
	acked int64
	// validUntil is the send time of the last heartbeat that succeeded
	// plus the lease (monotonic); zero before the first.
	validUntil time.Time
	listening  bool
	stopped    bool
	connects   int
}

// New builds a Cache over backend with a fresh holder id.
func New(cfg Config, backend Backend, logger *slog.Logger) (*Cache, error) {
	if backend == nil {
		return nil, errors.New("revcache: a backend (the store) is required")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("revcache: holder id: %w", err)
	}
	id := "rch_" + hex.EncodeToString(b)
	return &Cache{cfg: cfg, backend: backend, log: logger.With("component", "revocation-cache", "holder", id), id: id,
		kick: make(chan struct{}, 1), entries: map[key][]string{}}, nil
}

// RevokedScopes returns the scopes revoked from sub in tenant, sorted, as
// store.RevokedScopes does: from the cache while it may be used, else
// read through. The slice is shared: callers must not modify it.
func (c *Cache) RevokedScopes(ctx context.Context, tenantID, sub string) ([]string, error) {
	k := key{tenantID, sub}
	c.mu.Lock()
	if !c.usableLocked(time.Now()) {
		c.mu.Unlock()
		return c.backend.RevokedScopes(ctx, tenantID, sub)
	}
	if v, ok := c.entries[k]; ok {
		c.mu.Unlock()
		return v, nil
	}
	gen := c.gen
	c.mu.Unlock()
	v, err := c.backend.RevokedScopes(ctx, tenantID, sub)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	// A change handled while the read ran may postdate the read's
	// snapshot: such a fill is not kept.
	if c.gen == gen && !c.stopped {
		if len(c.entries) >= c.cfg.MaxEntries {
			clear(c.entries)
		}
		c.entries[k] = v
	}
	c.mu.Unlock()
	return v, nil
}

func (c *Cache) usableLocked(now time.Time) bool {
	return c.listening && !c.stopped && !c.validUntil.IsZero() && now.Before(c.validUntil)
}

// dropAllLocked empties the cache and voids the fills under way.
func (c *Cache) dropAllLocked() {
	clear(c.entries)
	c.gen++
}

// Status is a snapshot of a Cache's state, for tests and diagnostics.
type Status struct {
	// Holder is the cache's row in revocation_cache_holders.
	Holder string
	// Usable: answering from the cache now (listening, lease not lapsed).
	Usable    bool
	Listening bool
	// Processed is the highest change seq dropped; Acked the highest a
	// heartbeat recorded.
	Processed, Acked int64
	Entries          int
	// Connects counts the listener's (re)connections.
	Connects int
}

// Status reports the cache's state now.
func (c *Cache) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Status{Holder: c.id, Usable: c.usableLocked(time.Now()), Listening: c.listening,
		Processed: c.processed, Acked: c.acked, Entries: len(c.entries), Connects: c.connects}
}

// Run listens and heartbeats until ctx ends; then the cache stops being
// used and its holder row is deleted, so revocations stop waiting for it.
func (c *Cache) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.backend.ListenRevocations(ctx, c.log, listener{c})
	}()
	c.beatLoop(ctx)
	c.mu.Lock()
	c.stopped, c.listening, c.validUntil = true, false, time.Time{}
	c.dropAllLocked()
	c.mu.Unlock()
	wg.Wait()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.backend.RemoveRevocationHolder(rctx, c.id); err != nil {
		c.log.Warn("could not remove the revocation cache holder; revocations ignore it once its lease lapses", "err", err)
	}
}

func (c *Cache) beatLoop(ctx context.Context) {
	ticker := time.NewTicker(c.cfg.Heartbeat)
	defer ticker.Stop()
	for beats := 1; ; beats++ {
		c.beat(ctx)
		if beats%pruneEvery == 0 {
			if err := c.backend.PruneRevocationHolders(ctx, pruneAfter); err != nil && ctx.Err() == nil {
				c.log.Warn("could not prune dead revocation cache holders", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-c.kick:
		}
	}
}

// beat sends one heartbeat with what is processed; on success it drops
// everything when the database is ahead and renews the lease from the
// send time. A failed heartbeat renews nothing: the lease lapses by
// itself and lookups read through.
func (c *Cache) beat(ctx context.Context) {
	c.mu.Lock()
	acked := c.processed
	c.mu.Unlock()
	sent := time.Now()
	bctx, cancel := context.WithTimeout(ctx, c.cfg.Lease)
	epoch, err := c.backend.BeatRevocationHolder(bctx, c.id, acked, c.cfg.Lease)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("revocation cache heartbeat failed; reading revocations through until one succeeds", "err", err)
		}
		return
	}
	c.mu.Lock()
	if epoch > c.processed {
		// Changes this holder has not heard of (a notification lost or
		// not yet read): everything goes.
		c.dropAllLocked()
		c.processed = epoch
	}
	c.acked = max(c.acked, acked)
	c.validUntil = sent.Add(c.cfg.Lease)
	behind := c.processed > acked
	c.mu.Unlock()
	if behind {
		c.signal() // acknowledge at once: a revocation may be waiting
	}
}

func (c *Cache) signal() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// listener adapts a Cache to store.RevocationListener, keeping those
// methods off the Cache's exported surface.
type listener struct{ c *Cache }

func (l listener) Connected() {
	c := l.c
	c.mu.Lock()
	if !c.stopped {
		// Whatever changed while no listener was connected went unheard.
		c.dropAllLocked()
		c.listening = true
		c.connects++
	}
	c.mu.Unlock()
	c.signal()
}

func (l listener) Lost(error) {
	c := l.c
	c.mu.Lock()
	c.listening = false
	c.dropAllLocked()
	c.mu.Unlock()
}

func (l listener) Changed(ch store.RevocationChange) {
	c := l.c
	c.mu.Lock()
	switch {
	case ch.Seq != 0 && ch.Seq <= c.processed:
		// Already out: dropped wholesale when a heartbeat saw it.
	case ch.Seq == c.processed+1 && !ch.All:
		delete(c.entries, key{ch.TenantID, ch.Sub})
		c.gen++
		c.processed = ch.Seq
	default:
		// A gap (a change not heard), a change of every key, or an
		// unreadable notification (Seq 0).
		c.dropAllLocked()
		c.processed = max(c.processed, ch.Seq)
	}
	c.mu.Unlock()
	c.signal()
}
