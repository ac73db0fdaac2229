package activities_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/revcache"
	"github.com/weftworks/weft/store"
)

// TestRevocationsAreRecheckedPerAttempt: a run holds its snapshot minus
// what was revoked since from its principal — a user's own sub, or a
// schedule's or webhook's creator; every attempt reads the revocations again.
func TestRevocationsAreRecheckedPerAttempt(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	ctx := context.Background()
	in := b.input("save", graph.KindAction, map[string]string{"in": item})
	in.Actor = execution.Actor{Kind: "service", Sub: "webhook:whk_1", ConfiguredBy: "ada"}
	in.Permissions = []string{"notes.write", "runs.execute"}
	_, err := b.runNode(in)
	require.NoError(t, err, "before the revocation")

	require.NoError(t, b.st.Revoke(ctx, tenant, "ada", "notes.write"))
	in.Attempt = 2
	_, err = b.runNode(in)
	ae := wantAppErr(t, err, execution.ErrPermissionDenied, true)
	var details map[string][]string
	err = ae.Details(&details)
	require.NoError(t, err, "details %v", details)
	require.Len(t, details["missing"], 1, "details %v %v", details, err)
	require.Equal(t, "notes.write", details["missing"][0], "details %v %v", details, err)

	// A revocation from ada reaches her own runs too (the next attempt of
	// an action node is PERMISSION_DENIED), and only the runs whose
	// principal is ada.
	user := in
	user.Actor = execution.Actor{Kind: "user", Sub: "ada"}
	user.Attempt = 3
	_, err = b.runNode(user)
	wantAppErr(t, err, execution.ErrPermissionDenied, true)
	bob := user
	bob.Actor = execution.Actor{Kind: "user", Sub: "bob"}
	_, err = b.runNode(bob)
	require.NoError(t, err, "another user's run is unaffected")
	other := in
	other.Actor.ConfiguredBy = "bob"
	_, err = b.runNode(other)
	require.NoError(t, err, "another creator's service actor is unaffected")
	// Removing the revocation gives the scope back from the next attempt on.
	require.NoError(t, b.st.Unrevoke(ctx, tenant, "ada", "notes.write"))
	user.Attempt = 4
	_, err = b.runNode(user)
	require.NoError(t, err, "after the revocation was removed")

	// A revocation that cannot be read fails the attempt retryably: the
	// node never runs on scopes it may have lost.
	b.st.Close()
	_, err = b.runNode(in)
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app, "err = %v, want a retryable revocation read error", err)
	require.False(t, app.NonRetryable(), "err = %v, want a retryable revocation read error", err)
	require.Contains(t, err.Error(), "revocations", "err = %v, want a retryable revocation read error", err)
}

// runRevocationCache runs a revocation cache on st until the test ends and
// waits until it is usable (its first heartbeat succeeded, listening).
func runRevocationCache(t testing.TB, st *store.Store) *revcache.Cache {
	t.Helper()
	// A long lease keeps the cache usable through a busy machine's stalls.
	c, err := revcache.New(revcache.Config{Lease: 20 * time.Second}, st, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	require.Eventually(t, func() bool { return c.Status().Usable }, 60*time.Second, 10*time.Millisecond,
		"the revocation cache never became usable: %+v", c.Status())
	return c
}

// TestRevocationCacheReachesTheNextAttempt: with the worker's revocation
// cache answering, a revocation still reaches the very next attempt of a
// run under way, and its removal too; attempts in between are answered
// from the cache.
func TestRevocationCacheReachesTheNextAttempt(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction), withRevocationCache())
	ctx := context.Background()
	in := b.input("save", graph.KindAction, map[string]string{"in": item})
	in.Permissions = []string{"notes.write", "runs.execute"}
	_, err := b.runNode(in)
	require.NoError(t, err, "before the revocation")
	require.Positive(t, b.cache.Status().Entries, "the attempt's revocation read was cached: %+v", b.cache.Status())

	require.NoError(t, b.st.Revoke(ctx, tenant, "ada", "notes.write"))
	in.Attempt = 2
	_, err = b.runNode(in)
	wantAppErr(t, err, execution.ErrPermissionDenied, true)
	in.Attempt = 3
	_, err = b.runNode(in)
	wantAppErr(t, err, execution.ErrPermissionDenied, true)

	require.NoError(t, b.st.Unrevoke(ctx, tenant, "ada", "notes.write"))
	in.Attempt = 4
	_, err = b.runNode(in)
	require.NoError(t, err, "after the revocation was removed")
	require.True(t, b.cache.Status().Usable, "the cache answered throughout: %+v", b.cache.Status())
}
