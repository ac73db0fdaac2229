package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func newAgent(key string) store.NewAgent {
	return store.NewAgent{Key: key, Name: "Agent " + key, Content: json.RawMessage(`{"instructions":"hi","allowedTools":["core.echo@1"],"outputSchema":{"type":"object"}}`),
		Hash: "h1-" + key, By: "alice"}
}

func TestAgentsRevisionsArchiveAndTenancy(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()

	a, r, err := st.CreateAgent(ctx, "t1", newAgent("triage"))
	require.NoError(t, err)
	require.Equal(t, 1, a.LatestRevision)
	require.Equal(t, 1, r.Revision)
	_, _, err = st.CreateAgent(ctx, "t1", newAgent("triage"))
	require.Equal(t, failure.CodeAlreadyExists, failure.CodeOf(err))
	// Another tenant may use the same key.
	_, _, err = st.CreateAgent(ctx, "t2", newAgent("triage"))
	require.NoError(t, err)

	name := "Renamed"
	a, r, err = st.AddAgentRevision(ctx, "t1", "triage", store.AgentUpdate{ExpectedRevision: 1, Name: &name,
		Content: json.RawMessage(`{"instructions":"v2"}`), Hash: "h2", By: "bob"})
	require.NoError(t, err)
	require.Equal(t, 2, r.Revision)
	require.Equal(t, "Renamed", a.Name)
	_, _, err = st.AddAgentRevision(ctx, "t1", "triage", store.AgentUpdate{ExpectedRevision: 1, Content: json.RawMessage(`{}`), Hash: "h3"})
	require.Equal(t, failure.CodeRevisionConflict, failure.CodeOf(err))
	_, _, err = st.AddAgentRevision(ctx, "t3", "triage", store.AgentUpdate{Content: json.RawMessage(`{}`), Hash: "h3"})
	require.ErrorIs(t, err, failure.ErrNotFound)

	// Revisions are immutable in the database itself.
	_, err = st.Pool.Exec(ctx, `UPDATE agent_revisions SET hash = 'x' WHERE tenant_id = 't1'`)
	require.Error(t, err)

	name, err = st.AgentName(ctx, "t1", "triage")
	require.NoError(t, err)
	require.Equal(t, "Renamed", name)
	_, err = st.AgentName(ctx, "t9", "triage")
	require.ErrorIs(t, err, failure.ErrNotFound)

	refs := []graph.AgentRef{{Key: "triage", Revision: 1}, {Key: "triage", Revision: 2}, {Key: "triage", Revision: 7}, {Key: "nope", Revision: 1}}
	cs, err := st.AgentContracts(ctx, "t1", refs)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	require.Equal(t, "h1-triage", cs[0].Hash)
	require.Equal(t, []string{"core.echo@1"}, cs[0].AllowedTools)
	require.JSONEq(t, `{"type":"object"}`, string(cs[0].OutputSchema))
	require.False(t, cs[0].Archived)
	require.Equal(t, []string{}, cs[0].RequiredPermissions)

	archived, err := st.ArchiveAgent(ctx, "t1", "triage", "carol")
	require.NoError(t, err)
	require.True(t, archived.Archived())
	again, err := st.ArchiveAgent(ctx, "t1", "triage", "dave")
	require.NoError(t, err)
	require.Equal(t, archived.ArchivedAt, again.ArchivedAt)
	require.Equal(t, "carol", again.ArchivedBy)
	cs, err = st.AgentContracts(ctx, "t1", refs[:1])
	require.NoError(t, err)
	require.True(t, cs[0].Archived)
	// Archived agents take no new revision, but their revisions stay readable.
	_, _, err = st.AddAgentRevision(ctx, "t1", "triage", store.AgentUpdate{Content: json.RawMessage(`{}`), Hash: "h9"})
	require.Equal(t, store.CodeAgentArchived, failure.CodeOf(err))
	_, err = st.GetAgentRevision(ctx, "t1", "triage", 1)
	require.NoError(t, err)
	// The other tenant's agent is untouched.
	other, err := st.GetAgent(ctx, "t2", "triage")
	require.NoError(t, err)
	require.False(t, other.Archived())

	for _, k := range []string{"b", "c", "d"} {
		_, _, err := st.CreateAgent(ctx, "t1", newAgent(k))
		require.NoError(t, err)
	}
	page, next, err := st.ListAgents(ctx, "t1", "", 2)
	require.NoError(t, err)
	require.Equal(t, "c", next)
	require.Len(t, page, 2)
	page, next, err = st.ListAgents(ctx, "t1", next, 2)
	require.NoError(t, err)
	require.Equal(t, "", next)
	require.Equal(t, []string{"d", "triage"}, []string{page[0].Key, page[1].Key})
}

