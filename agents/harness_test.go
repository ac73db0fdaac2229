package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// scripted is a provider whose replies are fixed per turn: the reply for
// turn n is turns[n-1], where n counts the assistant messages already in
// the transcript plus one, so a resumed attempt asks for the next turn.
type scripted struct {
	turns []provider.Reply
	asked atomic.Int32
	mu    sync.Mutex
	reqs  []provider.Request
}

func (s *scripted) Name() string { return provider.NameOpenAI }

func (s *scripted) Turn(ctx context.Context, req provider.Request) (provider.Reply, error) {
	s.asked.Add(1)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	n := 0
	for _, m := range req.Messages {
		if m.Role == provider.RoleAssistant {
			n++
		}
	}
	if n >= len(s.turns) {
		return provider.Reply{}, &provider.Error{Code: provider.CodeMalformed, Message: "script exhausted"}
	}
	return s.turns[n], nil
}

func calls(cs ...provider.ToolCall) provider.Reply {
	return provider.Reply{ToolCalls: cs, Usage: provider.Usage{InputTokens: 100, OutputTokens: 10, CostUSD: 0.001, Priced: true}}
}

func final(content string) provider.Reply {
	return provider.Reply{Content: content, Usage: provider.Usage{InputTokens: 50, OutputTokens: 5, CostUSD: 0.0005, Priced: true}}
}

func call(id, name, args string) provider.ToolCall {
	return provider.ToolCall{ID: id, Name: name, Arguments: args}
}

// harness is one test's world: a database, a run, test actions and a runtime.
type harness struct {
	t      *testing.T
	st     *store.Store
	reg    *catalog.Registry
	tenant string
	run    string
	prov   *scripted

	probeTenants chan string
	writes       atomic.Int32
	blockStarted chan struct{}
	unblock      chan struct{}
	release      chan struct{}
}

