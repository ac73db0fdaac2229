package store

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultConnectTimeout bounds a connection attempt when DATABASE_URL does
// not set connect_timeout: an unreachable PostgreSQL (a partition, a
// failover in progress) answers STORE_UNAVAILABLE within it instead of
// holding requests and attempts until the kernel gives up.
const DefaultConnectTimeout = 5 * time.Second

// Unavailable reports whether err means PostgreSQL could not be reached or
// dropped the connection: a refused or timed-out connect, a connection
// reset or closed mid-query, or the server saying it is shutting down or
// not accepting connections yet. Those are faults of the infrastructure,
// not of the request: the API answers 503 STORE_UNAVAILABLE and node
// attempts are re-dispatched without spending an attempt. A cancelled
// context is the caller's decision and never counts.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller's own decision or deadline (context.DeadlineExceeded
		// also satisfies net.Error, so this test comes first).
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-57P03: admin/crash
		// shutdown, cannot connect now; 53300: too many connections.
		return strings.HasPrefix(pgErr.Code, "08") ||
			pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03" || pgErr.Code == "53300"
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	// pgx reports a pooled connection that died between queries as
	// "conn closed" without a typed error.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "failed to connect to")
}

// withConnectTimeout applies DefaultConnectTimeout when the URL sets none.
func withConnectTimeout(cfg *pgxpool.Config) {
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
}
