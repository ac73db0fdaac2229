package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/starter"
)

// napNotesGraph sleeps, then writes a note.
const napNotesGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "nap", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"literal": 5000}}, "timeoutMs": 30000},
    {"id": "save", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"},
     "action": {"id": "workspace.notes.write", "version": 1},
     "mapping": {"title": {"literal": "t"}, "body": {"pointer": "/in"}}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "nap.in"}, {"from": "nap.out", "to": "save.in"}, {"from": "save.out", "to": "out.in"}]
}`

// TestRevocationReachesARunningServiceActorRun: a webhook's run holds its
// creator's scopes; revoking notes.write from the creator while the run
// naps denies the notes node that runs after.
func TestRevocationReachesARunningServiceActorRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("napnotes", napNotesGraph)
	ctx := context.Background()
	acc, err := e.starter.Enqueue(ctx, starter.Request{WorkflowKey: "napnotes", Input: json.RawMessage(`{"x":1}`),
		IdempotencyKey: uuid.NewString()}, starter.Trusted{
		TenantID:    e.tenant,
		Actor:       execution.Actor{Kind: "service", Sub: "webhook:whk_test", ConfiguredBy: "alice"},
		Origin:      execution.Origin{Kind: "webhook", ID: "whk_test"},
		Permissions: []string{auth.ScopeRunsExecute, auth.ScopeNotesWrite},
	})
	require.NoError(t, err, "the snapshot holds notes.write at enqueue")
	e.waitForEvent(acc.RunID, "node.started nap", 10*time.Second)
	require.NoError(t, e.st.Revoke(ctx, e.tenant, "alice", auth.ScopeNotesWrite))

	v := e.wait(acc.RunID, 30*time.Second)
	require.Equal(t, execution.StatusFailed, v.Status, "%v", e.eventTypes(acc.RunID))
	require.NotNil(t, v.Error)
	require.Equal(t, execution.RunErrNodeFailed, v.Error.Code)
	require.Equal(t, "save", v.Error.NodeID)
	status, _, _, _ := v.node(t, "nap")
	require.Equal(t, execution.NodeSucceeded, status, "the nap ran before the revocation mattered")
	var failed *execution.EventData
	for _, ev := range e.events(acc.RunID) {
		if ev.Type == execution.EventNodeFailed {
			failed = &execution.EventData{}
			require.NoError(t, json.Unmarshal(ev.Data, failed))
		}
	}
	require.NotNil(t, failed)
	require.Equal(t, execution.ErrPermissionDenied, failed.Error.Type)
	notes, err := e.st.ListNotes(ctx, e.tenant, 10, nil)
	require.NoError(t, err)
	require.Empty(t, notes, "a denied node wrote a note")
	e.checkChain(acc.RunID)
}