func permissive(id string, risk graph.Risk, perms ...string) graph.ActionContract {
	if perms == nil {
		perms = []string{}
	}
	idem := catalog.IdempotencyNone
	if risk == graph.RiskWorkspaceWrite {
		idem = catalog.IdempotencyLedger
	}
	return graph.ActionContract{ID: id, Version: 1, Risk: risk, InputSchema: json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{}`), RequiredPermissions: perms, TimeoutMs: 5000, Idempotency: idem}
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessOn(t, testinfra.NewStore(t))
}

// newHarnessOn builds a harness on an existing database: its own tenant,
// run and counters.
func newHarnessOn(t *testing.T, st *store.Store) *harness {
	t.Helper()
	h := &harness{t: t, st: st, tenant: "tenant-" + uuid.NewString()[:8], prov: &scripted{},
		probeTenants: make(chan string, 10), blockStarted: make(chan struct{}, 10), unblock: make(chan struct{}),
		release: make(chan struct{})}
	t.Cleanup(func() { close(h.release) })
	probe := permissive("test.probe", graph.RiskRead)
	slow := permissive("test.slow", graph.RiskRead)
	slow.TimeoutMs = 300
	big := permissive("test.big", graph.RiskRead)
	write := permissive("test.write", graph.RiskWorkspaceWrite, "crm.write")
	write.InputSchema = json.RawMessage(`{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}},"additionalProperties":false}`)
	block := permissive("test.block", graph.RiskRead)
	actions := append(catalog.Builtins(catalog.BuiltinDeps{Notes: st}),
		catalog.Action{Contract: probe, Handler: func(_ context.Context, c catalog.Call) (json.RawMessage, error) {
			h.probeTenants <- c.TenantID
			return json.Marshal(map[string]string{"tenant": c.TenantID})
		}},
		catalog.Action{Contract: slow, Handler: func(context.Context, catalog.Call) (json.RawMessage, error) {
			<-h.release // ignores its context on purpose
			return json.RawMessage(`{}`), nil
		}},
		catalog.Action{Contract: big, Handler: func(context.Context, catalog.Call) (json.RawMessage, error) {
			return json.Marshal(map[string]string{"text": strings.Repeat("é", 50_000)})
		}},
		catalog.Action{Contract: write, Handler: func(_ context.Context, c catalog.Call) (json.RawMessage, error) {
			h.writes.Add(1)
			var in struct{ N int }
			_ = json.Unmarshal(c.Input, &in)
			return json.Marshal(map[string]int{"written": in.N})
		}},
		catalog.Action{Contract: block, Handler: func(ctx context.Context, _ catalog.Call) (json.RawMessage, error) {
			h.blockStarted <- struct{}{}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-h.unblock:
				return json.RawMessage(`{"unblocked":true}`), nil
			}
		}},
	)
	var err error
	h.reg, err = catalog.NewRegistry(actions...)
	require.NoError(t, err)
	h.run = uuid.NewString()
	_, _, err = st.CreateRun(context.Background(), store.Run{RunID: h.run, TenantID: h.tenant, WorkflowKey: "wf", Checksum: "c",
		Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-" + h.run}, "idem")
	require.NoError(t, err)
	return h
}

// agent stores an agent revision and returns its pinned contract.
func (h *harness) agent(key string, def agents.Definition) graph.AgentContract {
	h.t.Helper()
	def = def.Normalize()
	require.Empty(h.t, agents.Validate(def, "", agents.ValidateOptions{}))
	content, err := json.Marshal(def)
	require.NoError(h.t, err)
	hash, err := def.Hash()
	require.NoError(h.t, err)
	_, _, err = h.st.CreateAgent(context.Background(), h.tenant, store.NewAgent{Key: key, Name: key, Content: content, Hash: hash, By: "alice"})
	require.NoError(h.t, err)
	return graph.AgentContract{Key: key, Revision: 1, Hash: hash, OutputSchema: def.OutputSchema, AllowedTools: def.AllowedTools}
}

func (h *harness) runtime() *agents.Runtime {
	h.t.Helper()
	rt, err := agents.New(agents.Deps{Store: h.st, Actions: h.reg, Providers: []provider.Provider{h.prov}})
	require.NoError(h.t, err)
	return rt
}

// job is an attempt of node "triage" pinning every registered contract.
func (h *harness) job(a graph.AgentContract, perms ...string) agents.Job {
	pinned := map[graph.ActionRef]graph.PinnedAction{}
	for _, c := range h.reg.Contracts() {
		pinned[graph.ActionRef{ID: c.ID, Version: c.Version}] = graph.PinnedAction{ActionContract: c, Hash: catalog.ContractHash(c)}
	}
	if perms == nil {
		perms = []string{}
	}
	return agents.Job{TenantID: h.tenant, RunID: h.run, WorkflowKey: "wf", NodeID: "triage", Attempt: 1, Agent: a,
		Actions: pinned, Input: json.RawMessage(`{"item":"a"}`), Actor: execution.Actor{Kind: "user", Sub: "alice"},
		Permissions: perms, RunStartedAt: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), Timeout: 30 * time.Second}
}

func (h *harness) events() []store.Event {
	h.t.Helper()
	evs, err := h.st.ListEvents(context.Background(), h.tenant, h.run, 0, 1000)
	require.NoError(h.t, err)
	return evs
}

// toolEvents renders tool.* events as "type ordinal tool reason".
func (h *harness) toolEvents() []string {
	var out []string
	for _, e := range h.events() {
		if !strings.HasPrefix(e.Type, "tool.") {
			continue
		}
		var d struct {
			Tool    string
			Ordinal int
			Reason  string
		}
		require.NoError(h.t, json.Unmarshal(e.Data, &d))
		out = append(out, strings.Join(strings.Fields(strings.Join([]string{e.Type, itoa(d.Ordinal), d.Tool, d.Reason}, " ")), " "))
	}
	return out
}

func (h *harness) eventData(typ string, ordinal int) map[string]any {
	h.t.Helper()
	for _, e := range h.events() {
		var d map[string]any
		require.NoError(h.t, json.Unmarshal(e.Data, &d))
		if e.Type == typ && (ordinal == 0 || d["ordinal"] == float64(ordinal)) {
			return d
		}
	}
	h.t.Fatalf("no %s event for call %d", typ, ordinal)
	return nil
}

func (h *harness) transcript() agents.Transcript {
	h.t.Helper()
	saved, err := h.st.GetAgentTranscript(context.Background(), h.tenant, h.run, "triage")
	require.NoError(h.t, err)
	var tr agents.Transcript
	require.NoError(h.t, json.Unmarshal(saved.Transcript, &tr))
	return tr
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func appError(t *testing.T, err error) *temporal.ApplicationError {
	t.Helper()
	var ae *temporal.ApplicationError
	require.True(t, errors.As(err, &ae), "not an application error: %v", err)
	return ae
}

func TestOfferIsAllowedToolsAndToolsetAndPermissions(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "Triage {{ run.id }} for {{ context.user.displayName }}.", Provider: "openai", Model: "m",
		AllowedTools: []string{"core.echo@1", "test.probe@1", "test.write@1", "workspace.notes.write@1"}})
	h.prov.turns = []provider.Reply{
		calls(call("c1", "workspace_notes_write_v1", `{"title":"t","body":1}`), // withheld: no notes.write
			call("c2", "test.probe@1", `{}`),        // allowed but not in the toolset
			call("c3", "core.http.fetch@1", `{}`),   // not an allowed tool
			call("c4", "nope", `{}`),                // no such tool
			call("c5", "core_echo_v1", `{"x":1}`),   // offered
			call("c6", "test.write@1", `{"n":"x"}`), // offered, input breaks the schema subset
		),
		final(`{"done":true}`),
	}
	job := h.job(a, "crm.write")
	job.Toolset = &graph.Toolset{Tools: []string{"core.echo@1", "test.write@1", "workspace.notes.write@1"}, Skill: "Use the tools wisely."}
	res, err := h.runtime().Run(context.Background(), job)
	require.NoError(t, err)
	require.JSONEq(t, `{"done":true}`, string(res.Output))

	first := h.prov.reqs[0]
	var offered []string
	for _, tl := range first.Tools {
		offered = append(offered, tl.Name+"="+tl.Ref)
	}
	require.Equal(t, []string{"core_echo_v1=core.echo@1", "test_write_v1=test.write@1"}, offered)
	require.Equal(t, "Triage "+h.run+" for alice.\n\nUse the tools wisely.", first.Messages[0].Content, "resolved instructions and the pinned skill")
	require.Equal(t, `{"item":"a"}`, first.Messages[1].Content)

	require.Equal(t, []string{
		"tool.denied 1 workspace.notes.write@1 TOOL_NOT_GRANTED",
		"tool.denied 2 test.probe@1 TOOL_NOT_GRANTED",
		"tool.denied 3 core.http.fetch@1 TOOL_NOT_GRANTED",
		"tool.denied 4 TOOL_UNKNOWN",
		"tool.started 5 core.echo@1",
		"tool.completed 5 core.echo@1",
		"tool.denied 6 test.write@1 TOOL_INPUT_INVALID",
	}, h.toolEvents())
	d := h.eventData(execution.EventToolDenied, 1)
	require.Equal(t, []any{"notes.write"}, d["missing"])
	require.Contains(t, d["message"], "lack notes.write")
	require.Contains(t, h.eventData(execution.EventToolDenied, 2)["message"], "toolset")
	require.Contains(t, h.eventData(execution.EventToolDenied, 3)["message"], "allowed tools")
	require.Zero(t, h.writes.Load())
	notes, err := h.st.ListNotes(context.Background(), h.tenant, 10, nil)
	require.NoError(t, err)
	require.Empty(t, notes, "nothing written without notes.write")

	// The model saw an error result for each denied call, in order.
	tr := h.transcript()
	var results []string
	for _, m := range tr.Messages {
		if m.Role == provider.RoleTool {
			results = append(results, m.ToolCallID)
		}
	}
	require.Equal(t, []string{"c1", "c2", "c3", "c4", "c5", "c6"}, results)
	require.Contains(t, tr.Messages[3].Content, "TOOL_NOT_GRANTED")
}

func TestToolDeadlineIsEnforced(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m", AllowedTools: []string{"test.slow@1"}})
	h.prov.turns = []provider.Reply{calls(call("c1", "test.slow@1", `{}`)), final(`{}`)}
	start := time.Now()
	_, err := h.runtime().Run(context.Background(), h.job(a))
	require.NoError(t, err)
	require.Less(t, time.Since(start), 3*time.Second, "the handler ignores its context; the harness does not wait for it")
	require.Equal(t, []string{"tool.started 1 test.slow@1", "tool.failed 1 test.slow@1 TOOL_TIMEOUT"}, h.toolEvents())
	require.Equal(t, 300*time.Millisecond, agents.ToolTimeout(300))
	require.Equal(t, agents.DefaultToolTimeout, agents.ToolTimeout(0))
	require.Equal(t, agents.MinToolTimeout, agents.ToolTimeout(1))
	require.Equal(t, agents.MaxToolTimeout, agents.ToolTimeout(10_000_000))
}

func TestToolOutputIsCappedAt32KiB(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m", AllowedTools: []string{"test.big@1"}})
	h.prov.turns = []provider.Reply{calls(call("c1", "test_big_v1", `{}`)), final(`{}`)}
	_, err := h.runtime().Run(context.Background(), h.job(a))
	require.NoError(t, err)
	seen := h.prov.reqs[1].Messages[3]
	require.Equal(t, provider.RoleTool, seen.Role)
	require.LessOrEqual(t, len(seen.Content), agents.MaxToolOutputBytes)
	var env struct {
		Truncated bool   `json:"truncated"`
		Bytes     int    `json:"bytes"`
		Preview   string `json:"preview"`
	}
	require.NoError(t, json.Unmarshal([]byte(seen.Content), &env))
	require.True(t, env.Truncated)
	require.Greater(t, env.Bytes, 100_000)
	require.True(t, strings.HasPrefix(env.Preview, `{"text":"éé`))
	d := h.eventData(execution.EventToolCompleted, 1)
	require.Equal(t, true, d["truncated"])
	require.Greater(t, d["outputBytes"], float64(100_000))
	require.Equal(t, true, d["outputOmitted"], "the event keeps its fields; the output itself is too large for evidence")
	require.True(t, h.transcript().Calls[0].Truncated)
}

func TestTenantComesFromTheRunNeverTheInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m",
		AllowedTools: []string{"test.probe@1", "workspace.notes.write@1"}})
	h.prov.turns = []provider.Reply{
		calls(call("c1", "test.probe@1", `{"tenantId":"evil","tenant":"evil"}`),
			call("c2", "workspace.notes.write@1", `{"title":"t","body":1,"tenantId":"evil"}`)),
		final(`{}`),
	}
	_, err := h.runtime().Run(context.Background(), h.job(a, "notes.write"))
	require.NoError(t, err)
	require.Equal(t, h.tenant, <-h.probeTenants)
	require.JSONEq(t, `{"tenant":"`+h.tenant+`"}`, h.prov.reqs[1].Messages[3].Content)
	require.Equal(t, []string{"tool.started 1 test.probe@1", "tool.completed 1 test.probe@1",
		"tool.denied 2 workspace.notes.write@1 TOOL_INPUT_INVALID"}, h.toolEvents(),
		"additionalProperties:false refuses a stray tenantId before anything runs")
	for _, tenant := range []string{h.tenant, "evil"} {
		notes, err := h.st.ListNotes(context.Background(), tenant, 10, nil)
		require.NoError(t, err)
		require.Empty(t, notes)
	}
}

func TestLedgerReplaysTheFirstResultAndFailsClosedOnConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	input := `{"n":7}`
	canon, err := graph.Canonical(json.RawMessage(input))
	require.NoError(t, err)

	// Replay: the key is bound to this input already: no second write.
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m", AllowedTools: []string{"test.write@1"}})
	key := agents.LedgerKey(h.run, "triage", 1)
	_, err = h.st.LedgerRecord(ctx, h.tenant, "test.write@1", key, graph.SHA256Hex(canon), json.RawMessage(`{"written":7,"first":true}`))
	require.NoError(t, err)
	h.prov.turns = []provider.Reply{calls(call("c1", "test_write_v1", input)), final(`{}`)}
	_, err = h.runtime().Run(ctx, h.job(a, "crm.write"))
	require.NoError(t, err)
	require.Zero(t, h.writes.Load())
	require.JSONEq(t, `{"written":7,"first":true}`, h.prov.reqs[1].Messages[3].Content)
	require.Equal(t, true, h.eventData(execution.EventToolCompleted, 1)["replayed"])
	tr := h.transcript()
	require.Equal(t, []string{key}, tr.LedgerKeys())
	saved, err := h.st.GetAgentTranscript(ctx, h.tenant, h.run, "triage")
	require.NoError(t, err)
	require.Equal(t, []string{key}, saved.LedgerKeys)

	// Conflict: the key is bound to another input: nothing runs, the node fails.
	h = newHarnessOn(t, h.st)
	a = h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m", AllowedTools: []string{"test.write@1"}})
	_, err = h.st.LedgerRecord(ctx, h.tenant, "test.write@1", agents.LedgerKey(h.run, "triage", 1), "another-input", json.RawMessage(`{}`))
	require.NoError(t, err)
	h.prov.turns = []provider.Reply{calls(call("c1", "test_write_v1", input)), final(`{}`)}
	_, err = h.runtime().Run(ctx, h.job(a, "crm.write"))
	ae := appError(t, err)
	require.Equal(t, execution.ErrIdempotencyConflict, ae.Type())
	require.True(t, ae.NonRetryable())
	require.Zero(t, h.writes.Load())
	require.Equal(t, []string{"tool.started 1 test.write@1", "tool.failed 1 test.write@1 IDEMPOTENCY_CONFLICT"}, h.toolEvents())
}

