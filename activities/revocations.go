package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/authz"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/store"
)

// RevocationSource reads the scopes revoked now from a principal, sorted:
// store.Store reads them from PostgreSQL, revcache.Cache from its cache
// while it may (a revocation returns only once every live cache dropped
// it). The result is not modified.
type RevocationSource interface {
	RevokedScopes(ctx context.Context, tenantID, sub string) ([]string, error)
}

// authoritySource reads a run's whole authority (package authz) as stored
// now (store.Store).
type authoritySource interface {
	RunAuthority(ctx context.Context, tenantID, runID string) (store.RunAuthority, error)
}

// withRevocations re-authorizes an attempt before its node runs: the run's
// permission snapshot minus the scopes revoked, now, from its acting
// principal — a user's own sub, or the user who configured a schedule's or
// webhook's service actor (execution.Actor.RequestedBy) — read again for
// every attempt (from the process's revocation cache when it runs one,
// which a revocation invalidates before it returns), so a revocation
// reaches the next attempt of runs already under way, users' included. A failed read is returned as is: retryable,
// it never runs the node with scopes it may have lost.
func withRevocations(ctx context.Context, src RevocationSource, in execution.NodeInput) (execution.NodeInput, error) {
	if src == nil {
		return in, nil
	}
	principal := in.Actor.RequestedBy()
	if principal == "" {
		return in, nil // no accountable user: nothing can have been revoked from one
	}
	revoked, err := src.RevokedScopes(ctx, in.TenantID, principal)
	if err != nil {
		return in, fmt.Errorf("node %q: read the revocations of %s: %w", in.NodeID, principal, err)
	}
	if len(revoked) > 0 {
		in.Permissions = authz.Effective(in.Permissions, revoked)
	}
	return in, nil
}

// runAuthority is the agents.Authority of one attempt: the run's authority
// read from PostgreSQL each time the harness asks (before the offer and
// before every tool call).
type runAuthority struct {
	src             authoritySource
	tenantID, runID string
}

var _ agents.Authority = runAuthority{}

// Grant implements agents.Authority. A run row that does not exist is a
// permanent PERMISSION_DENIED (nothing can authorize its tools); a failed
// read is returned as is, so the attempt is retried.
func (r runAuthority) Grant(ctx context.Context) (authz.Grant, error) {
	a, err := r.src.RunAuthority(ctx, r.tenantID, r.runID)
	if errors.Is(err, failure.ErrNotFound) {
		return authz.Grant{}, permanent(execution.ErrPermissionDenied, err, "run %s has no stored authority to authorize tool calls", r.runID)
	}
	if err != nil {
		return authz.Grant{}, err
	}
	return authz.FromRun(a), nil
}
