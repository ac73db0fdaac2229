package activities_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// TestServiceActorRevocationsAreRecheckedPerAttempt: a schedule's or
// webhook's run holds its creator's snapshot minus what was revoked from
// the creator since; every attempt reads the revocations again.
func TestServiceActorRevocationsAreRecheckedPerAttempt(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	ctx := context.Background()
	in := b.input("save", graph.KindAction, map[string]string{"in": item})
	in.Actor = execution.Actor{Kind: "service", Sub: "webhook:whk_1", ConfiguredBy: "ada"}
	in.Permissions = []string{"notes.write", "runs.execute"}
	if _, err := b.runNode(in); err != nil {
		t.Fatalf("before the revocation: %v", err)
	}

	if err := b.st.Revoke(ctx, tenant, "ada", "notes.write"); err != nil {
		t.Fatal(err)
	}
	in.Attempt = 2
	_, err := b.runNode(in)
	ae := wantAppErr(t, err, execution.ErrPermissionDenied, true)
	var details map[string][]string
	if err := ae.Details(&details); err != nil || len(details["missing"]) != 1 || details["missing"][0] != "notes.write" {
		t.Fatalf("details %v %v", details, err)
	}

	// Revocations withdraw scopes from service actors only, and only from
	// those their sub configured.
	user := in
	user.Actor = execution.Actor{Kind: "user", Sub: "ada"}
	if _, err := b.runNode(user); err != nil {
		t.Fatalf("a user actor keeps its snapshot: %v", err)
	}
	other := in
	other.Actor.ConfiguredBy = "bob"
	if _, err := b.runNode(other); err != nil {
		t.Fatalf("another creator's service actor is unaffected: %v", err)
	}

	// A revocation that cannot be read fails the attempt retryably: the
	// node never runs on scopes it may have lost.
	b.st.Close()
	_, err = b.runNode(in)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.NonRetryable() || !strings.Contains(err.Error(), "revocations") {
		t.Fatalf("err = %v, want a retryable revocation read error", err)
	}
}
