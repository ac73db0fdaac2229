package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/weftworks/weft/execution"
)

// RunAuthority is what a run may do at the moment it acts, as stored now:
// the run's fixed terms (actor, permission snapshot, tool grants, the
// service actor's tool policy when it fired) and the live ones (the scopes
// revoked from the acting principal, and the schedule's or webhook's
// current tool policy). Package authz turns it into a decision.
type RunAuthority struct {
	Actor  execution.Actor
	Origin execution.Origin
	// Permissions is the run's permission snapshot.
	Permissions []string
	// ToolGrants are the enqueue's toolGrants; nil when none were given.
	ToolGrants []string
	// RunToolPolicy is a service actor's tool policy when it fired; nil
	// for a user's run.
	RunToolPolicy []string
	// Principal is whose revocations apply (execution.Actor.RequestedBy:
	// the user, or the user who configured the service actor); Revoked are
	// that principal's revoked scopes now, sorted.
	Principal string
	Revoked   []string
	// Bridge is set for a run whose origin is a schedule or webhook: its
	// tool policy now.
	Bridge *BridgeAuthority
}

// BridgeAuthority is a schedule's or webhook's tool policy now.
type BridgeAuthority struct {
	Kind string
	ID   string
	// Found is false when no such schedule or webhook exists in the tenant.
	Found   bool
	Deleted bool
	// ToolPolicy is its current policy (empty when not found).
	ToolPolicy []string
}

// RunAuthority reads a run's authority in one query: its row, the current
// revocations of its acting principal (for a service actor the user who
// configured it) and, for a run a schedule or webhook started, that
// bridge's current tool policy. It is read again before every tool call and
// action attempt, so a revocation or a narrowed policy takes effect at the
// next one; nothing is cached. A run that does not exist (or is another
// tenant's) is failure.ErrNotFound.
//
// The principal is computed here exactly as execution.Actor.RequestedBy
// does (a test holds the two together).
func (s *Store) RunAuthority(ctx context.Context, tenantID, runID string) (RunAuthority, error) {
	var a RunAuthority
	var actor, origin []byte
	var bridgeKind, bridgeID *string
	var bridgeFound, bridgeDeleted *bool
	var bridgePolicy []string
	err := s.Pool.QueryRow(ctx, `
		WITH r AS (
			SELECT actor, origin, permissions, tool_grants, tool_policy,
			       CASE WHEN actor ->> 'kind' = 'service' THEN COALESCE(actor ->> 'configuredBy', '')
			            ELSE COALESCE(actor ->> 'sub', '') END AS principal,
			       origin ->> 'kind' AS origin_kind, origin ->> 'id' AS origin_id
			  FROM runs WHERE tenant_id = $1 AND run_id = $2),
		b AS (
			SELECT 'schedule' AS kind, s.schedule_id AS id, s.deleted_at IS NOT NULL AS deleted, s.tool_policy
			  FROM schedules s, r WHERE r.origin_kind = 'schedule' AND s.tenant_id = $1 AND s.schedule_id = r.origin_id
			UNION ALL
			SELECT 'webhook', w.webhook_id, w.deleted_at IS NOT NULL, w.tool_policy
			  FROM webhooks w, r WHERE r.origin_kind = 'webhook' AND w.tenant_id = $1 AND w.webhook_id = r.origin_id)
		SELECT r.actor, r.origin, r.permissions, r.tool_grants, r.tool_policy, r.principal,
		       ARRAY(SELECT v.scope FROM revocations v WHERE v.tenant_id = $1 AND v.sub = r.principal ORDER BY v.scope),
		       CASE WHEN r.origin_kind IN ('schedule', 'webhook') THEN r.origin_kind END,
		       CASE WHEN r.origin_kind IN ('schedule', 'webhook') THEN r.origin_id END,
		       CASE WHEN r.origin_kind IN ('schedule', 'webhook') THEN EXISTS (SELECT 1 FROM b) END,
		       (SELECT b.deleted FROM b), (SELECT b.tool_policy FROM b)
		  FROM r`, tenantID, runID).Scan(&actor, &origin, &a.Permissions, &a.ToolGrants, &a.RunToolPolicy, &a.Principal,
		&a.Revoked, &bridgeKind, &bridgeID, &bridgeFound, &bridgeDeleted, &bridgePolicy)
	if err != nil {
		return RunAuthority{}, fmt.Errorf("store: run authority of %s: %w", runID, notFound(err))
	}
	if err := json.Unmarshal(actor, &a.Actor); err != nil {
		return RunAuthority{}, fmt.Errorf("store: run %s actor: %w", runID, err)
	}
	if err := json.Unmarshal(origin, &a.Origin); err != nil {
		return RunAuthority{}, fmt.Errorf("store: run %s origin: %w", runID, err)
	}
	a.Permissions = nonNilScopes(a.Permissions)
	a.Revoked = nonNilScopes(a.Revoked)
	if bridgeKind != nil {
		b := &BridgeAuthority{Kind: *bridgeKind, ToolPolicy: nonNilScopes(bridgePolicy)}
		if bridgeID != nil {
			b.ID = *bridgeID
		}
		b.Found = bridgeFound != nil && *bridgeFound
		b.Deleted = bridgeDeleted != nil && *bridgeDeleted
		a.Bridge = b
	}
	return a, nil
}
