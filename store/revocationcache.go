package store

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/weftworks/weft/failure"
)

// RevocationsChannel is the PostgreSQL notification channel every change
// of revocations is announced on, in the changing transaction (migration
// 00022's trigger): payload {"seq":N,"tenant":T,"sub":S}, or {"seq":N}
// alone when the change names no single (tenant, sub).
const RevocationsChannel = "weft_revocations"

// RevocationLeaseMargin is what a revocation adds to a holder's lease
// before it stops waiting for that holder: the holder measures its lease
// from before it sent its heartbeat, by its own monotonic clock, and the
// revocation from the heartbeat's database time, by the database clock;
// the margin absorbs the two clocks' drift over a lease.
const RevocationLeaseMargin = time.Second

// MaxRevocationLease bounds a cache holder's lease: a revocation waits at
// most twice (lease + margin) for a holder that neither acknowledges nor
// lapses.
const MaxRevocationLease = 30 * time.Second

// RevocationChange is one notification on RevocationsChannel: the change
// numbered Seq, of the revocations of (TenantID, Sub), or of any key when
// All.
type RevocationChange struct {
	Seq      int64
	TenantID string
	Sub      string
	All      bool
}

// ParseRevocationChange decodes a RevocationsChannel payload.
func ParseRevocationChange(payload string) (RevocationChange, error) {
	var p struct {
		Seq    int64   `json:"seq"`
		Tenant *string `json:"tenant"`
		Sub    *string `json:"sub"`
	}
	if err := json.Unmarshal([]byte(payload), &p); err != nil || p.Seq <= 0 {
		return RevocationChange{}, fmt.Errorf("store: revocation notification %q is not {seq, tenant, sub}", payload)
	}
	if p.Tenant == nil || p.Sub == nil {
		return RevocationChange{Seq: p.Seq, All: true}, nil
	}
	return RevocationChange{Seq: p.Seq, TenantID: *p.Tenant, Sub: *p.Sub}, nil
}

// BeatRevocationHolder is a cache holder's heartbeat: it records (or
// creates) holderID's row with acked (every change up to it is out of the
// holder's cache), its lease and the database's now(), and returns the
// revocations' current seq. A holder may use its cache for lease from
// before it called, and only after this returned.
func (s *Store) BeatRevocationHolder(ctx context.Context, holderID string, acked int64, lease time.Duration) (int64, error) {
	if holderID == "" || lease <= 0 || lease > MaxRevocationLease {
		return 0, failure.New(failure.CodeInvalidRequest, "a revocation cache holder needs an id and a lease in (0, %s]", MaxRevocationLease)
	}
	var epoch int64
	err := s.Pool.QueryRow(ctx, `INSERT INTO revocation_cache_holders AS h (holder_id, acked_seq, lease_ms, heartbeat_at)
		VALUES ($1, $2, $3, now())
		ON CONFLICT (holder_id) DO UPDATE SET acked_seq = GREATEST(h.acked_seq, EXCLUDED.acked_seq),
			lease_ms = EXCLUDED.lease_ms, heartbeat_at = now()
		RETURNING (SELECT seq FROM revocation_epoch)`, holderID, acked, lease.Milliseconds()).Scan(&epoch)
	if err != nil {
		return 0, fmt.Errorf("store: revocation cache heartbeat: %w", err)
	}
	return epoch, nil
}

// RemoveRevocationHolder deletes holderID's row: a stopping holder, which
// no longer uses its cache, so revocations stop waiting for it at once.
func (s *Store) RemoveRevocationHolder(ctx context.Context, holderID string) error {
	if _, err := s.Pool.Exec(ctx, `DELETE FROM revocation_cache_holders WHERE holder_id = $1`, holderID); err != nil {
		return fmt.Errorf("store: remove revocation cache holder: %w", err)
	}
	return nil
}

// PruneRevocationHolders deletes the rows of holders whose last heartbeat
// is older than expiredFor (by the database clock): dead processes.
// Revocations already ignore them once their lease lapsed.
func (s *Store) PruneRevocationHolders(ctx context.Context, expiredFor time.Duration) error {
	if _, err := s.Pool.Exec(ctx, `DELETE FROM revocation_cache_holders
		WHERE heartbeat_at < now() - make_interval(secs => $1::float8)`, expiredFor.Seconds()); err != nil {
		return fmt.Errorf("store: prune revocation cache holders: %w", err)
	}
	return nil
}

