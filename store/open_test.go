package store_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/store"
)

// TestOpenWithPoolSize: Options.MaxConns sizes the pool unless the URL's
// pool_max_conns (in either connection-string form) says otherwise. The
// pool connects lazily, so no server is needed.
func TestOpenWithPoolSize(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		url  string
		opts store.Options
		want int32
	}{
		"option":                 {"postgres://127.0.0.1:1/x", store.Options{MaxConns: 20}, 20},
		"url wins":               {"postgres://127.0.0.1:1/x?pool_max_conns=3", store.Options{MaxConns: 20}, 3},
		"keyword form wins":      {"host=127.0.0.1 port=1 dbname=x pool_max_conns=5", store.Options{MaxConns: 20}, 5},
		"min conns above option": {"postgres://127.0.0.1:1/x?pool_min_conns=25", store.Options{MaxConns: 20}, 25},
		"pgxpool's default":      {"postgres://127.0.0.1:1/x", store.Options{}, int32(max(4, runtime.NumCPU()))},
	} {
		st, err := store.OpenWith(ctx, tc.url, tc.opts)
		require.NoError(t, err, name)
		require.Equal(t, tc.want, st.Pool.Config().MaxConns, name)
		st.Close()
	}
	_, err := store.OpenWith(ctx, "postgres://127.0.0.1:1/x", store.Options{MaxConns: -1})
	require.Error(t, err, "a negative pool size was accepted")
}
