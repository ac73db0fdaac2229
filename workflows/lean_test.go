package workflows

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// The run's parameters decide whether attempts leave the run's constants
// to its record (NodeInput.Lean), and only an execution that recorded
// version 6 or later sends such inputs: every attempt of such a run, local
// or not, names its tenant, run and start and nothing else of the run;
// every attempt of any other run carries the constants as before.
func TestLeanInputsOnlyWhenTheRunAsks(t *testing.T) {
	full := func(t *testing.T, p execution.RunParams, in execution.NodeInput) {
		t.Helper()
		require.False(t, in.Lean, "%s: %+v", in.NodeID, in)
		require.Equal(t, p.RunConstants(), execution.RunConstants{WorkflowKey: in.WorkflowKey, Checksum: in.Checksum,
			Mode: in.Mode, Actor: in.Actor, Permissions: in.Permissions, TenantName: in.TenantName}, in.NodeID)
	}
	lean := func(t *testing.T, p execution.RunParams, in execution.NodeInput) {
		t.Helper()
		require.True(t, in.Lean, "%s: %+v", in.NodeID, in)
		require.Equal(t, execution.NodeInput{TenantID: p.TenantID, RunID: p.RunID, NodeID: in.NodeID, Kind: in.Kind,
			Attempt: 1, Inputs: in.Inputs, RunStartedAt: p.EnqueuedAt, VirtualNow: in.VirtualNow, Lean: true}, in)
		raw, err := json.Marshal(in)
		require.NoError(t, err)
		for _, member := range []string{"workflowKey", "checksum", "mode", "actor", "permissions", "tenantName"} {
			require.NotContains(t, string(raw), `"`+member+`"`, "a lean input's payload: %s", raw)
		}
	}
	for _, tc := range []struct {
		name    string
		mode    execution.Mode
		ask     bool
		version workflow.Version // the execution's recorded version; 0 for this release's
		check   func(*testing.T, execution.RunParams, execution.NodeInput)
	}{
		{name: "asked", mode: execution.ModeLive, ask: true, check: lean},
		{name: "asked, simulation", mode: execution.ModeSimulation, ask: true, check: lean},
		{name: "not asked", mode: execution.ModeLive, check: full},
		{name: "asked, version 5", mode: execution.ModeLive, ask: true, version: 5, check: full},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWF(t, diamond, nil)
			if tc.version > 0 {
				w.env.OnGetVersion(changeInterpreterV1, workflow.DefaultVersion, interpreterVersion).Return(tc.version)
			}
			p := testParams(tc.mode)
			p.LeanInputs = tc.ask
			require.NoError(t, w.run(p))
			checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
			inputs := append(w.f.nodeInputs("g"), append(w.f.nodeInputs("b"), w.f.nodeInputs("m")...)...)
			require.Len(t, inputs, 3, "the gate, the action and the merge ran once each")
			for _, in := range inputs {
				tc.check(t, p, in)
			}
			if tc.mode == execution.ModeSimulation {
				require.False(t, inputs[1].VirtualNow.IsZero(), "a simulated attempt still carries the virtual clock")
			}
			require.Equal(t, graph.KindAction, inputs[1].Kind)
		})
	}
}

// Continue-as-new hands the run's parameters on whole: the next execution's
// attempts are lean too.
func TestLeanInputsAcrossContinueAsNew(t *testing.T) {
	p := testParams(execution.ModeLive)
	p.LeanInputs = true
	p.ForceContinueAsNewAfterEvents = 5
	w1 := newWF(t, linear, nil)
	next := requireContinued(t, w1.run(p))
	require.True(t, next.LeanInputs)
	require.Len(t, w1.f.nodeInputs("a"), 1)
	require.True(t, w1.f.nodeInputs("a")[0].Lean)

	w2 := newWF(t, linear, nil)
	require.NoError(t, w2.run(next))
	checkLog(t, w2.f, "run-1", 9, execution.StatusSucceeded)
	b := w2.f.nodeInputs("b")
	require.Len(t, b, 1)
	require.True(t, b[0].Lean, "%+v", b[0])
	require.Empty(t, b[0].Checksum)
	require.Equal(t, p.EnqueuedAt, b[0].RunStartedAt, "the run's start, exact, across executions")
}
