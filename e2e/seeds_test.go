package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/worker"
)

// This file holds the end-to-end proofs of issue 20 (what the seeds still
// asked for): tenant skills in the agent's transcript and pinned at
// publication, and an agent node stopping at once while its provider is
// known down.

// writerGraph runs agent writer@1 with toolset ops as the default.
const writerGraph = `{
  "schemaVersion": 1,
  "tools": "ops",
  "toolsets": {"ops": {"tools": ["core.echo@1"], "skill": "TOOLSET-SKILL: echo before you answer.", "summary": "TOOLSET-SUMMARY: echo values back."}},
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "write", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "writer", "revision": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "write.in"}, {"from": "write.out", "to": "out.in"}]
}`

// addSkill creates (or revises) skill key with text and returns the revision.
func (e *env) addSkill(token, key, text string) int {
	e.t.Helper()
	res := e.do(http.MethodGet, "/v1/skills/"+key, token, nil)
	if res.Status == http.StatusNotFound {
		res = e.do(http.MethodPost, "/v1/skills", token, map[string]any{"key": key, "name": "Skill " + key, "text": text})
	} else {
		res = e.do(http.MethodPost, "/v1/skills/"+key+"/revisions", token, map[string]any{"text": text})
	}
	require.Equal(e.t, http.StatusCreated, res.Status, "skill %s: %s", key, res.Body)
	return int(res.JSON(e.t)["revision"].(map[string]any)["revision"].(float64))
}

// transcriptOf reads the saved transcript of node in run id.
func (e *env) transcriptOf(id, node string) agents.Transcript {
	e.t.Helper()
	saved, err := e.st.GetAgentTranscript(context.Background(), e.tenant, id, node)
	require.NoError(e.t, err)
	var tr agents.Transcript
	require.NoError(e.t, json.Unmarshal(saved.Transcript, &tr))
	return tr
}

