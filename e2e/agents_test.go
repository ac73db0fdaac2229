package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/worker"
	"github.com/weftworks/weft/workflows"

	sdkworker "go.temporal.io/sdk/worker"
)

// newAgentEnv is newEnv with the API's own defaults (the store resolves
// agent revisions and published actions at publication, and agent.name)
// and the built-in contracts published, as a worker publishes them at start.
func newAgentEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.srv.Close()
	e.srv = httptest.NewServer(inproc.API(t, api.Deps{Config: e.cfg, Store: e.st, Keys: e.keys, Temporal: e.tc,
		Starter: e.starter, Logger: e.log}))
	t.Cleanup(e.srv.Close)
	reg, err := catalog.NewRegistry(catalog.Builtins(catalog.BuiltinDeps{Notes: e.st})...)
	require.NoError(t, err)
	require.NoError(t, reg.Publish(context.Background(), e.st))
	return e
}

// addAgent creates agent key (named "Agent <key>") with definition through the API.
func (e *env) addAgent(key, definition string) {
	e.t.Helper()
	res := e.do(http.MethodPost, "/v1/agents", e.token, map[string]any{"key": key, "name": "Agent " + key, "definition": json.RawMessage(definition)})
	require.Equal(e.t, http.StatusCreated, res.Status, "create agent %s: %s", key, res.Body)
}

// runAs enqueues key with token and returns the run id.
func (e *env) runAs(token, key string, input any) string {
	e.t.Helper()
	res := e.do(http.MethodPost, "/v1/workflows/"+key+"/runs", token, map[string]any{"input": input, "idempotencyKey": fmt.Sprint(time.Now().UnixNano())})
	require.Equal(e.t, http.StatusAccepted, res.Status, "enqueue: %s", res.Body)
	return res.JSON(e.t)["runId"].(string)
}

// toolEvents renders the run's tool.* events as "type node ordinal tool [reason]".
func (e *env) toolEvents(id string) []string {
	e.t.Helper()
	var out []string
	for _, ev := range e.events(id) {
		if !strings.HasPrefix(ev.Type, "tool.") {
			continue
		}
		var d struct {
			Tool    string
			Ordinal int
			Reason  string
		}
		require.NoError(e.t, json.Unmarshal(ev.Data, &d))
		out = append(out, strings.Join(strings.Fields(fmt.Sprintf("%s %s %d %s %s", ev.Type, ev.NodeID, d.Ordinal, d.Tool, d.Reason)), " "))
	}
	return out
}

func (e *env) notesOf(runID string) int {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/notes?limit=200", e.token, nil)
	require.Equal(e.t, http.StatusOK, res.Status, "%s", res.Body)
	n := 0
	for _, v := range res.JSON(e.t)["notes"].([]any) {
		if v.(map[string]any)["runId"] == runID {
			n++
		}
	}
	return n
}

// noteTakerAgent calls core.echo and writes a note, then answers a summary.
const noteTakerAgent = `{
  "instructions": "Triage the ticket for {{ context.user.displayName }}. You are {{ agent.name }}.",
  "outputSchema": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}},
  "allowedTools": ["core.echo@1", "workspace.notes.write@1"],
  "maxTurns": 4, "timeoutMs": 20000,
  "sim": {
    "toolCalls": [
      {"tool": "core.echo@1", "input": {"look": "up", "tenantId": "someone-else"}},
      {"tool": "workspace.notes.write@1", "input": {"title": "Triage note", "body": {"by": "agent"}}}
    ],
    "output": {"summary": "looks fine"}
  }
}`

const judgeAgent = `{"instructions": "Decide whether the summary is acceptable.", "sim": {"outcome": "pass"}}`

