package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// TestMigrationGivesExistingBridgesTheToolsTheyCouldUse: migration 00007
// gives every schedule and webhook that existed before it a tool policy
// listing exactly what its runs could be offered before (every runnable
// contract published or pinned by its workflow whose permissions the
// creator's snapshot held, minus the creator's revocations), attributes
// existing notes to their run's actor, and leaves new bridges with none.
func TestMigrationGivesExistingBridgesTheToolsTheyCouldUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, testinfra.NewEmptyDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, store.MigrateTo(ctx, pool, 6))
	st := &store.Store{Pool: pool}
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err = pool.Exec(ctx, sql, args...)
		require.NoError(t, err, "%s", sql)
	}

	// The catalog as workers published it: the built-ins and crm.write@1.
	crm := graph.ActionContract{ID: "crm.write", Version: 1, Risk: graph.RiskWorkspaceWrite, InputSchema: json.RawMessage(`{}`),
		OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{"crm.write"}, TimeoutMs: 1000, Idempotency: catalog.IdempotencyLedger}
	require.NoError(t, st.PublishActionContracts(ctx, append(catalog.BuiltinContracts(), crm)))
	// Workflow triage of t1 pins local.lookup@1, a contract no worker
	// published here (a revision pins what the catalog resolved then).
	for _, tenant := range []string{"t1", "t2"} {
		_, err = st.CreateWorkflow(ctx, tenant, "triage", json.RawMessage(`{}`), "alice")
		require.NoError(t, err)
	}
	compiled := `{"document": {}, "actions": [
		{"id": "local.lookup", "version": 1, "risk": "read", "requiredPermissions": [], "hash": "h1"},
		{"id": "local.admin", "version": 1, "risk": "read", "requiredPermissions": ["admin"], "hash": "h2"}]}`
	exec(`INSERT INTO compiled_revisions (tenant_id, checksum, compiled, plan) VALUES ('t1', 'c1', $1, '{}')`, compiled)
	exec(`INSERT INTO workflow_revisions (tenant_id, key, revision, checksum, draft_revision, published_by)
		VALUES ('t1', 'triage', 1, 'c1', 1, 'alice')`)

	// Bridges as 00005 stored them. alice holds notes.write; bob holds
	// notes.write and crm.write but notes.write was revoked from him.
	exec(`INSERT INTO schedules (tenant_id, schedule_id, workflow_key, spec, input, created_by, scopes, temporal_schedule_id)
		VALUES ('t1', 'sch_alice', 'triage', '{"every":"1h"}', 'null', 'alice', '{runs.execute,notes.write}', 'ts1'),
		       ('t2', 'sch_carol', 'triage', '{"every":"1h"}', 'null', 'carol', '{runs.execute}', 'ts2')`)
	exec(`INSERT INTO webhooks (tenant_id, webhook_id, workflow_key, secret_ciphertext, secret_nonce, created_by, scopes)
		VALUES ('t1', 'whk_bob', 'triage', '\x01', '\x02', 'bob', '{runs.execute,notes.write,crm.write}')`)
	exec(`INSERT INTO revocations (tenant_id, sub, scope) VALUES ('t1', 'bob', 'notes.write'), ('t2', 'alice', 'notes.write')`)
	// A note of a schedule's run, and one whose run is gone.
	exec(`INSERT INTO runs (run_id, tenant_id, workflow_key, revision, checksum, mode, status, input, input_hash, origin, actor,
		permissions, workflow_id) VALUES ('r1', 't1', 'triage', 1, 'c1', 'live', 'succeeded', '{}', 'h',
		'{"kind":"schedule","id":"sch_alice"}', '{"kind":"service","sub":"schedule:sch_alice","configuredBy":"alice"}', '{}', 'w1')`)
	exec(`INSERT INTO notes (note_id, tenant_id, run_id, node_id, title, body) VALUES
		('n1', 't1', 'r1', 'save', 'kept', '{}'), ('n2', 't1', 'gone', 'save', 'orphan', '{}')`)

	check := func() {
		t.Helper()
		policies := map[string][]string{}
		for _, id := range []string{"sch_alice", "sch_carol"} {
			tenant := "t1"
			if id == "sch_carol" {
				tenant = "t2"
			}
			sc, err := st.GetSchedule(ctx, tenant, id)
			require.NoError(t, err)
			policies[id] = sc.ToolPolicy
			assert.Equal(t, "migration 00007 (what it could use before)", sc.ToolPolicyUpdatedBy, "%s policy set by %q", id, sc.ToolPolicyUpdatedBy)
		}
		w, err := st.GetWebhook(ctx, "t1", "whk_bob")
		require.NoError(t, err)
		policies["whk_bob"] = w.ToolPolicy
		want := map[string][]string{
			// notes.write held; crm.write@1 not; local.admin@1 needs admin;
			// core.http.fetch@1 is external.
			"sch_alice": {"core.echo@1", "core.fail@1", "core.sleep@1", "local.lookup@1", "workspace.notes.write@1"},
			// local.lookup@1 is pinned by t1's triage, not t2's; the
			// revocation of notes.write concerns t2's alice, not carol.
			"sch_carol": {"core.echo@1", "core.fail@1", "core.sleep@1"},
			// notes.write revoked from bob: workspace.notes.write@1 was
			// never offered to his webhook's runs.
			"whk_bob": {"core.echo@1", "core.fail@1", "core.sleep@1", "crm.write@1", "local.lookup@1"},
		}
		for id, p := range want {
			assert.True(t, slices.Equal(policies[id], p), "%s policy %v, want %v", id, policies[id], p)
		}
		notes, err := st.ListNotes(ctx, "t1", 10, nil)
		require.NoError(t, err)
		for _, n := range notes {
			switch n.Title {
			case "kept":
				assert.False(t, n.Actor == nil || *n.Actor != (execution.Actor{Kind: "service", Sub: "schedule:sch_alice", ConfiguredBy: "alice"}) || n.RequestedBy != "alice", "note of r1 attributed to %+v %q", n.Actor, n.RequestedBy)
			case "orphan":
				assert.False(t, n.Actor != nil || n.RequestedBy != "", "orphan note attributed to %+v %q", n.Actor, n.RequestedBy)
			}
		}
	}
	require.NoError(t, store.MigrateTo(ctx, pool, 7))
	// The store reads the latest schema; later migrations leave policies alone.
	require.NoError(t, store.Migrate(ctx, pool))
	check()
	// The migration rolls back and applies again.
	require.NoError(t, store.MigrateTo(ctx, pool, 6))
	require.NoError(t, store.Migrate(ctx, pool))
	check()

	// A schedule created after the migration has no tool unless given one.
	sc, err := st.CreateSchedule(ctx, store.Schedule{TenantID: "t1", ScheduleID: "sch_new", WorkflowKey: "triage",
		Spec: store.ScheduleSpec{Every: "1h"}, CreatedBy: "alice", Scopes: []string{"runs.execute"}, TemporalScheduleID: "ts3"})
	require.NoError(t, err)
	require.NotNil(t, sc.ToolPolicy, "new schedule policy %#v by %q", sc.ToolPolicy, sc.ToolPolicyUpdatedBy)
	require.Empty(t, sc.ToolPolicy, "new schedule policy %#v by %q", sc.ToolPolicy, sc.ToolPolicyUpdatedBy)
	require.Equal(t, "alice", sc.ToolPolicyUpdatedBy, "new schedule policy %#v by %q", sc.ToolPolicy, sc.ToolPolicyUpdatedBy)
}
