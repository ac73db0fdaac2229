package activities

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/revcache"
)

// BenchmarkRevocationCheck measures an attempt's revocation check
// (withRevocations): read through to PostgreSQL, as every attempt did
// before the revocation cache, against the cache answering.
//
//	go test ./activities -run '^$' -bench Revoc -benchmem
func BenchmarkRevocationCheck(b *testing.B) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	require.NoError(b, st.Revoke(ctx, "t1", "ada", "notes.write"))
	cache, err := revcache.New(revcache.Config{Lease: 20 * time.Second}, st, slog.New(slog.DiscardHandler))
	require.NoError(b, err)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cache.Run(cctx)
	}()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	require.Eventually(b, func() bool { return cache.Status().Usable }, time.Minute, 10*time.Millisecond)
	in := execution.NodeInput{TenantID: "t1", NodeID: "n", Actor: execution.Actor{Kind: "user", Sub: "ada"},
		Permissions: []string{"notes.write", "runs.execute"}}
	for _, c := range []struct {
		name string
		src  RevocationSource
	}{{"read-through", st}, {"cache", cache}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				out, err := withRevocations(ctx, c.src, in)
				if err != nil || len(out.Permissions) != 1 {
					b.Fatalf("withRevocations = %v, %v; want runs.execute alone", out.Permissions, err)
				}
			}
		})
	}
	require.True(b, cache.Status().Usable, "the cache answered throughout: %+v", cache.Status())
}