func TestResumedAttemptNeverRepeatsSettledWork(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m",
		AllowedTools: []string{"test.block@1", "test.write@1", "workspace.notes.write@1"}})
	h.prov.turns = []provider.Reply{
		calls(call("c1", "test_write_v1", `{"n":1}`), call("c2", "workspace_notes_write_v1", `{"title":"once","body":{"a":1}}`),
			call("c3", "test_block_v1", `{}`)),
		final(`{"ok":true}`),
	}
	rt := h.runtime()

	// Attempt 1 is cancelled (the worker is going away) during call 3.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := rt.Run(ctx, h.job(a, "crm.write", "notes.write"))
		done <- err
	}()
	<-h.blockStarted
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	// Attempt 2, on a fresh runtime (another worker), resumes.
	close(h.unblock)
	job := h.job(a, "crm.write", "notes.write")
	job.Attempt = 2
	res, err := h.runtime().Run(context.Background(), job)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(res.Output))

	require.Equal(t, int32(1), h.writes.Load(), "the settled write ran once")
	require.Equal(t, int32(2), h.prov.asked.Load(), "each turn was asked for once")
	notes, err := h.st.ListNotes(context.Background(), h.tenant, 10, nil)
	require.NoError(t, err)
	require.Len(t, notes, 1)
	require.Equal(t, []string{
		"tool.started 1 test.write@1", "tool.completed 1 test.write@1",
		"tool.started 2 workspace.notes.write@1", "tool.completed 2 workspace.notes.write@1",
		"tool.started 3 test.block@1",                                  // attempt 1, cut short
		"tool.started 3 test.block@1", "tool.completed 3 test.block@1", // attempt 2
	}, h.toolEvents())
	var attempts []int
	for _, e := range h.events() {
		if e.Type == execution.EventToolStarted {
			attempts = append(attempts, e.Attempt)
		}
	}
	require.Equal(t, []int{1, 1, 1, 2}, attempts)
	tr := h.transcript()
	require.Len(t, tr.Turns, 2)
	require.Equal(t, 1, tr.Calls[0].Attempt)
	require.Equal(t, 2, tr.Calls[2].Attempt)
	require.Len(t, tr.LedgerKeys(), 2, "both mutating calls keep their ledger keys")

	// Usage is totalled on the run: 2 model calls, once each.
	run, err := h.st.GetRun(context.Background(), h.tenant, h.run)
	require.NoError(t, err)
	require.JSONEq(t, `{"calls":2,"inputTokens":150,"outputTokens":15,"totalTokens":165,"costUsd":0.0015}`, string(run.Usage))
	var turns int
	for _, e := range h.events() {
		if e.Type == agents.EventAgentTurn {
			turns++
			var d struct{ Usage map[string]any }
			require.NoError(t, json.Unmarshal(e.Data, &d))
			require.Contains(t, d.Usage, "input")
		}
	}
	require.Equal(t, 2, turns)

	// A third attempt (say the activity's completion was lost) returns the
	// saved answer without asking or calling anything.
	job.Attempt = 3
	res, err = h.runtime().Run(context.Background(), job)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(res.Output))
	require.Equal(t, int32(2), h.prov.asked.Load())

	// And attempt 1, were it still alive somewhere, cannot overwrite it.
	job.Attempt = 1
	_, err = h.runtime().Run(context.Background(), job)
	require.NoError(t, err, "a finished transcript needs no save")
}

