package activities_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// storeRun stores run-1 as the starter would have, with b's revision.
func (b *bundle) storeRun(tenantID string, mode execution.Mode, permissions []string) {
	b.t.Helper()
	_, _, err := b.st.CreateRun(context.Background(), store.Run{RunID: "run-1", TenantID: tenantID, TenantName: "Acme",
		WorkflowKey: "wf", Checksum: b.checksum, Mode: string(mode), Input: json.RawMessage(`{}`), InputHash: "h",
		Origin: execution.Origin{Kind: "api"}, Actor: execution.Actor{Kind: "user", Sub: "ada", Name: "Ada Lovelace", Email: "ada@example.com"},
		Permissions: permissions, WorkflowID: "weft-" + tenantID}, "k")
	require.NoError(b.t, err)
}

// lean is in as interpreter version 6 sends it for a run started with
// lean inputs: the run's constants left out.
func lean(in execution.NodeInput) execution.NodeInput {
	in = in.WithConstants(execution.RunConstants{})
	in.Lean = true
	return in
}

// A lean input runs exactly as the full one: the activity reads the
// workflow key, revision, mode, actor, permissions and tenant name from the
// run's record (a template renders every one of them).
func TestLeanInputRunsWithTheRunsRecord(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	b.storeRun(tenant, execution.ModeLive, []string{"notes.write"})
	full := b.input("mapped", graph.KindAction, map[string]string{"in": item})
	want, err := b.runNode(full)
	require.NoError(t, err)
	got, err := b.runNode(lean(full))
	require.NoError(t, err)
	require.Equal(t, b.value(want.Value), b.value(got.Value))
	require.Contains(t, b.value(got.Value), "by Ada Lovelace \\u003cada@example.com\\u003e on 2026-12-01 in run-1/wf for Acme")

	// The record's permissions let the node write; so do local nodes run.
	res, err := b.runNode(lean(b.input("save", graph.KindAction, map[string]string{"in": item})))
	require.NoError(t, err, "%+v", res)
	g := newBundle(t, localDoc)
	g.storeRun(tenant, execution.ModeLive, nil)
	res, err = g.runLocal(lean(g.input("g", graph.KindGate, map[string]string{"in": `{"id":"a","n":5}`})))
	require.NoError(t, err)
	require.Equal(t, "pass", res.Port)
}

// The record is the only source: what a lean input holds in the
// constants' place (a forged permission, another revision) is ignored.
func TestLeanInputTakesNothingButTheRecord(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	b.storeRun(tenant, execution.ModeLive, []string{"runs.read"})
	in := b.input("save", graph.KindAction, map[string]string{"in": item})
	in.Lean = true // notes.write and the right checksum in the input, not in the record
	_, err := b.runNode(in)
	ae := wantAppErr(t, err, execution.ErrPermissionDenied, true)
	var details map[string][]string
	require.NoError(t, ae.Details(&details))
	require.Equal(t, []string{"notes.write"}, details["missing"])
	notes, err := b.st.ListNotes(context.Background(), tenant, 10, nil)
	require.NoError(t, err)
	require.Empty(t, notes, "a lean input's forged permission wrote a note")
}

// A simulated run's attempts never call a real action, whatever a lean
// input claims: the mode comes from the record.
func TestLeanInputOfASimulatedRunCallsNothing(t *testing.T) {
	t.Parallel()
	b, calls := simBundle(t, `{"echo":[{"output":{"from":"fixture"}}]}`)
	for _, node := range []string{"echo", "save"} {
		in := b.input(node, graph.KindAction, map[string]string{"in": item})
		in.Mode, in.Lean = execution.ModeLive, true // forged: the record says simulation
		res, err := b.runNode(in)
		require.NoError(t, err, "%s: %+v", node, res)
		if node == "echo" {
			require.JSONEq(t, `{"from":"fixture"}`, b.value(res.Value))
		}
	}
	require.Zero(t, calls.Load(), "a simulated run's lean attempt called an action")
	notes, err := b.st.ListNotes(context.Background(), tenant, 10, nil)
	require.NoError(t, err)
	require.Empty(t, notes)
}

// Without a run to read them from, a lean input cannot run: RUN_NOT_FOUND,
// permanent, for a run that does not exist and for another tenant's run,
// even one this worker has read the constants of for its own tenant.
func TestLeanInputWithoutItsRunIsRefused(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	in := lean(b.input("echo", graph.KindAction, map[string]string{"in": item}))
	_, err := b.runNode(in)
	wantAppErr(t, err, execution.ErrRunNotFound, true)

	b.storeRun(tenant, execution.ModeLive, []string{"notes.write"})
	_, err = b.runNode(in) // a miss is not cached: the run is found now
	require.NoError(t, err)
	other := in
	other.TenantID = "tenant-2"
	_, err = b.runNode(other)
	wantAppErr(t, err, execution.ErrRunNotFound, true)
	noRun := in
	noRun.RunID = ""
	_, err = b.runNode(noRun)
	wantAppErr(t, err, execution.ErrRunNotFound, true)
}

// A run's constants read by its workflow id are those read by its run id,
// with the run's id; another tenant's workflow id finds nothing.
func TestRunConstantsOfWorkflowAreTheRunsConstants(t *testing.T) {
	t.Parallel()
	b := newBundle(t, localDoc)
	b.storeRun(tenant, execution.ModeLive, []string{"notes.write"})
	ctx := context.Background()
	want, err := b.st.RunConstants(ctx, tenant, "run-1")
	require.NoError(t, err)
	runID, got, err := b.st.RunConstantsOfWorkflow(ctx, tenant, "weft-"+tenant)
	require.NoError(t, err)
	require.Equal(t, "run-1", runID)
	require.Equal(t, want, got)
	_, _, err = b.st.RunConstantsOfWorkflow(ctx, "tenant-2", "weft-"+tenant)
	require.ErrorIs(t, err, failure.ErrNotFound)
	_, _, err = b.st.RunConstantsOfWorkflow(ctx, tenant, "weft-nobody")
	require.ErrorIs(t, err, failure.ErrNotFound)
}
