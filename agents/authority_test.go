package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/authz"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// storeAuthority reads the run's authority from the store at every ask,
// as the activities' does.
type storeAuthority struct {
	st          *store.Store
	tenant, run string
	asked       int
}

func (s *storeAuthority) Grant(ctx context.Context) (authz.Grant, error) {
	s.asked++
	a, err := s.st.RunAuthority(ctx, s.tenant, s.run)
	if err != nil {
		return authz.Grant{}, err
	}
	return authz.FromRun(a), nil
}

// actedRun replaces the harness's run with one acting for actor with perms
// and grants, and returns its authority.
func (h *harness) actedRun(actor execution.Actor, perms, grants []string) *storeAuthority {
	h.t.Helper()
	h.run = uuid.NewString()
	_, _, err := h.st.CreateRun(context.Background(), store.Run{RunID: h.run, TenantID: h.tenant, WorkflowKey: "wf", Checksum: "c",
		Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-" + h.run, Actor: actor,
		Origin: execution.Origin{Kind: "api"}, Permissions: perms, ToolGrants: grants}, h.run)
	require.NoError(h.t, err)
	return &storeAuthority{st: h.st, tenant: h.tenant, run: h.run}
}

// TestRevocationBetweenTwoCallsDeniesTheSecond: the harness re-authorizes
// before every call, so a scope revoked from the run's user while its first
// call runs denies the second, which writes nothing; the model gets the
// denial as the tool's answer and the node goes on.
func TestRevocationBetweenTwoCallsDeniesTheSecond(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "Triage.", Provider: "openai", Model: "m",
		AllowedTools: []string{"test.block@1", "test.write@1"}})
	h.prov.turns = []provider.Reply{
		calls(call("c1", "test_write_v1", `{"n":1}`), call("c2", "test_block_v1", `{}`), call("c3", "test_write_v1", `{"n":2}`)),
		final(`{"done":true}`),
	}
	user := execution.Actor{Kind: "user", Sub: "ada"}
	auth := h.actedRun(user, []string{"crm.write"}, nil)
	job := h.job(a, "crm.write")
	job.Actor, job.Authority = user, auth

	done := make(chan error, 1)
	go func() {
		_, err := h.runtime().Run(context.Background(), job)
		done <- err
	}()
	<-h.blockStarted // call 2 is running: call 1 wrote
	require.NoError(t, h.st.Revoke(context.Background(), h.tenant, "ada", "crm.write"))
	h.unblock <- struct{}{}
	require.NoError(t, <-done)

	require.Equal(t, []string{
		"tool.started 1 test.write@1", "tool.completed 1 test.write@1",
		"tool.started 2 test.block@1", "tool.completed 2 test.block@1",
		"tool.denied 3 test.write@1 TOOL_NOT_GRANTED",
	}, h.toolEvents())
	require.Equal(t, int32(1), h.writes.Load(), "the denied call wrote nothing")
	d := h.eventData(execution.EventToolDenied, 3)
	require.Equal(t, []any{"crm.write"}, d["missing"])
	require.Contains(t, d["message"], "crm.write revoked from ada")
	require.Equal(t, 4, auth.asked, "the offer and each of the three calls read the authority")
	tr := h.transcript()
	require.Contains(t, tr.Messages[len(tr.Messages)-2].Content, "TOOL_NOT_GRANTED", "the model got the denial as the answer")

	// The next attempt of the node offers the tool no more.
	h.prov.turns = []provider.Reply{calls(call("c1", "test_write_v1", `{"n":3}`)), final(`{"done":true}`)}
	h.prov.reqs = nil
	h.run = uuid.NewString()
	auth = h.actedRun(user, []string{"crm.write"}, nil)
	job.RunID, job.Authority = h.run, auth
	_, err := h.runtime().Run(context.Background(), job)
	require.NoError(t, err)
	require.Len(t, h.prov.reqs[0].Tools, 1, "a revoked tool is not offered")
	require.Equal(t, "test.block@1", h.prov.reqs[0].Tools[0].Ref)
	require.Equal(t, []string{"tool.denied 1 test.write@1 TOOL_NOT_GRANTED"}, h.toolEvents())
}