// liveUnackedHolders is the condition of a holder that may still use a
// cache holding a change numbered seq: it has not acked seq, and its
// heartbeat is younger than its lease plus the margin ($margin ms) by the
// database clock.
const liveUnackedHolders = `h.acked_seq < %s AND h.heartbeat_at > now() - make_interval(secs => (h.lease_ms + $1) / 1000.0)`

// awaitRevocationHolders returns once every live revocation cache holder
// has acknowledged the revocations' current seq (read after the caller's
// change committed, so at least its seq) or its lease has lapsed, by the
// database clock. It polls: revocations are rare and holders ack within
// milliseconds of the notification, or at their next heartbeat. A holder
// that does neither within twice (its lease + the margin) is UNAVAILABLE:
// the change is stored, yet not known to be in effect everywhere, and
// repeating the request waits again.
func (s *Store) awaitRevocationHolders(ctx context.Context) error {
	margin := RevocationLeaseMargin.Milliseconds()
	var seq, pending, leaseMs int64
	err := s.Pool.QueryRow(ctx, `SELECT e.seq, count(h.holder_id), COALESCE(max(h.lease_ms), 0)
		FROM revocation_epoch e LEFT JOIN revocation_cache_holders h ON `+fmt.Sprintf(liveUnackedHolders, "e.seq")+`
		GROUP BY e.seq`, margin).Scan(&seq, &pending, &leaseMs)
	if err != nil {
		return fmt.Errorf("store: await revocation cache holders: %w", err)
	}
	if pending == 0 {
		return nil
	}
	deadline := time.Now().Add(2 * (time.Duration(leaseMs)*time.Millisecond + RevocationLeaseMargin))
	poll := time.Millisecond
	for {
		if time.Now().After(deadline) {
			return failure.New(failure.CodeUnavailable,
				"the revocation change is stored, but %d worker(s) did not confirm dropping it from their caches in time; repeat the request", pending).
				WithDetails(map[string]any{"stored": true, "pendingWorkers": pending})
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("store: await revocation cache holders: %w", ctx.Err())
		case <-t.C:
		}
		poll = min(2*poll, 50*time.Millisecond)
		err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM revocation_cache_holders h WHERE `+fmt.Sprintf(liveUnackedHolders, "$2"),
			margin, seq).Scan(&pending)
		if err != nil {
			return fmt.Errorf("store: await revocation cache holders: %w", err)
		}
		if pending == 0 {
			return nil
		}
	}
}

// RevocationListener is told what a RevocationsChannel listener sees.
// Its methods run on the listener's goroutine and must not block.
type RevocationListener interface {
	// Connected: listening (again); changes notified before are lost.
	Connected()
	// Changed: one committed change, in seq order.
	Changed(RevocationChange)
	// Lost: the connection failed; nothing is heard until Connected.
	Lost(err error)
}

// ListenRevocations listens on RevocationsChannel through the store's
// listener (Store.Listener) until ctx ends, reconnecting with backoff: l is
// told Lost on every lost connection and when ctx ends, and Connected on
// every new one, as with a connection of its own. A payload it cannot
// parse is reported to l as a change of every key.
func (s *Store) ListenRevocations(ctx context.Context, logger *slog.Logger, l RevocationListener) {
	if logger == nil {
		logger = slog.Default()
	}
	s.Listen(ctx, Subscriber{Channel: RevocationsChannel, Logger: logger, Connected: l.Connected, Lost: l.Lost, Notified: func(payload string) {
		ch, err := ParseRevocationChange(payload)
		if err != nil {
			// Unreadable: treated as a change of everything, yet with no
			// seq it cannot be acknowledged; the next heartbeat's epoch
			// covers it.
			logger.Warn("revocation feed: unreadable notification; dropping the whole cache", "err", err)
			ch = RevocationChange{All: true}
		}
		l.Changed(ch)
	}})
}
