package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replayAPI is a fake of the replay routes of the API contract: POST
// /v1/workflows/{key}/replays answers start, GET /v1/replays/{id} answers
// the documents of gets in turn (the last one repeating). `weft replay`
// runs as a subprocess against it, so these tests need no database or
// Temporal; e2e/replay_test.go drives the real routes.
type replayAPI struct {
	startStatus int
	start       string
	gets        []string

	mu       sync.Mutex
	posted   []string // bodies of the POSTs
	postPath []string
	getPaths []string
}

func (f *replayAPI) serve(t *testing.T) []string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		defer f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/replays"):
			f.posted = append(f.posted, string(b))
			f.postPath = append(f.postPath, r.URL.EscapedPath())
			w.WriteHeader(f.startStatus)
			_, _ = io.WriteString(w, f.start)
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/replays/"):
			f.getPaths = append(f.getPaths, r.URL.EscapedPath())
			if len(f.gets) == 0 {
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"error":{"code":"NOT_FOUND","message":"no replay"}}`)
				return
			}
			doc := f.gets[min(len(f.getPaths), len(f.gets))-1]
			if strings.HasPrefix(doc, "503 ") {
				w.WriteHeader(http.StatusServiceUnavailable)
				doc = strings.TrimPrefix(doc, "503 ")
			}
			_, _ = io.WriteString(w, doc)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"ROUTE_NOT_FOUND","message":"no route"}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return []string{"WEFT_URL=" + srv.URL, "WEFT_TOKEN=tok"}
}

func (f *replayAPI) requests() (posted, postPaths, getPaths []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.posted...), append([]string(nil), f.postPath...), append([]string(nil), f.getPaths...)
}

const replayAccepted = `{"replayId":"rpl_1","status":"running","workflowKey":"orders","draftRevision":3,"runs":3}`

// replayGet is a GET answer for replay rpl_1 of orders draft 3 with runs.
func replayGet(status string, runs ...string) string {
	return `{"replayId":"rpl_1","workflowKey":"orders","draftRevision":3,"status":"` + status +
		`","createdAt":"2026-01-02T03:04:05Z","summary":{},"runs":[` + strings.Join(runs, ",") + `]}`
}

const (
	runSame = `{"runId":"run_a","verdict":"same","simulationRunId":"sim_a","recordedStatus":"succeeded","simulatedStatus":"succeeded","diff":{}}`
	runPath = `{"runId":"run_b","verdict":"path-changed","simulationRunId":"sim_b","recordedStatus":"succeeded","simulatedStatus":"succeeded",
	  "diff":{"nodes":[{"nodeId":"ship","recorded":"succeeded","simulated":"skipped"},{"nodeId":"hold","recorded":"skipped","simulated":"succeeded"}],"unrecorded":["hold"]}}`
	runOutput = `{"runId":"run_c","verdict":"output-changed","simulationRunId":"sim_c","recordedStatus":"succeeded","simulatedStatus":"succeeded",
	  "diff":{"output":[{"op":"replace","path":"/total","from":3,"to":4},{"op":"add","path":"/note","to":"late"}],"truncated":true}}`
	runGone    = `{"runId":"run_d","verdict":"not-replayable","reason":"RESULTS_DELETED","recordedStatus":"succeeded"}`
	runPending = `{"runId":"run_b","verdict":"","recordedStatus":"succeeded"}`
)

// rowOf returns the table row of run id as its whitespace-separated fields.
func rowOf(t *testing.T, stdout, id string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + id + `\s.*$`).FindString(stdout)
	require.NotEmpty(t, m, "no row for %s in:\n%s", id, stdout)
	return strings.Join(strings.Fields(m), " ")
}

func TestReplaySameExitsZero(t *testing.T) {
	t.Parallel()
	api := &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted,
		gets: []string{replayGet("running", runSame, runPending), replayGet("done", runSame, runGone)}}
	env := api.serve(t)
	r := weftCLI(t, env, "replay", "orders", "--draft", "3", "--last", "5", "--status", "succeeded,failed", "--status", "cancelled")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, "replay rpl_1: 3 live runs of orders through draft 3\n", "%s", r)
	assert.Regexp(t, `(?m)^RUN\s+RECORDED\s+SIMULATED\s+VERDICT\s+CHANGES$`, r.stdout, "%s", r)
	assert.Equal(t, "run_a succeeded succeeded same -", rowOf(t, r.stdout, "run_a"))
	assert.Equal(t, "run_d succeeded - not-replayable RESULTS_DELETED", rowOf(t, r.stdout, "run_d"))
	assert.Contains(t, r.stdout, "2 runs through draft 3 of orders: 1 same, 1 not-replayable\n", "%s", r)
	assert.NotContains(t, r.stdout, "weft events", "%s", r)
	assert.Contains(t, r.stderr, "replay rpl_1: 1 of 2 runs compared", "%s", r)
	assert.Regexp(t, `(?m)^report: http://127\.0\.0\.1:\d+/ui/replays/rpl_1$`, r.stdout, "%s", r)

	posted, paths, gets := api.requests()
	require.Equal(t, []string{`{"draftRevision":3,"last":5,"status":["succeeded","failed","cancelled"]}`}, posted)
	require.Equal(t, []string{"/v1/workflows/orders/replays"}, paths)
	require.Equal(t, []string{"/v1/replays/rpl_1", "/v1/replays/rpl_1"}, gets, "polled until done, then stopped")
}

