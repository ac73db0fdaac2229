package agents_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/store"
)

func ptr[T any](v T) *T { return &v }

// budgeted makes the harness's run one with budget b.
func (h *harness) budgeted(b store.Budget) {
	h.t.Helper()
	h.run = uuid.NewString()
	_, _, err := h.st.CreateRun(context.Background(), store.Run{RunID: h.run, TenantID: h.tenant, WorkflowKey: "wf", Checksum: "c",
		Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-" + h.run, Budget: b}, "idem-"+h.run)
	require.NoError(h.t, err)
}

func (h *harness) budgetState() store.BudgetState {
	h.t.Helper()
	s, err := h.st.RunBudget(context.Background(), h.tenant, h.run)
	require.NoError(h.t, err)
	return s
}

func (h *harness) reservations() map[string]int {
	h.t.Helper()
	rows, err := h.st.Pool.Query(context.Background(), `SELECT state, count(*) FROM run_budget_reservations WHERE run_id = $1 GROUP BY state`, h.run)
	require.NoError(h.t, err)
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(h.t, rows.Scan(&s, &n))
		out[s] = n
	}
	return out
}

// simSpender is a sim agent whose every turn declares 100 input and 50
// output tokens: one tool call, then its answer (two turns, 300 tokens).
func simSpender() agents.Definition {
	return agents.Definition{Instructions: "Spend.", AllowedTools: []string{"core.echo@1"},
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Sim: &provider.SimScript{ToolCalls: []provider.SimToolCall{{Tool: "core.echo@1", Input: json.RawMessage(`{"x":1}`)}},
			Output: json.RawMessage(`{"ok":true}`), Usage: &provider.SimUsage{InputTokens: 100, OutputTokens: 50}}}
}

// A budget below what the agent uses stops it before the call that would
// exceed it: the first turn (150) fits 200, the second would not, so it is
// never made; the node fails BUDGET_EXCEEDED (not retryable) and the event
// says what was spent and allowed.
func TestBudgetStopsTheCallThatWouldExceedIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.budgeted(store.Budget{MaxTokens: ptr(int64(200))})
	a := h.agent("spender", simSpender())
	_, err := h.runtime().Run(context.Background(), h.job(a))
	ae := appError(t, err)
	require.Equal(t, agents.ErrBudgetExceeded, ae.Type())
	require.True(t, ae.NonRetryable())
	require.Contains(t, ae.Message(), "spent 150 of its 200 tokens and the next model call needs 150")

	require.Len(t, h.transcript().Turns, 1, "the second call was never made")
	run, err := h.st.GetRun(context.Background(), h.tenant, h.run)
	require.NoError(t, err)
	require.JSONEq(t, `{"calls": 1, "inputTokens": 100, "outputTokens": 50, "totalTokens": 150, "costUsd": 0}`, string(run.Usage))
	d := h.eventData(agents.EventBudgetExceeded, 0)
	require.Equal(t, map[string]any{"total": 150.0, "costUsd": 0.0}, d["spent"])
	require.Equal(t, map[string]any{"total": 200.0, "costUsd": nil}, d["allowed"])
	require.Equal(t, 150.0, d["needed"].(map[string]any)["total"])
	require.Equal(t, "tokens", d["dimension"])
	require.Equal(t, 2.0, d["turn"])
	require.Equal(t, map[string]int{"settled": 1}, h.reservations())
	require.Zero(t, h.budgetState().ReservedTokens)

	// One agent.turn: the refused call left no trace but its refusal.
	var turns int
	for _, e := range h.events() {
		if e.Type == agents.EventAgentTurn {
			turns++
		}
	}
	require.Equal(t, 1, turns)
}

// Two agent nodes of one run in parallel never overspend its budget: 450
// tokens cover three of the four 150-token calls, so one node finishes and
// the other is refused, whatever the interleaving.
func TestParallelNodesNeverOverspendTheBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.budgeted(store.Budget{MaxTokens: ptr(int64(450))})
	a := h.agent("spender", simSpender())
	rt := h.runtime()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, node := range []string{"left", "right"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := h.job(a)
			job.NodeID = node
			_, errs[i] = rt.Run(context.Background(), job)
		}()
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			require.Equal(t, agents.ErrBudgetExceeded, appError(t, err).Type())
			failed++
		}
	}
	require.Equal(t, 1, failed, "errors: %v", errs)
	s := h.budgetState()
	require.Equal(t, int64(450), s.SpentTokens)
	require.Zero(t, s.ReservedTokens)
	require.Equal(t, map[string]int{"settled": 3}, h.reservations())
}