// pipelineGraph: input → agent → agent-decision → action → output.
const pipelineGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "triage", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "triage", "revision": 1}},
    {"id": "judge", "kind": "agent-decision", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"}, "agent": {"key": "judge", "revision": 1}},
    {"id": "ship", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}},
    {"id": "rejected", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "triage.in"}, {"from": "triage.out", "to": "judge.in"},
    {"from": "judge.pass", "to": "ship.in"}, {"from": "ship.out", "to": "out.in"}, {"from": "judge.fail", "to": "rejected.in"}
  ]
}`

func TestLiveAgentPipeline(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	e.addAgent("triage", noteTakerAgent)
	e.addAgent("judge", judgeAgent)
	e.publish("pipeline", pipelineGraph)
	// Archiving hides an agent from new publications only: the published
	// revision keeps running.
	require.Equal(t, http.StatusOK, e.do(http.MethodPost, "/v1/agents/judge/archive", e.token, nil).Status)
	e.startWorker()

	id := e.run("pipeline", map[string]any{"ticket": 42})
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
	require.JSONEq(t, `{"summary":"looks fine"}`, string(v.Output))
	_, _, port, _ := v.node(t, "judge")
	require.Equal(t, "pass", port)
	status, _, _, reason := v.node(t, "rejected")
	require.Equal(t, execution.NodeSkipped, status, reason)
	e.checkChain(id)

	require.Equal(t, []string{
		"tool.started triage 1 core.echo@1", "tool.completed triage 1 core.echo@1",
		"tool.started triage 2 workspace.notes.write@1", "tool.completed triage 2 workspace.notes.write@1",
	}, e.toolEvents(id))
	require.Equal(t, 1, e.notesOf(id), "exactly one note, written by the agent")

	// Usage per model call (agent.turn) and totalled on the run.
	var turns []string
	var tokens float64
	for _, ev := range e.events(id) {
		if ev.Type != agents.EventAgentTurn {
			continue
		}
		var d struct {
			Turn  int
			Usage struct{ Input, Output float64 }
		}
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		turns = append(turns, fmt.Sprintf("%s/%d", ev.NodeID, d.Turn))
		tokens += d.Usage.Input + d.Usage.Output
	}
	require.Equal(t, []string{"triage/1", "triage/2", "judge/1"}, turns)
	require.Equal(t, float64(3), v.Usage["calls"])
	require.Equal(t, tokens, v.Usage["totalTokens"])
	require.Positive(t, tokens)

	// The transcript resolved the instructions for this run; the stored revision keeps them raw.
	saved, err := e.st.GetAgentTranscript(context.Background(), e.tenant, id, "triage")
	require.NoError(t, err)
	var tr agents.Transcript
	require.NoError(t, json.Unmarshal(saved.Transcript, &tr))
	require.Equal(t, "Triage the ticket for alice. You are Agent triage.", tr.Messages[0].Content)
	require.Equal(t, `{"ticket":42}`, tr.Messages[1].Content)
	require.Contains(t, tr.Messages[3].Content, `"tenantId":"someone-else"`, "echo returns its input as data ...")
	res := e.do(http.MethodGet, "/v1/notes", e.token, nil)
	require.Len(t, res.JSON(t)["notes"], 1, "... while the note is the run's tenant's")
	res = e.do(http.MethodGet, "/v1/notes", e.mint(e.other, "x", auth.AllScopes...), nil)
	require.Empty(t, res.JSON(t)["notes"])

	// Publishing anew refuses the archived judge.
	res = e.do(http.MethodPut, "/v1/workflows/pipeline/draft", e.token, map[string]any{"expectedRevision": 1, "graph": json.RawMessage(pipelineGraph)})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.do(http.MethodPost, "/v1/workflows/pipeline/publish", e.token, map[string]any{"expectedRevision": 2})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "MISSING_DEPENDENCY")
	require.Contains(t, string(res.Body), "archived")
}

// A live agent-decision that fails routes its input to the fail port: the
// pass branch is skipped and the fail branch's output settles the run.
func TestLiveAgentDecisionFailTakesTheFailPort(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	e.addAgent("triage", `{"instructions": "Summarise.", "sim": {"output": {"summary": "too vague"}}}`)
	e.addAgent("judge", `{"instructions": "Decide whether the summary is acceptable.", "sim": {"outcome": "fail"}}`)
	e.publish("pipeline", pipelineGraph)
	e.startWorker()

	id := e.run("pipeline", map[string]any{"ticket": 7})
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
	require.JSONEq(t, `{"summary":"too vague"}`, string(v.Output), "the decision carries its input to the fail port")
	status, _, port, _ := v.node(t, "judge")
	require.Equal(t, execution.NodeSucceeded, status)
	require.Equal(t, "fail", port)
	status, _, _, _ = v.node(t, "ship")
	require.Equal(t, execution.NodeSkipped, status)
	status, _, _, _ = v.node(t, "rejected")
	require.Equal(t, execution.NodeSucceeded, status)
	e.checkChain(id)
}

func TestAgentNoteToolNeedsNotesWrite(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	e.addAgent("triage", noteTakerAgent)
	e.publish("solo", `{"schemaVersion": 1, "nodes": [
		{"id": "in", "kind": "input", "outputs": {"out": "any"}},
		{"id": "triage", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "triage", "revision": 1}},
		{"id": "out", "kind": "output", "inputs": {"in": "any"}}],
		"edges": [{"from": "in.out", "to": "triage.in"}, {"from": "triage.out", "to": "out.in"}]}`)
	e.startWorker()

	var scopes []string
	for _, s := range auth.AllScopes {
		if s != auth.ScopeNotesWrite {
			scopes = append(scopes, s)
		}
	}
	id := e.runAs(e.mint(e.tenant, "bob", scopes...), "solo", map[string]any{"ticket": 7})
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "a withheld tool is denied, the agent goes on: %v", e.eventTypes(id))
	require.Equal(t, []string{
		"tool.started triage 1 core.echo@1", "tool.completed triage 1 core.echo@1",
		"tool.denied triage 2 workspace.notes.write@1 TOOL_NOT_GRANTED",
	}, e.toolEvents(id))
	for _, ev := range e.events(id) {
		if ev.Type == execution.EventToolDenied {
			require.Contains(t, string(ev.Data), `"missing":["notes.write"]`)
		}
	}
	require.Zero(t, e.notesOf(id), "nothing is written")
	e.checkChain(id)
}

const openAIKey = "sk-e2e-NEVER-LEAK-4f9c2b7d1e"

// fakeOpenAI speaks the chat-completions protocol: turn 1 asks for
// core.echo, the next request is rate limited once (Retry-After 0.1 s), then
// the final answer.
type fakeOpenAI struct {
	calls   atomic.Int32
	mu      sync.Mutex
	authOK  bool
	request []byte
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.authOK = r.Header.Get("Authorization") == "Bearer "+openAIKey
	f.request = body
	f.mu.Unlock()
	usage := `"usage":{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200}`
	switch {
	case n == 1:
		_, _ = fmt.Fprintf(w, `{"model":"gpt-e2e","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_a","type":"function","function":{"name":"core_echo_v1","arguments":"{\"q\":1}"}}]},"finish_reason":"tool_calls"}],%s}`, usage)
	case n == 2:
		w.Header().Set("Retry-After", "0.1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"rate limited for key `+openAIKey+`"}}`)
	default:
		_, _ = fmt.Fprintf(w, `{"model":"gpt-e2e","choices":[{"message":{"role":"assistant","content":"{\"summary\":\"from the model\"}"},"finish_reason":"stop"}],%s}`, usage)
	}
}