func TestPublishActionContractsRefusesAChangedContract(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	c := graph.ActionContract{ID: "crm.lookup", Version: 1, Risk: graph.RiskRead, InputSchema: json.RawMessage(`{}`),
		OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{}, TimeoutMs: 1000, Idempotency: "none"}
	require.NoError(t, st.PublishActionContracts(ctx, []graph.ActionContract{c}))
	require.NoError(t, st.PublishActionContracts(ctx, []graph.ActionContract{c}), "same contract again is fine")
	changed := c
	changed.TimeoutMs = 2000
	err := st.PublishActionContracts(ctx, []graph.ActionContract{changed})
	require.Equal(t, store.CodeContractChanged, failure.CodeOf(err))
	require.Contains(t, err.Error(), "crm.lookup@1")
	v2 := changed
	v2.Version = 2
	require.NoError(t, st.PublishActionContracts(ctx, []graph.ActionContract{v2}))
	all, err := st.ListActionContracts(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	h, _ := c.ContentHash()
	require.Equal(t, h, all[0].Hash)
	require.Equal(t, 1000, all[0].Contract.TimeoutMs)
}

// newRun stores a queued run of tenant.
func newRun(t *testing.T, st *store.Store, tenant string) string { return newRunTB(t, st, tenant) }

func newRunTB(t testing.TB, st *store.Store, tenant string) string {
	t.Helper()
	id := uuid.NewString()
	_, _, err := st.CreateRun(context.Background(), store.Run{RunID: id, TenantID: tenant, WorkflowKey: "wf", Checksum: "c",
		Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-" + id}, "idem-"+id)
	require.NoError(t, err)
	return id
}

func TestAgentTranscriptsFenceAttemptsAndUsageAddsUp(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := newRun(t, st, "t1")
	_, err := st.GetAgentTranscript(ctx, "t1", run, "triage")
	require.ErrorIs(t, err, failure.ErrNotFound)

	outbox := []execution.EventDraft{{Key: run + "/triage/2/agent.turn/1", Type: "agent.turn", NodeID: "triage", Attempt: 2,
		At: mustTime(t), Data: json.RawMessage(`{"turn":1}`)}}
	tr := store.AgentTranscript{TenantID: "t1", RunID: run, NodeID: "triage", AgentKey: "triage", AgentRevision: 1,
		Attempt: 2, Turn: 1, Transcript: json.RawMessage(`{"v":1}`), LedgerKeys: []string{"k1"}, Outbox: outbox}
	require.NoError(t, st.SaveAgentTranscript(ctx, tr, &store.Usage{Calls: 1, InputTokens: 10, OutputTokens: 5, CostUSD: 0.1}))
	require.NoError(t, st.SaveAgentTranscript(ctx, tr, &store.Usage{Calls: 1, InputTokens: 1, OutputTokens: 2, CostUSD: 0.2}))

	got, err := st.GetAgentTranscript(ctx, "t1", run, "triage")
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1}`, string(got.Transcript))
	require.Equal(t, []string{"k1"}, got.LedgerKeys)
	require.Len(t, got.Outbox, 1)
	require.Equal(t, outbox[0].Key, got.Outbox[0].Key)

	stale := tr
	stale.Attempt = 1
	stale.Transcript = json.RawMessage(`{"v":0}`)
	err = st.SaveAgentTranscript(ctx, stale, &store.Usage{Calls: 1, InputTokens: 1000})
	require.Equal(t, store.CodeStaleAttempt, failure.CodeOf(err))
	got, err = st.GetAgentTranscript(ctx, "t1", run, "triage")
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1}`, string(got.Transcript), "a stale attempt changes nothing")

	r, err := st.GetRun(ctx, "t1", run)
	require.NoError(t, err)
	require.JSONEq(t, `{"calls":2,"inputTokens":11,"outputTokens":7,"totalTokens":18,"costUsd":0.3}`, string(r.Usage),
		"the stale save added no usage; the cost sum is exact")
	require.ErrorIs(t, st.AddUsage(ctx, "t2", run, store.Usage{Calls: 1}), failure.ErrNotFound, "another tenant's run")
}

// An attempt re-dispatched after a lost lease keeps its attempt number; a
// save from its earlier dispatch (a worker presumed lost but still
// running) is stale once the later dispatch has saved.
func TestAgentTranscriptsFenceDispatchesOfOneAttempt(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := newRun(t, st, "t1")
	tr := store.AgentTranscript{TenantID: "t1", RunID: run, NodeID: "n", AgentKey: "a", AgentRevision: 1,
		Attempt: 1, Turn: 1, Transcript: json.RawMessage(`{"v":"first dispatch"}`)}
	require.NoError(t, st.SaveAgentTranscript(ctx, tr, nil))
	later := tr
	later.Dispatch, later.Transcript = 1, json.RawMessage(`{"v":"re-dispatched"}`)
	require.NoError(t, st.SaveAgentTranscript(ctx, later, nil))

	zombie := tr
	zombie.Turn, zombie.Transcript = 2, json.RawMessage(`{"v":"zombie"}`)
	require.Equal(t, store.CodeStaleAttempt, failure.CodeOf(st.SaveAgentTranscript(ctx, zombie, nil)))
	got, err := st.GetAgentTranscript(ctx, "t1", run, "n")
	require.NoError(t, err)
	require.JSONEq(t, `{"v":"re-dispatched"}`, string(got.Transcript))

	next := tr
	next.Attempt, next.Transcript = 2, json.RawMessage(`{"v":"next attempt"}`)
	require.NoError(t, st.SaveAgentTranscript(ctx, next, nil), "a later attempt outranks any dispatch of an earlier one")
}

func TestLedgerLookupAndRecord(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	_, found, err := st.LedgerLookup(ctx, "t1", "x.write@1", "r/n/1", "h1")
	require.NoError(t, err)
	require.False(t, found)
	bound, err := st.LedgerRecord(ctx, "t1", "x.write@1", "r/n/1", "h1", json.RawMessage(`{"id":1}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"id":1}`, string(bound))
	bound, err = st.LedgerRecord(ctx, "t1", "x.write@1", "r/n/1", "h1", json.RawMessage(`{"id":2}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"id":1}`, string(bound), "the first result wins")
	first, found, err := st.LedgerLookup(ctx, "t1", "x.write@1", "r/n/1", "h1")
	require.NoError(t, err)
	require.True(t, found)
	require.JSONEq(t, `{"id":1}`, string(first))
	_, _, err = st.LedgerLookup(ctx, "t1", "x.write@1", "r/n/1", "h2")
	require.True(t, errors.Is(err, store.ErrLedgerConflict) && failure.CodeOf(err) == failure.CodeIdempotencyConflict, "%v", err)
	_, err = st.LedgerRecord(ctx, "t1", "x.write@1", "r/n/1", "h2", json.RawMessage(`{}`))
	require.Equal(t, failure.CodeIdempotencyConflict, failure.CodeOf(err))
	_, found, err = st.LedgerLookup(ctx, "t2", "x.write@1", "r/n/1", "h2")
	require.NoError(t, err)
	require.False(t, found, "ledgers are per tenant")
}

func mustTime(t *testing.T) time.Time {
	t.Helper()
	return time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
}