// A real model's call gets the remaining tokens as its output-token limit
// (after its input estimate), or the agent's maxOutputTokens when smaller;
// a failed call releases its reservation; a cost budget refuses an
// unpriced model.
func TestBudgetLimitsAndReleasesModelCalls(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.budgeted(store.Budget{MaxTokens: ptr(int64(10_000))})
	a := h.agent("triage", agents.Definition{Instructions: "Triage.", Provider: "openai", Model: "m"})
	h.prov.turns = []provider.Reply{final(`{"done":true}`)}
	_, err := h.runtime().Run(context.Background(), h.job(a))
	require.NoError(t, err)
	req := h.prov.reqs[0]
	require.Equal(t, 10_000-provider.EstimateInputTokens(req), req.MaxOutputTokens)
	require.Equal(t, int64(55), h.budgetState().SpentTokens, "settled with the real usage")

	// The agent's own cap is smaller: it is the limit.
	h2 := newHarness(t)
	h2.budgeted(store.Budget{MaxTokens: ptr(int64(10_000))})
	capped := h2.agent("triage", agents.Definition{Instructions: "Triage.", Provider: "openai", Model: "m", MaxOutputTokens: 300})
	h2.prov.turns = []provider.Reply{final(`{"done":true}`)}
	_, err = h2.runtime().Run(context.Background(), h2.job(capped))
	require.NoError(t, err)
	require.Equal(t, int64(300), h2.prov.reqs[0].MaxOutputTokens)

	// Without a budget only the agent's cap is sent.
	h3 := newHarness(t)
	capped3 := h3.agent("triage", agents.Definition{Instructions: "Triage.", Provider: "openai", Model: "m", MaxOutputTokens: 300})
	h3.prov.turns = []provider.Reply{final(`{"done":true}`)}
	_, err = h3.runtime().Run(context.Background(), h3.job(capped3))
	require.NoError(t, err)
	require.Equal(t, int64(300), h3.prov.reqs[0].MaxOutputTokens)

	// A failed call gives its reservation back.
	h4 := newHarness(t)
	h4.budgeted(store.Budget{MaxTokens: ptr(int64(10_000))})
	a4 := h4.agent("triage", agents.Definition{Instructions: "Triage.", Provider: "openai", Model: "m"})
	_, err = h4.runtime().Run(context.Background(), h4.job(a4)) // the script is empty: the provider fails
	require.Equal(t, provider.CodeMalformed, appError(t, err).Type())
	require.Equal(t, map[string]int{"released": 1}, h4.reservations())
	require.Zero(t, h4.budgetState().ReservedTokens)

	// A cost budget cannot bound a model without a price.
	h5 := newHarness(t)
	h5.budgeted(store.Budget{MaxCostUSD: ptr(1.0)})
	a5 := h5.agent("triage", agents.Definition{Instructions: "Triage.", Provider: "openai", Model: "m"})
	h5.prov.turns = []provider.Reply{final(`{"done":true}`)}
	_, err = h5.runtime().Run(context.Background(), h5.job(a5))
	ae := appError(t, err)
	require.Equal(t, agents.ErrBudgetUnpriced, ae.Type())
	require.True(t, ae.NonRetryable())
	require.Zero(t, h5.prov.asked.Load())
}

// A cost budget bounds sim calls that declare their cost.
func TestCostBudgetWithDeclaredSimCost(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.budgeted(store.Budget{MaxCostUSD: ptr(0.03)})
	def := simSpender()
	def.Sim.Usage.CostUSD = 0.02
	a := h.agent("spender", def)
	_, err := h.runtime().Run(context.Background(), h.job(a))
	require.Equal(t, agents.ErrBudgetExceeded, appError(t, err).Type())
	d := h.eventData(agents.EventBudgetExceeded, 0)
	require.Equal(t, "costUsd", d["dimension"])
	require.InDelta(t, 0.02, d["spent"].(map[string]any)["costUsd"], 1e-12)
	require.InDelta(t, 0.03, d["allowed"].(map[string]any)["costUsd"], 1e-12)
}

// A reservation made by an attempt that was then lost is not leaked: the
// same attempt re-dispatched finds it for the same turn, and a later
// attempt releases it.
func TestReservationsOfLostAttemptsDoNotLeak(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.budgeted(store.Budget{MaxTokens: ptr(int64(1000))})
	a := h.agent("spender", simSpender())
	ctx := context.Background()
	// Attempt 1's first dispatch reserved turn 1, then its worker was lost.
	lost := store.BudgetKey{TenantID: h.tenant, RunID: h.run, NodeID: "triage", Attempt: 1, Turn: 1}
	_, err := h.st.ReserveBudget(ctx, lost, store.CallEstimate{InputTokens: 100, OutputTokens: 50})
	require.NoError(t, err)
	job := h.job(a)
	job.Dispatch = 1 // the same attempt, dispatched again
	_, err = h.runtime().Run(ctx, job)
	require.NoError(t, err)
	s := h.budgetState()
	require.Equal(t, int64(300), s.SpentTokens)
	require.Zero(t, s.ReservedTokens)
	require.Equal(t, map[string]int{"settled": 2}, h.reservations())

	// Another node's attempt 1 left a reservation; its attempt 2 releases it.
	left := store.BudgetKey{TenantID: h.tenant, RunID: h.run, NodeID: "other", Attempt: 1, Turn: 1}
	_, err = h.st.ReserveBudget(ctx, left, store.CallEstimate{InputTokens: 100, OutputTokens: 50})
	require.NoError(t, err)
	job = h.job(a)
	job.NodeID, job.Attempt = "other", 2
	_, err = h.runtime().Run(ctx, job)
	require.NoError(t, err)
	s = h.budgetState()
	require.Equal(t, int64(600), s.SpentTokens)
	require.Zero(t, s.ReservedTokens)
	require.Equal(t, map[string]int{"settled": 4, "released": 1}, h.reservations())
}
