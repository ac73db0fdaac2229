package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func TestUnavailableClassifiesOutagesOnly(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("store: read bound run: %w", err) }
	for name, err := range map[string]error{
		"eof":                wrap(io.ErrUnexpectedEOF),
		"refused":            wrap(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}),
		"reset":              wrap(syscall.ECONNRESET),
		"admin shutdown":     wrap(&pgconn.PgError{Code: "57P01"}),
		"cannot connect now": wrap(&pgconn.PgError{Code: "57P03"}),
		"connection failure": wrap(&pgconn.PgError{Code: "08006"}),
		"too many clients":   wrap(&pgconn.PgError{Code: "53300"}),
	} {
		require.True(t, store.Unavailable(err), name)
	}
	for name, err := range map[string]error{
		"nil":               nil,
		"cancelled":         wrap(context.Canceled),
		"caller's deadline": wrap(context.DeadlineExceeded),
		"unique violation":  wrap(&pgconn.PgError{Code: "23505"}),
		"not found":         wrap(failure.ErrNotFound),
		"plain":             errors.New("boom"),
	} {
		require.False(t, store.Unavailable(err), name)
	}
}

// A PostgreSQL that accepts connections and drops them at once (what the
// outage drill's proxy does) is unavailable, and so is one that refuses
// them; a query answers at once either way.
func TestUnavailableAgainstADeadServer(t *testing.T) {
	t.Parallel()
	url := testinfra.NewDatabase(t)
	proxy := testinfra.NewTCPProxy(t, "127.0.0.1:5432")
	st, err := store.Open(context.Background(), testinfra.ThroughProxy(t, url, proxy))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.Ping(context.Background()))

	proxy.Cut()
	start := time.Now()
	_, _, err = st.BoundRun(context.Background(), "t", "k", "idem")
	require.Error(t, err)
	require.True(t, store.Unavailable(err), "%v", err)
	require.Less(t, time.Since(start), store.DefaultConnectTimeout)

	proxy.Restore()
	require.Eventually(t, func() bool { return st.Ping(context.Background()) == nil }, 10*time.Second, 50*time.Millisecond)
}