func TestReplayChangedExitsOne(t *testing.T) {
	t.Parallel()
	api := &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted,
		gets: []string{replayGet("done", runSame, runPath, runOutput, runGone)}}
	env := api.serve(t)
	r := weftCLI(t, env, "replay", "orders", "--draft", "3", "--run", "run_a", "--run", "run_b")
	require.Equal(t, 1, r.code, "%s", r)
	assert.Equal(t, "run_b succeeded succeeded path-changed nodes ship succeeded→skipped, hold skipped→succeeded; unrecorded hold",
		rowOf(t, r.stdout, "run_b"))
	assert.Equal(t, `run_c succeeded succeeded output-changed output /total 3→4, /note +"late" (cut: GET /v1/runs/{id} of both runs has the outputs whole)`,
		rowOf(t, r.stdout, "run_c"))
	assert.Contains(t, r.stdout, "4 runs through draft 3 of orders: 1 same, 1 output-changed, 1 path-changed, 1 not-replayable\n", "%s", r)
	assert.Contains(t, r.stdout, "run_b path-changed: its simulation is run sim_b (weft events sim_b)", "%s", r)
	assert.Contains(t, r.stdout, "run_c output-changed: its simulation is run sim_c (weft events sim_c)", "%s", r)
	assert.Contains(t, r.stderr, "weft: replay rpl_1: 2 of 4 runs would change under draft 3", "%s", r)

	posted, _, _ := api.requests()
	require.Equal(t, []string{`{"draftRevision":3,"runs":["run_a","run_b"]}`}, posted, "no last: the runs are named")
}

func TestReplayNowFailsAndNowSucceedsAreChanges(t *testing.T) {
	t.Parallel()
	for _, verdict := range []string{"now-fails", "now-succeeds"} {
		api := &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted,
			gets: []string{replayGet("done", runSame, `{"runId":"run_e","verdict":"`+verdict+`","simulationRunId":"sim_e","recordedStatus":"x","simulatedStatus":"y",
			  "diff":{"unrecorded":["u1","u2","u3","u4","u5"]}}`)}}
		r := weftCLI(t, api.serve(t), "replay", "orders", "--draft", "3")
		require.Equal(t, 1, r.code, "%s", r)
		assert.Equal(t, "run_e x y "+verdict+" unrecorded u1, u2, u3 (+2 more)", rowOf(t, r.stdout, "run_e"))
		posted, _, _ := api.requests()
		require.Equal(t, []string{`{"draftRevision":3}`}, posted, "neither --last nor --run: the API's default")
	}
}

func TestReplayNotReplayableOnlyExitsZero(t *testing.T) {
	t.Parallel()
	api := &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted, gets: []string{replayGet("done", runGone)}}
	r := weftCLI(t, api.serve(t), "replay", "orders", "--draft", "3")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, "1 run through draft 3 of orders: 1 not-replayable (nothing could be replayed)\n", "%s", r)

	api = &replayAPI{startStatus: http.StatusAccepted, start: `{"replayId":"rpl_1","status":"done","workflowKey":"orders","draftRevision":3,"runs":0}`,
		gets: []string{replayGet("done")}}
	r = weftCLI(t, api.serve(t), "replay", "orders", "--draft", "3")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stdout, "no live runs of orders to replay\n", "%s", r)
}

func TestReplayJSONPrintsTheDocument(t *testing.T) {
	t.Parallel()
	api := &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted, gets: []string{replayGet("done", runSame, runOutput)}}
	r := weftCLI(t, api.serve(t), "replay", "orders", "--draft", "3", "--json")
	require.Equal(t, 1, r.code, "a change fails with --json too:\n%s", r)
	var doc struct {
		ReplayID string `json:"replayId"`
		Status   string `json:"status"`
		Runs     []struct {
			RunID, Verdict, SimulationRunID string
			Diff                            struct {
				Output []struct {
					Op, Path string
					From, To json.RawMessage
				}
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), "stdout is one JSON document:\n%s", r)
	require.Equal(t, "rpl_1", doc.ReplayID)
	require.Equal(t, "done", doc.Status)
	require.Len(t, doc.Runs, 2)
	require.Equal(t, "output-changed", doc.Runs[1].Verdict)
	require.Equal(t, "sim_c", doc.Runs[1].SimulationRunID)
	require.JSONEq(t, `3`, string(doc.Runs[1].Diff.Output[0].From))
	require.JSONEq(t, `"late"`, string(doc.Runs[1].Diff.Output[1].To))

	api = &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted, gets: []string{replayGet("done", runSame)}}
	r = weftCLI(t, api.serve(t), "replay", "orders", "--draft", "3", "--json")
	require.Equal(t, 0, r.code, "%s", r)
	require.True(t, json.Valid([]byte(r.stdout)), "%s", r)
}

