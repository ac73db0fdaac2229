package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := store.MigrateTo(ctx, pool, 6); err != nil {
		t.Fatal(err)
	}
	st := &store.Store{Pool: pool}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	// The catalog as workers published it: the built-ins and crm.write@1.
	crm := graph.ActionContract{ID: "crm.write", Version: 1, Risk: graph.RiskWorkspaceWrite, InputSchema: json.RawMessage(`{}`),
		OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{"crm.write"}, TimeoutMs: 1000, Idempotency: catalog.IdempotencyLedger}
	if err := st.PublishActionContracts(ctx, append(catalog.BuiltinContracts(), crm)); err != nil {
		t.Fatal(err)
	}
	// Workflow triage of t1 pins local.lookup@1, a contract no worker
	// published here (a revision pins what the catalog resolved then).
	for _, tenant := range []string{"t1", "t2"} {
		if _, err := st.CreateWorkflow(ctx, tenant, "triage", json.RawMessage(`{}`), "alice"); err != nil {
			t.Fatal(err)
		}
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
			if err != nil {
				t.Fatal(err)
			}
			policies[id] = sc.ToolPolicy
			if sc.ToolPolicyUpdatedBy != "migration 00007 (what it could use before)" {
				t.Errorf("%s policy set by %q", id, sc.ToolPolicyUpdatedBy)
			}
		}
		w, err := st.GetWebhook(ctx, "t1", "whk_bob")
		if err != nil {
			t.Fatal(err)
		}
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
			if !slices.Equal(policies[id], p) {
				t.Errorf("%s policy %v, want %v", id, policies[id], p)
			}
		}
		notes, err := st.ListNotes(ctx, "t1", 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range notes {
			switch n.Title {
			case "kept":
				if n.Actor == nil || *n.Actor != (execution.Actor{Kind: "service", Sub: "schedule:sch_alice", ConfiguredBy: "alice"}) || n.RequestedBy != "alice" {
					t.Errorf("note of r1 attributed to %+v %q", n.Actor, n.RequestedBy)
				}
			case "orphan":
				if n.Actor != nil || n.RequestedBy != "" {
					t.Errorf("orphan note attributed to %+v %q", n.Actor, n.RequestedBy)
				}
			}
		}
	}
	if err := store.MigrateTo(ctx, pool, 7); err != nil {
		t.Fatal(err)
	}
	// The store reads the latest schema; later migrations leave policies alone.
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	check()
	// The migration rolls back and applies again.
	if err := store.MigrateTo(ctx, pool, 6); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	check()

	// A schedule created after the migration has no tool unless given one.
	sc, err := st.CreateSchedule(ctx, store.Schedule{TenantID: "t1", ScheduleID: "sch_new", WorkflowKey: "triage",
		Spec: store.ScheduleSpec{Every: "1h"}, CreatedBy: "alice", Scopes: []string{"runs.execute"}, TemporalScheduleID: "ts3"})
	if err != nil {
		t.Fatal(err)
	}
	if sc.ToolPolicy == nil || len(sc.ToolPolicy) != 0 || sc.ToolPolicyUpdatedBy != "alice" {
		t.Fatalf("new schedule policy %#v by %q", sc.ToolPolicy, sc.ToolPolicyUpdatedBy)
	}
}
