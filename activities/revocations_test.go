package activities_test

import (
	"context"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
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