func TestOpenAIProviderEndToEndNeverRecordsTheKey(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	var logs syncBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fake := &fakeOpenAI{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)

	cfg := e.cfg
	cfg.OpenAIBaseURL, cfg.OpenAIAPIKey, cfg.OpenAIModel, cfg.OpenAIPrices = srv.URL+"/v1", openAIKey, "gpt-e2e", "gpt-e2e=2,8"
	providers, err := agents.ProvidersFromConfig(cfg)
	require.NoError(t, err)
	reg, err := catalog.NewRegistry(catalog.Builtins(catalog.BuiltinDeps{Notes: e.st})...)
	require.NoError(t, err)
	rt, err := agents.New(agents.Deps{Store: e.st, Actions: reg, Providers: providers, Logger: logger})
	require.NoError(t, err)
	w := sdkworker.New(e.tc, e.queue, worker.Options(e.cfg, logger))
	workflows.Register(w)
	require.NoError(t, activities.Register(w, activities.Deps{Store: e.st, Actions: reg, Logger: logger, Agents: rt, Variables: e.vars}))
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	logger.Info("worker configured", "config", fmt.Sprintf("%v", providers))

	e.addAgent("modeled", `{"instructions": "Summarise.", "provider": "openai", "allowedTools": ["core.echo@1"],
		"outputSchema": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}}}`)
	e.publish("modeled", `{"schemaVersion": 1, "nodes": [
		{"id": "in", "kind": "input", "outputs": {"out": "any"}},
		{"id": "ask", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "modeled", "revision": 1}},
		{"id": "out", "kind": "output", "inputs": {"in": "any"}}],
		"edges": [{"from": "in.out", "to": "ask.in"}, {"from": "ask.out", "to": "out.in"}]}`)
	id := e.run("modeled", map[string]any{"text": "hello"})
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
	require.JSONEq(t, `{"summary":"from the model"}`, string(v.Output))
	require.Equal(t, int32(3), fake.calls.Load(), "two turns, one of them rate limited once")
	fake.mu.Lock()
	require.True(t, fake.authOK, "the key was sent to the endpoint")
	require.Contains(t, string(fake.request), `"role":"tool"`)
	fake.mu.Unlock()
	require.Equal(t, []string{"tool.started ask 1 core.echo@1", "tool.completed ask 1 core.echo@1"}, e.toolEvents(id))
	require.Equal(t, float64(2), v.Usage["calls"])
	require.Equal(t, float64(2400), v.Usage["totalTokens"])
	require.InDelta(t, (2000*2+400*8)/1e6, v.Usage["costUsd"], 1e-12)

	// The key appears nowhere weft records: logs, events, the transcript,
	// the run row, or the Temporal history.
	require.NotContains(t, logs.String(), openAIKey)
	for _, ev := range e.events(id) {
		require.NotContains(t, string(ev.Data), openAIKey)
	}
	var rows string
	require.NoError(t, e.st.Pool.QueryRow(context.Background(), `SELECT
		(SELECT string_agg(t::text, '') FROM agent_transcripts t) || (SELECT string_agg(r::text, '') FROM runs r) ||
		(SELECT string_agg(e::text, '') FROM run_events e)`).Scan(&rows))
	require.Contains(t, rows, "from the model")
	require.NotContains(t, rows, openAIKey)
	it := e.tc.GetWorkflowHistory(context.Background(), v.Temporal.WorkflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	payloads := 0
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		text, err := protojson.Marshal(ev)
		require.NoError(t, err)
		require.NotContains(t, string(text), openAIKey)
		walkPayloads(ev.ProtoReflect(), func(p *commonpb.Payload) {
			payloads++
			require.False(t, bytes.Contains(p.GetData(), []byte(openAIKey)), "a Temporal payload holds the key")
		})
	}
	require.Positive(t, payloads)
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testinfra.SyncBuffer

func TestWorkerRefusesToStartWithAChangedContract(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	contract := func(timeoutMs int) catalog.Action {
		return catalog.Action{
			Contract: graph.ActionContract{ID: "crm.lookup", Version: 1, Risk: graph.RiskRead, InputSchema: json.RawMessage(`{}`),
				OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{}, TimeoutMs: timeoutMs, Idempotency: catalog.IdempotencyNone},
			Handler: func(context.Context, catalog.Call) (json.RawMessage, error) { return json.RawMessage(`{}`), nil },
		}
	}
	serve := func(ctx context.Context, a catalog.Action) error {
		deps, err := inproc.WorkerDeps(worker.Deps{Config: e.cfg, Store: e.st, Temporal: e.tc, Logger: e.log, Actions: []catalog.Action{a}})
		if err != nil {
			return err
		}
		return worker.Serve(ctx, deps)
	}
	// The first worker publishes crm.lookup@1 and serves until stopped
	// (however long starting takes on a loaded machine).
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, contract(1000)) }()
	require.Eventually(t, func() bool {
		return strings.Contains(string(e.do(http.MethodGet, "/v1/actions", e.token, nil).Body), `"ref":"crm.lookup@1"`)
	}, 30*time.Second, 50*time.Millisecond, "the first worker never published crm.lookup@1")
	stop()
	require.NoError(t, <-served)
	// A worker whose crm.lookup@1 differs refuses to start, at once (a
	// worker that did start would serve until this deadline).
	ctx, stop = context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	start := time.Now()
	err := serve(ctx, contract(2000))
	require.Error(t, err)
	// "At once" means no retry loop: seconds would mean it waited.
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, store.CodeContractChanged, failure.CodeOf(err))
	require.Contains(t, err.Error(), "register the changed contract as version 2")
}