func TestFinalAnswerIsValidatedAndDecisionsRoute(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`)
	st := testinfra.NewStore(t)
	for _, tc := range []struct {
		name     string
		decision bool
		answer   string
		outcome  string
		errType  string
	}{
		{"valid", false, `{"summary":"ok"}`, "", ""},
		{"fenced", false, "```json\n{\"summary\":\"ok\"}\n```", "", ""},
		{"schema", false, `{"summary":1}`, "", agents.ErrAgentOutputInvalid},
		{"not json", false, `all good`, "", agents.ErrAgentOutputInvalid},
		{"pass", true, `{"summary":"ok","outcome":"pass"}`, "pass", ""},
		{"fail", true, `{"summary":"no","outcome":"fail"}`, "fail", ""},
		{"no outcome", true, `{"summary":"ok"}`, "", agents.ErrAgentOutputInvalid},
		{"bad outcome", true, `{"summary":"ok","outcome":"maybe"}`, "", agents.ErrAgentOutputInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarnessOn(t, st)
			a := h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m", OutputSchema: schema})
			h.prov.turns = []provider.Reply{final(tc.answer)}
			job := h.job(a)
			job.Decision = tc.decision
			res, err := h.runtime().Run(context.Background(), job)
			if tc.errType != "" {
				ae := appError(t, err)
				require.Equal(t, tc.errType, ae.Type())
				require.True(t, ae.NonRetryable())
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.outcome, res.Outcome)
			if tc.decision {
				require.Contains(t, string(h.prov.reqs[0].OutputSchema), `"outcome"`, "the provider is asked for the decision contract")
			}
		})
	}
}

