package canvas_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/internal/testinfra"
)

// replayDoc is the part of GET /v1/replays/{id} the test reads.
type replayDoc struct {
	Status string `json:"status"`
	Runs   []struct {
		RunID           string `json:"runId"`
		Verdict         string `json:"verdict"`
		SimulationRunID string `json:"simulationRunId"`
	} `json:"runs"`
}

// waitReplay polls GET /v1/replays/{id} until the replay is done.
func (w *world) waitReplay(t *testing.T, id string) replayDoc {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		res := w.do(t, http.MethodGet, "/v1/replays/"+id, nil)
		require.Equal(t, http.StatusOK, res.Status, "get replay %s: %d %s", id, res.Status, res.Body)
		var doc replayDoc
		require.NoError(t, json.Unmarshal(res.Body, &doc), "%s", res.Body)
		if doc.Status == "done" {
			return doc
		}
		require.False(t, time.Now().After(deadline), "replay %s is %s after 3 minutes: %s", id, doc.Status, res.Body)
		time.Sleep(200 * time.Millisecond)
	}
}

// TestReplayReport: a diamond published with the gate qty > 2 runs live
// with qty 1 to 4; a draft moves the gate to qty > 3; the replay started
// through the API shows on /ui/replays/{id} exactly the qty = 3 run
// path-changed, with single unrecorded, the other three the same; its
// simulation link opens that simulation's run page (which links back), and
// the workflow's page lists the replay with its outcome.
func TestReplayReport(t *testing.T) {
	w := env(t)
	const key = "order-routing"
	w.publish(t, key, testinfra.RoutingGraph("input.qty > 2"))
	byQty := map[int]string{}
	for qty := 1; qty <= 4; qty++ {
		byQty[qty] = w.run(t, key, map[string]any{"qty": qty})
	}
	for qty := 1; qty <= 4; qty++ {
		w.waitRunStatus(t, byQty[qty], "succeeded")
	}

	res := w.do(t, http.MethodPut, "/v1/workflows/"+key+"/draft", map[string]any{"expectedRevision": 1, "graph": json.RawMessage(testinfra.RoutingGraph("input.qty > 3"))})
	require.Equal(t, http.StatusOK, res.Status, "save the draft: %d %s", res.Status, res.Body)
	draft := int(res.JSON(t)["draftRevision"].(float64))
	res = w.do(t, http.MethodPost, "/v1/workflows/"+key+"/replays", map[string]any{"draftRevision": draft, "last": 4})
	require.Equal(t, http.StatusAccepted, res.Status, "start the replay: %d %s", res.Status, res.Body)
	id := res.JSON(t)["replayId"].(string)

	ctx := w.tab(t)
	logPageErrors(t, ctx)
	w.open(t, ctx, "/ui/replays/"+id, w.devToken)
	waitFor(t, ctx, "the report", `!!document.querySelector('[data-testid=replay-page]')`)
	// The API's verdicts, to find the simulation of the qty = 3 run; the
	// page reads a running replay again every 2 s until it is done.
	doc := w.waitReplay(t, id)
	waitFor(t, ctx, "the replay done", `document.querySelector('[data-testid=replay-page]')?.dataset.replayStatus === 'done'`)
	var sources []string
	sims := map[string]string{}
	for _, r := range doc.Runs {
		sources = append(sources, r.RunID)
		sims[r.RunID] = r.SimulationRunID
	}
	want := []string{byQty[1], byQty[2], byQty[3], byQty[4]}
	sort.Strings(sources)
	sort.Strings(want)
	require.Equal(t, want, sources, "the replay chose other runs than the four live ones")
	changedSim := sims[byQty[3]]
	require.NotEmpty(t, changedSim, "the qty = 3 run has no simulation: %+v", doc)

	// One row per run: the qty = 3 one path-changed with its unrecorded
	// branch, the rest the same with nothing listed.
	type row struct {
		RunID, Verdict, Chip, Changes, SimHref string
	}
	rows := eval[[]row](t, ctx, `[...document.querySelectorAll('[data-testid=replay-runs] tbody tr')].map(tr => ({
		RunID: tr.dataset.runId, Verdict: tr.dataset.verdict,
		Chip: tr.querySelector('[data-testid=verdict]').textContent,
		Changes: tr.querySelector('td.changes').textContent,
		SimHref: tr.querySelector('td:last-child a')?.getAttribute('href') ?? ''}))`)
	require.Len(t, rows, 4, "report rows: %+v", rows)
	for _, r := range rows {
		assert.Equal(t, "/ui/runs/"+sims[r.RunID], r.SimHref, "run %s: the simulation link", r.RunID)
		if r.RunID == byQty[3] {
			assert.Equal(t, "path-changed", r.Verdict, "the qty = 3 run: %+v", r)
			assert.Equal(t, "path-changed", r.Chip, "the qty = 3 run's chip: %+v", r)
			assert.Contains(t, r.Changes, "gate succeeded:pass→succeeded:fail", "the qty = 3 run's changes: %+v", r)
			assert.Contains(t, r.Changes, "unrecorded single", "the qty = 3 run's changes: %+v", r)
			continue
		}
		assert.Equal(t, "same", r.Verdict, "run %s: %+v", r.RunID, r)
		assert.Equal(t, "same", r.Chip, "run %s: %+v", r.RunID, r)
		assert.Equal(t, "—", r.Changes, "run %s lists changes: %+v", r.RunID, r)
	}
	assert.Equal(t, "1 would change", eval[string](t, ctx, `document.querySelector('[data-testid=replay-outcome]').textContent`))
	assert.Equal(t, "4 live runs: 3 same, 1 path-changed", eval[string](t, ctx, `document.querySelector('[data-testid=replay-summary]').textContent`))
	screenshot(t, ctx, "replay-report")

	// The simulation link opens the run view of the draft's simulation,
	// which took the other branch and links back to the report.
	click(t, ctx, fmt.Sprintf(`[data-testid=replay-runs] tr[data-run-id=%q] td:last-child a`, byQty[3]))
	waitFor(t, ctx, "the simulation's run page", fmt.Sprintf(`location.pathname === '/ui/runs/%s' && !!document.querySelector('[data-testid=simulation-badge]') &&
		document.querySelector('[data-testid=run-page]')?.dataset.runStatus === 'succeeded' && %s && %s && %s`,
		changedSim, nodeStatus("gate", "succeeded"), nodeStatus("single", "succeeded"), nodeStatus("bulk", "skipped")))
	waitFor(t, ctx, "the link back to the report", fmt.Sprintf(`!!document.querySelector('a[href="/ui/replays/%s"]')`, id))

	// The workflow's page lists the replay with its outcome.
	w.open(t, ctx, "/ui/workflows/"+key, w.devToken)
	waitFor(t, ctx, "the replay on the workflow's page", fmt.Sprintf(`[...document.querySelectorAll('[data-testid=workflow-replays] tbody tr')].some(tr =>
		!!tr.querySelector('a[href="/ui/replays/%s"]') && tr.textContent.includes('r%d') && tr.textContent.includes('1 would change'))`, id, draft))

	// The draft was replayed, never published.
	wf := w.do(t, http.MethodGet, "/v1/workflows/"+key, nil).JSON(t)
	assert.EqualValues(t, 1, wf["publishedRevision"], "published revision after the replay: %v", wf["publishedRevision"])
}