// TestToolGrantsNarrowTheOffer: a run's toolGrants leave only the tools
// they list; an empty list offers none.
func TestToolGrantsNarrowTheOffer(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "Triage.", Provider: "openai", Model: "m",
		AllowedTools: []string{"core.echo@1", "test.probe@1"}})
	for _, tc := range []struct {
		grants  []string
		offered []string
	}{
		{nil, []string{"core.echo@1", "test.probe@1"}},
		{[]string{"test.probe@1", "workspace.notes.write@1"}, []string{"test.probe@1"}},
		{[]string{}, nil},
	} {
		h.prov.turns = []provider.Reply{calls(call("c1", "core_echo_v1", `{}`)), final(`{"done":true}`)}
		h.prov.reqs = nil
		user := execution.Actor{Kind: "user", Sub: "ada"}
		auth := h.actedRun(user, nil, tc.grants)
		job := h.job(a)
		job.RunID, job.Actor, job.Authority = h.run, user, auth
		_, err := h.runtime().Run(context.Background(), job)
		require.NoError(t, err)
		var offered []string
		for _, tl := range h.prov.reqs[0].Tools {
			offered = append(offered, tl.Ref)
		}
		require.Equal(t, tc.offered, offered, "grants %v", tc.grants)
		// The agent.turn event says what was offered.
		d := h.eventData(agents.EventAgentTurn, 0)
		require.Len(t, d["tools"], len(tc.offered))
		if tc.grants != nil {
			require.Equal(t, []string{"tool.denied 1 core.echo@1 TOOL_NOT_GRANTED"}, h.toolEvents())
			require.Contains(t, h.eventData(execution.EventToolDenied, 1)["message"], "toolGrants")
		}
	}
}

// TestReplayedWriteIsNotReauthorized: a mutating call whose result the
// ledger already holds (it ran before the attempt was cut short) is
// replayed, not denied, although the scope was revoked since: nothing runs
// again, and the evidence says what happened.
func TestReplayedWriteIsNotReauthorized(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "Triage.", Provider: "openai", Model: "m",
		AllowedTools: []string{"test.write@1"}})
	h.prov.turns = []provider.Reply{calls(call("c1", "test_write_v1", `{"n":7}`)), final(`{"done":true}`)}
	user := execution.Actor{Kind: "user", Sub: "ada"}
	auth := h.actedRun(user, []string{"crm.write"}, nil)
	canon, err := graph.Canonical(json.RawMessage(`{"n":7}`))
	require.NoError(t, err)
	_, err = h.st.LedgerRecord(context.Background(), h.tenant, "test.write@1", agents.LedgerKey(h.run, "triage", 1),
		graph.SHA256Hex(canon), json.RawMessage(`{"written":7}`))
	require.NoError(t, err)

	// Offered at the start of the attempt, revoked before the call.
	job := h.job(a, "crm.write")
	job.RunID, job.Actor = h.run, user
	job.Authority = revokeAfterOffer{inner: auth, revoke: func() {
		require.NoError(t, h.st.Revoke(context.Background(), h.tenant, "ada", "crm.write"))
	}}
	_, err = h.runtime().Run(context.Background(), job)
	require.NoError(t, err)
	require.Equal(t, []string{"tool.started 1 test.write@1", "tool.completed 1 test.write@1"}, h.toolEvents())
	require.Equal(t, true, h.eventData(execution.EventToolCompleted, 1)["replayed"])
	require.Zero(t, h.writes.Load())
}

// revokeAfterOffer grants as inner does, and revokes once it has answered
// the first ask (the offer).
type revokeAfterOffer struct {
	inner  agents.Authority
	revoke func()
}

func (r revokeAfterOffer) Grant(ctx context.Context) (authz.Grant, error) {
	g, err := r.inner.Grant(ctx)
	r.revoke()
	return g, err
}

// failingAuthority answers err.
type failingAuthority struct{ err error }

func (f failingAuthority) Grant(context.Context) (authz.Grant, error) { return authz.Grant{}, f.err }

// TestUnreadableAuthorityRunsNothing: an authority that cannot be read
// fails the attempt before any tool runs: retryably for a read error, as
// refused for a permanent one (its type kept for the interpreter).
func TestUnreadableAuthorityRunsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "Triage.", Provider: "openai", Model: "m", AllowedTools: []string{"test.write@1"}})
	h.prov.turns = []provider.Reply{calls(call("c1", "test_write_v1", `{"n":1}`)), final(`{"done":true}`)}
	job := h.job(a, "crm.write")

	job.Authority = failingAuthority{err: errors.New("connection refused")}
	_, err := h.runtime().Run(context.Background(), job)
	require.ErrorContains(t, err, "read the run's authority")
	var ae *temporal.ApplicationError
	require.False(t, errors.As(err, &ae) && ae.NonRetryable(), "a read error is retried: %v", err)

	job.Authority = failingAuthority{err: temporal.NewNonRetryableApplicationError("no run", execution.ErrPermissionDenied, nil)}
	_, err = h.runtime().Run(context.Background(), job)
	ae = appError(t, err)
	require.True(t, ae.NonRetryable())
	require.Equal(t, execution.ErrPermissionDenied, ae.Type())
	require.Zero(t, h.writes.Load())
	require.Empty(t, h.toolEvents())
}