func TestSimProviderRunsTheScript(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "x", AllowedTools: []string{"core.echo@1"},
		OutputSchema: json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`),
		Sim: &provider.SimScript{ToolCalls: []provider.SimToolCall{{Tool: "core.echo@1", Input: json.RawMessage(`{"a":1}`)},
			{Tool: "workspace.notes.write@1", Input: json.RawMessage(`{"title":"t","body":1}`)}}}})
	job := h.job(a, "notes.write")
	job.Decision = true
	res, err := h.runtime().Run(context.Background(), job)
	require.NoError(t, err)
	require.Equal(t, "pass", res.Outcome)
	require.JSONEq(t, `{"summary":"sample","outcome":"pass"}`, string(res.Output))
	require.Equal(t, []string{"tool.started 1 core.echo@1", "tool.completed 1 core.echo@1",
		"tool.denied 2 workspace.notes.write@1 TOOL_NOT_GRANTED"}, h.toolEvents(), "notes.write is not an allowed tool")
	require.Positive(t, res.Usage.InputTokens)
}

func TestLimitsAndPinning(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m", MaxTurns: 2, AllowedTools: []string{"core.echo@1"}})
	h.prov.turns = []provider.Reply{calls(call("c1", "core_echo_v1", `{}`)), calls(call("c2", "core_echo_v1", `{}`)), final(`{}`)}
	_, err := h.runtime().Run(context.Background(), h.job(a))
	ae := appError(t, err)
	require.Equal(t, agents.ErrAgentMaxTurns, ae.Type())
	require.True(t, ae.NonRetryable())

	// A revision that does not match its pinned hash never runs.
	h = newHarnessOn(t, h.st)
	a = h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m"})
	a.Hash = "0000"
	_, err = h.runtime().Run(context.Background(), h.job(a))
	require.Equal(t, agents.ErrAgentUnavailable, appError(t, err).Type())
	require.Zero(t, h.prov.asked.Load())

	// A provider this worker lacks is refused clearly.
	rt, err := agents.New(agents.Deps{Store: h.st, Actions: h.reg})
	require.NoError(t, err)
	a = h.agent("other", agents.Definition{Instructions: "x", Provider: "openai", Model: "m"})
	_, err = rt.Run(context.Background(), h.job(a))
	ae = appError(t, err)
	require.Equal(t, agents.ErrAgentUnavailable, ae.Type())
	require.Contains(t, ae.Message(), `provider "openai"`)

	// The agent's own timeout ends the attempt, retryably.
	h = newHarnessOn(t, h.st)
	a = h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m", TimeoutMs: 300, AllowedTools: []string{"test.block@1"}})
	h.prov.turns = []provider.Reply{calls(call("c1", "test.block@1", `{}`)), final(`{}`)}
	_, err = h.runtime().Run(context.Background(), h.job(a))
	ae = appError(t, err)
	require.Equal(t, agents.ErrAgentTimeout, ae.Type())
	require.False(t, ae.NonRetryable())
	require.Equal(t, agents.CallPending, h.transcript().Calls[0].Status, "a call cut by the agent's deadline runs again next attempt")
}
