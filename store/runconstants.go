package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/weftworks/weft/execution"
)

// RunConstants reads what every attempt of a run shares (workflow key,
// checksum, mode, actor, permission snapshot, tenant name) from the run's
// row, as the starter passed them into the run's parameters: a node
// attempt whose input leaves them out (execution.NodeInput.Lean) runs with
// these. Nothing in them changes after the enqueue, so callers may keep
// them for the run's life. A run that does not exist, or is another
// tenant's, is failure.ErrNotFound.
func (s *Store) RunConstants(ctx context.Context, tenantID, runID string) (execution.RunConstants, error) {
	var c execution.RunConstants
	var mode string
	var actor []byte
	err := s.Pool.QueryRow(ctx, `
		SELECT workflow_key, checksum, mode, actor, permissions, tenant_name
		  FROM runs WHERE tenant_id = $1 AND run_id = $2`, tenantID, runID).
		Scan(&c.WorkflowKey, &c.Checksum, &mode, &actor, &c.Permissions, &c.TenantName)
	if err != nil {
		return execution.RunConstants{}, fmt.Errorf("store: constants of run %s: %w", runID, notFound(err))
	}
	return completeConstants(c, mode, actor, runID)
}

// RunConstantsOfWorkflow is RunConstants of the tenant's run whose
// Temporal workflow id is workflowID (unique per run), with the run's id:
// how a worker reads a run's constants before any attempt names the run
// (the run's first workflow task, which knows its workflow id). A
// workflow id of no run of the tenant is failure.ErrNotFound.
func (s *Store) RunConstantsOfWorkflow(ctx context.Context, tenantID, workflowID string) (string, execution.RunConstants, error) {
	var runID string
	var c execution.RunConstants
	var mode string
	var actor []byte
	err := s.Pool.QueryRow(ctx, `
		SELECT run_id, workflow_key, checksum, mode, actor, permissions, tenant_name
		  FROM runs WHERE workflow_id = $1 AND tenant_id = $2`, workflowID, tenantID).
		Scan(&runID, &c.WorkflowKey, &c.Checksum, &mode, &actor, &c.Permissions, &c.TenantName)
	if err != nil {
		return "", execution.RunConstants{}, fmt.Errorf("store: constants of workflow %s: %w", workflowID, notFound(err))
	}
	c, err = completeConstants(c, mode, actor, runID)
	return runID, c, err
}

// completeConstants decodes the scanned actor and mode into c.
func completeConstants(c execution.RunConstants, mode string, actor []byte, runID string) (execution.RunConstants, error) {
	if err := json.Unmarshal(actor, &c.Actor); err != nil {
		return execution.RunConstants{}, fmt.Errorf("store: run %s actor: %w", runID, err)
	}
	c.Mode = execution.Mode(mode)
	// The starter passes the snapshot as a list, never null (starter.nonNil).
	c.Permissions = nonNilScopes(c.Permissions)
	return c, nil
}