func TestReplayRefusalsAndUsageErrors(t *testing.T) {
	t.Parallel()
	// The API refuses: exit 1 with its code; graph issues as lines.
	api := &replayAPI{startStatus: http.StatusUnprocessableEntity,
		start: `{"error":{"code":"INVALID_GRAPH","message":"draft revision 4 has 1 issue(s)","details":{"issues":[{"code":"DANGLING_EDGE","path":"/edges/0","message":"no node x"}]}}}`}
	r := weftCLI(t, api.serve(t), "replay", "orders", "--draft", "4")
	require.Equal(t, 1, r.code, "%s", r)
	assert.Contains(t, r.stderr, "DANGLING_EDGE /edges/0 no node x", "%s", r)
	assert.Contains(t, r.stderr, "weft: replay orders draft 4: INVALID_GRAPH", "%s", r)
	_, _, gets := api.requests()
	assert.Empty(t, gets, "nothing to wait for")

	api = &replayAPI{startStatus: http.StatusUnprocessableEntity, start: `{"error":{"code":"REPLAY_TOO_MANY_RUNS","message":"at most 50 runs per replay","details":{"limit":50}}}`}
	r = weftCLI(t, api.serve(t), "replay", "orders", "--draft", "4", "--last", "80")
	require.Equal(t, 1, r.code, "%s", r)
	assert.Contains(t, r.stderr, "REPLAY_TOO_MANY_RUNS", "%s", r)
	assert.Regexp(t, `"limit": 50`, r.stderr, "%s", r)

	// A GET answered with something else than a replay ends the wait.
	api = &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted, gets: []string{"not json"}}
	r = weftCLI(t, api.serve(t), "replay", "orders", "--draft", "3")
	require.Equal(t, 1, r.code, "%s", r)
	assert.Contains(t, r.stderr, "unexpected answer", "%s", r)

	// Usage errors: refused before any request.
	api = &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted, gets: []string{replayGet("done", runSame)}}
	env := api.serve(t)
	dir := t.TempDir()
	badFixtures := writeFile(t, dir, "bad.json", `{"ship": {"output": 1, "outcome": "pass"}}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--draft", "3", "--last", "5", "--run", "run_a"}, "--last and --run exclude each other"},
		{[]string{"--draft", "3", "--run", "run_a", "--status", "failed"}, "--status filters the runs --last chooses"},
		{[]string{"--last", "5"}, `required flag(s) "draft" not set`},
		{[]string{"--draft", "0"}, "--draft must be a draft revision"},
		{[]string{"--draft", "3", "--last", "0"}, "--last must be 1 or more"},
		{[]string{"--draft", "3", "--wait", "0s"}, "--wait must be positive"},
		{[]string{"--draft", "3", "--fixtures", badFixtures}, "are not simulation fixtures"},
		{[]string{"--draft", "3", "--fixtures", dir + "/missing.json"}, "no such file"},
	} {
		r := weftCLI(t, env, append([]string{"replay", "orders"}, c.args...)...)
		assert.Equal(t, 1, r.code, "%s", r)
		assert.Contains(t, r.stderr, c.want, "%s", r)
	}
	posted, _, _ := api.requests()
	assert.Empty(t, posted, "a usage error sends nothing")
}

func TestReplaySendsTheFixturesFile(t *testing.T) {
	t.Parallel()
	api := &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted, gets: []string{replayGet("done", runSame)}}
	fx := writeFile(t, t.TempDir(), "fixtures.json", `{"hold": {"output": {"held": true}, "durationMs": 5}}`)
	r := weftCLI(t, api.serve(t), "replay", "orders", "--draft", "3", "--fixtures", fx)
	require.Equal(t, 0, r.code, "%s", r)
	posted, _, _ := api.requests()
	require.Len(t, posted, 1)
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(posted[0]), &body))
	require.JSONEq(t, `{"hold": {"output": {"held": true}, "durationMs": 5}}`, string(body["fixtures"]))
}

func TestReplayWaitIsBounded(t *testing.T) {
	t.Parallel()
	// Still running after --wait: exit 1, naming where to look later.
	api := &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted, gets: []string{replayGet("running", runSame, runPending)}}
	r := weftCLI(t, api.serve(t), "replay", "orders", "--draft", "3", "--wait", "1s")
	require.Equal(t, 1, r.code, "%s", r)
	assert.Contains(t, r.stderr, "replay rpl_1 is not done after --wait 1s (1 of 2 runs compared); it continues on the server: GET /v1/replays/rpl_1", "%s", r)

	// A transient 503 is asked again; the replay then answers.
	api = &replayAPI{startStatus: http.StatusAccepted, start: replayAccepted,
		gets: []string{`503 {"error":{"code":"STORE_UNAVAILABLE","message":"retry"}}`, replayGet("done", runSame)}}
	r = weftCLI(t, api.serve(t), "replay", "orders", "--draft", "3")
	require.Equal(t, 0, r.code, "%s", r)
	assert.Contains(t, r.stderr, "STORE_UNAVAILABLE", "%s", r)
	assert.Contains(t, r.stderr, "retrying", "%s", r)
	_, _, gets := api.requests()
	assert.Len(t, gets, 2)
}
