package activities

import (
	"context"
	"fmt"

	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/execution"
)

// revocationSource answers the scopes withdrawn from the service actors a
// user configured (store.Store.RevokedScopes).
type revocationSource interface {
	RevokedScopes(ctx context.Context, tenantID, sub string) ([]string, error)
}

// withRevocations applies the service actor rule before a node runs: a
// schedule's or webhook's run holds its creator's scope snapshot minus
// what has been revoked from the creator since (bridges.Effective), read
// again for every attempt, so a revocation reaches the nodes of runs
// already under way. User actors keep their snapshot. A failed read is
// returned as is: retryable, it never runs the node with scopes it may
// have lost.
func withRevocations(ctx context.Context, src revocationSource, in execution.NodeInput) (execution.NodeInput, error) {
	if in.Actor.Kind != "service" || src == nil {
		return in, nil
	}
	revoked, err := src.RevokedScopes(ctx, in.TenantID, in.Actor.ConfiguredBy)
	if err != nil {
		return in, fmt.Errorf("node %q: read the revocations of %s: %w", in.NodeID, in.Actor.ConfiguredBy, err)
	}
	if len(revoked) > 0 {
		in.Permissions = bridges.Effective(in.Permissions, revoked)
	}
	return in, nil
}