func TestTenantSkillsArePinnedAndAppendedToInstructions(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	e.startWorker()

	// Two skills; the agent lists format before tone, and that order holds.
	require.Equal(t, 1, e.addSkill(e.token, "tone", "SKILL-TONE-1: answer briefly."))
	require.Equal(t, 1, e.addSkill(e.token, "format", "SKILL-FORMAT-1: answer in JSON."))
	e.addAgent("writer", `{"instructions": "INSTRUCTIONS of {{ agent.name }}.",
		"skills": [{"key": "format", "revision": 1}, {"key": "tone", "revision": 1}]}`)
	rev := e.publish("writer-flow", writerGraph)

	// The revision pins both skills with their content hashes.
	res := e.do(http.MethodGet, fmt.Sprintf("/v1/workflows/writer-flow/revisions/%d", rev), e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var detail struct {
		Checksum     string `json:"checksum"`
		Dependencies struct {
			Agents []struct {
				Skills []struct {
					Key      string `json:"key"`
					Revision int    `json:"revision"`
					Hash     string `json:"hash"`
				} `json:"skills"`
			} `json:"agents"`
		} `json:"dependencies"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &detail))
	require.Len(t, detail.Dependencies.Agents, 1)
	pins := detail.Dependencies.Agents[0].Skills
	require.Len(t, pins, 2)
	require.Equal(t, "format", pins[0].Key)
	require.Equal(t, "tone", pins[1].Key)
	require.Len(t, pins[1].Hash, 64)

	wantSystem := "INSTRUCTIONS of Agent writer.\n\nSKILL-FORMAT-1: answer in JSON.\n\nSKILL-TONE-1: answer briefly." +
		"\n\nTools: TOOLSET-SUMMARY: echo values back.\n\nTOOLSET-SKILL: echo before you answer."
	id := e.run("writer-flow", map[string]any{"q": 1})
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
	tr := e.transcriptOf(id, "write")
	require.Equal(t, []string{"format@1", "tone@1"}, tr.Skills)
	require.Equal(t, wantSystem, tr.Messages[0].Content, "instructions, skills in the agent's order, toolset summary, toolset skill")

	// A new skill revision changes nothing published: the next run of the
	// revision appends tone@1, and publishing the same draft again is the
	// same revision.
	require.Equal(t, 2, e.addSkill(e.token, "tone", "SKILL-TONE-2: ramble."))
	id2 := e.run("writer-flow", map[string]any{"q": 2})
	require.Equal(t, execution.StatusSucceeded, e.wait(id2, 60*time.Second).Status)
	require.Equal(t, wantSystem, e.transcriptOf(id2, "write").Messages[0].Content)
	w := e.do(http.MethodGet, "/v1/workflows/writer-flow", e.token, nil).JSON(t)
	res = e.do(http.MethodPost, "/v1/workflows/writer-flow/publish", e.token, map[string]any{"expectedRevision": w["draftRevision"]})
	require.Equal(t, http.StatusOK, res.Status, "nothing new to publish: %s", res.Body)
	require.Equal(t, detail.Checksum, res.JSON(t)["checksum"])

	// Archived skills: refused for new agent revisions and new
	// publications, still appended by what was published.
	res = e.do(http.MethodPost, "/v1/skills/format/archive", e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.do(http.MethodPost, "/v1/agents/writer/revisions", e.token, map[string]any{"definition": map[string]any{
		"instructions": "x", "skills": []any{map[string]any{"key": "format", "revision": 1}}}})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), `"code":"MISSING_DEPENDENCY"`)
	edited := strings.Replace(writerGraph, `"summary": "TOOLSET-SUMMARY`, `"summary": "EDITED`, 1)
	res = e.do(http.MethodPut, "/v1/workflows/writer-flow/draft", e.token, map[string]any{"expectedRevision": w["draftRevision"], "graph": json.RawMessage(edited)})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.do(http.MethodPost, "/v1/workflows/writer-flow/publish", e.token, map[string]any{"expectedRevision": res.JSON(t)["draftRevision"]})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "skill format@1, which is archived")
	id3 := e.run("writer-flow", map[string]any{"q": 3})
	require.Equal(t, execution.StatusSucceeded, e.wait(id3, 60*time.Second).Status)
	require.Equal(t, wantSystem, e.transcriptOf(id3, "write").Messages[0].Content)

	// Skills are the tenant's own: another tenant neither sees them nor
	// can list them in its agents.
	other := e.mint(e.other, "mallory", auth.AllScopes...)
	require.Equal(t, http.StatusNotFound, e.do(http.MethodGet, "/v1/skills/tone", other, nil).Status)
	require.Equal(t, http.StatusNotFound, e.do(http.MethodGet, "/v1/skills/tone/revisions/1", other, nil).Status)
	list := e.do(http.MethodGet, "/v1/skills", other, nil)
	require.Equal(t, http.StatusOK, list.Status)
	require.Empty(t, list.JSON(t)["skills"])
	res = e.do(http.MethodPost, "/v1/agents", other, map[string]any{"key": "thief", "name": "Thief", "definition": map[string]any{
		"instructions": "x", "skills": []any{map[string]any{"key": "tone", "revision": 1}}}})
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	require.Contains(t, string(res.Body), "skill tone@1 is not stored")
	// Skills need the agents scopes.
	noAgents := e.mint(e.tenant, "bob", auth.ScopeWorkflowsRead)
	require.Equal(t, http.StatusForbidden, e.do(http.MethodGet, "/v1/skills", noAgents, nil).Status)
}

// probedOpenAI is an OpenAI-compatible endpoint whose readiness probe
// (GET /v1/models) and chat completions fail with 503 while down is set;
// chat completions are counted, and otherwise answer a final JSON answer.
type probedOpenAI struct {
	down  atomic.Bool
	chats atomic.Int32
}

func (p *probedOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		if p.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"data":[]}`))
	case "/v1/chat/completions":
		p.chats.Add(1) // every model call, answered or not
		if p.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"model":"m","choices":[{"message":{"role":"assistant","content":"{\"ok\":true}"},"finish_reason":"stop"}]}`))
	default:
		http.NotFound(w, r)
	}
}

func TestAgentNodeStopsAtOnceWhileItsProviderIsDown(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	fake := &probedOpenAI{}
	fake.down.Store(true)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	cfg := e.cfg
	cfg.OpenAIBaseURL, cfg.OpenAIAPIKey, cfg.OpenAIModel = srv.URL+"/v1", "sk-e2e-probe", "m"
	cfg.ProviderProbeTTL = time.Second
	inproc.Worker(t, worker.Deps{Config: cfg, Store: e.st, Temporal: e.tc, Logger: e.log})

	e.addAgent("modeled", `{"instructions": "Answer.", "provider": "openai"}`)
	e.publish("modeled", `{"schemaVersion": 1, "nodes": [
		{"id": "in", "kind": "input", "outputs": {"out": "any"}},
		{"id": "ask", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "modeled", "revision": 1},
		 "retry": {"maxAttempts": 1}},
		{"id": "out", "kind": "output", "inputs": {"in": "any"}}],
		"edges": [{"from": "in.out", "to": "ask.in"}, {"from": "ask.out", "to": "out.in"}]}`)
	id := e.run("modeled", map[string]any{"q": 1})

	// While the probe says down, every dispatch of the attempt stops at
	// once with PROVIDER_UNAVAILABLE, re-dispatched without spending it;
	// no model call is made.
	infraRetries := func() int {
		n := 0
		for _, ev := range e.events(id) {
			if ev.Type != execution.EventNodeAttemptInfraRetry {
				continue
			}
			var d execution.EventData
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			require.Equal(t, provider.CodeUnavailable, d.Code)
			require.Equal(t, 1, d.Attempt, "an infrastructure fault spends no attempt")
			n++
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for infraRetries() < 2 {
		require.True(t, time.Now().Before(deadline), "no PROVIDER_UNAVAILABLE re-dispatch: %v", e.eventTypes(id))
		time.Sleep(100 * time.Millisecond)
	}
	require.Zero(t, fake.chats.Load(), "the provider was called while known down")
	require.Equal(t, execution.StatusRunning, e.getRun(id).Status)

	// Back up: the next probe (after the 1 s TTL) lets the same attempt run.
	fake.down.Store(false)
	v := e.wait(id, 90*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "%v", e.eventTypes(id))
	require.JSONEq(t, `{"ok":true}`, string(v.Output))
	status, attempt, _, _ := v.node(t, "ask")
	require.Equal(t, "succeeded", status)
	require.Equal(t, 1, attempt, "maxAttempts 1 held: the faults spent nothing")
	require.Positive(t, fake.chats.Load())
	e.checkChain(id)
}
