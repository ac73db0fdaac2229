package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/client"
	"github.com/weftworks/weft/internal/testinfra"
)

var pushedDraft = regexp.MustCompile(`(?m)^pushed order-routing: draft revision (\d+)`)

// TestReplayCLILive drives `weft replay` as a subprocess against a real
// `weft dev`: five live runs of the diamond (gate qty > 2, qty 1 to 5);
// a draft moving the gate to qty > 3 exits 1 with the qty = 3 run
// path-changed in the table and in --json; a draft that changes the
// expression but not what it decides (qty >= 3) exits 0, every run the
// same. Nothing is published.
func TestReplayCLILive(t *testing.T) {
	d := startDev(t)
	d.waitReady()
	env := []string{"WEFT_URL=" + d.apiURL, "WEFT_TOKEN=" + d.token}
	dir := t.TempDir()
	// The replay waits (--wait) longer than weftCLI would: the machine may
	// be loaded.
	const within = 5 * time.Minute

	push := func(expr string) int {
		t.Helper()
		f := writeFile(t, dir, "order-routing.json", testinfra.RoutingGraph(expr))
		r := weftCLI(t, env, "push", f, "--key", "order-routing")
		require.Equal(t, 0, r.code, "push:\n%s", r)
		m := pushedDraft.FindStringSubmatch(r.stdout)
		require.NotNil(t, m, "push printed no draft revision:\n%s", r)
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		return n
	}
	push("input.qty > 2")
	r := weftCLI(t, env, "publish", "order-routing")
	require.Equal(t, 0, r.code, "publish:\n%s", r)
	require.Contains(t, r.stdout, "published order-routing revision 1", "publish:\n%s", r)
	byQty := map[int]string{}
	qtyOf := map[string]int{}
	for qty := 1; qty <= 5; qty++ {
		r := weftCLIWithin(t, within, env, "run", "order-routing", "--input", fmt.Sprintf(`{"qty": %d}`, qty), "--wait")
		require.Equal(t, 0, r.code, "live run qty %d:\n%s", qty, r)
		byQty[qty] = runIDOf(t, r)
		qtyOf[byQty[qty]] = qty
	}

	// The gate moved: the qty = 3 run takes the other branch.
	moved := push("input.qty > 3")
	r = weftCLIWithin(t, within, env, "replay", "order-routing", "--draft", strconv.Itoa(moved), "--last", "5", "--wait", "4m")
	require.Equal(t, 1, r.code, "replay of a changed gate: want exit 1\n%s", r)
	rows := replayRows(t, r)
	require.Len(t, rows, 5, "table rows:\n%s", r)
	for id, row := range rows {
		qty, ok := qtyOf[id]
		require.True(t, ok, "row of run %s, not a live run of the test:\n%s", id, r)
		if qty == 3 {
			assert.Equal(t, "path-changed", row[3], "qty 3 row %q", row)
			assert.Contains(t, row[4], "gate succeeded:pass→succeeded:fail", "qty 3 row %q", row)
			assert.Contains(t, row[4], "unrecorded single", "qty 3 row %q", row)
			continue
		}
		assert.Equal(t, []string{"succeeded", "succeeded", "same", "-"}, row[1:], "qty %d row", qty)
	}
	assert.Contains(t, r.stdout, fmt.Sprintf("5 runs through draft %d of order-routing: 4 same, 1 path-changed\n", moved), "summary:\n%s", r)
	assert.Contains(t, r.stdout, "  "+byQty[3]+" path-changed: its simulation is run ", "the changed run's simulation:\n%s", r)
	assert.Regexp(t, `(?m)^report: `+regexp.QuoteMeta(d.apiURL)+`/ui/replays/rpl_[0-9a-f-]{36}$`, r.stdout, "report link:\n%s", r)
	assert.Contains(t, r.stderr, fmt.Sprintf("1 of 5 runs would change under draft %d", moved), "stderr:\n%s", r)

	// --json: the replay document, the same exit status.
	r = weftCLIWithin(t, within, env, "replay", "order-routing", "--draft", strconv.Itoa(moved), "--last", "5", "--json", "--wait", "4m")
	require.Equal(t, 1, r.code, "replay --json of a changed gate: want exit 1\n%s", r)
	rep := replayJSON(t, r)
	assert.Equal(t, "order-routing", rep.WorkflowKey)
	assert.Equal(t, moved, rep.DraftRevision)
	assert.Equal(t, client.ReplaySummary{Same: 4, PathChanged: 1}, rep.Summary)
	require.Len(t, rep.Runs, 5)
	for _, run := range rep.Runs {
		qty, ok := qtyOf[run.RunID]
		require.True(t, ok, "run %s is not a live run of the test", run.RunID)
		assert.NotEmpty(t, run.SimulationRunID, "qty %d", qty)
		if qty != 3 {
			assert.Equal(t, client.VerdictSame, run.Verdict, "qty %d: %+v", qty, run.Diff)
			continue
		}
		assert.Equal(t, client.VerdictPathChanged, run.Verdict)
		require.NotNil(t, run.Diff)
		assert.Equal(t, []string{"single"}, run.Diff.Unrecorded)
		assert.ElementsMatch(t, []client.ReplayNodeChange{
			{NodeID: "gate", Recorded: "succeeded:pass", Simulated: "succeeded:fail"},
			{NodeID: "bulk", Recorded: "succeeded", Simulated: "skipped"},
			{NodeID: "single", Recorded: "skipped", Simulated: "succeeded"},
		}, run.Diff.Nodes)
	}

	// Another expression, the same decisions for these runs: nothing
	// changes, exit 0, in the table and in --json.
	same := push("input.qty >= 3")
	r = weftCLIWithin(t, within, env, "replay", "order-routing", "--draft", strconv.Itoa(same), "--last", "5", "--wait", "4m")
	require.Equal(t, 0, r.code, "replay of an equivalent gate: want exit 0\n%s", r)
	rows = replayRows(t, r)
	require.Len(t, rows, 5, "table rows:\n%s", r)
	for id, row := range rows {
		assert.Equal(t, []string{"succeeded", "succeeded", "same", "-"}, row[1:], "qty %d row", qtyOf[id])
	}
	assert.Contains(t, r.stdout, fmt.Sprintf("5 runs through draft %d of order-routing: 5 same\n", same), "summary:\n%s", r)
	r = weftCLIWithin(t, within, env, "replay", "order-routing", "--draft", strconv.Itoa(same), "--last", "5", "--json", "--wait", "4m")
	require.Equal(t, 0, r.code, "replay --json of an equivalent gate: want exit 0\n%s", r)
	rep = replayJSON(t, r)
	assert.Equal(t, client.ReplaySummary{Same: 5}, rep.Summary)
	require.Len(t, rep.Runs, 5)

	// Replays never publish: revision 1 is still the published one.
	req, err := http.NewRequest(http.MethodGet, d.apiURL+"/v1/workflows/order-routing", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var wf struct {
		PublishedRevision int `json:"publishedRevision"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&wf))
	assert.Equal(t, 1, wf.PublishedRevision)
}

// replayRows parses `weft replay`'s table: per run id, its columns RUN,
// RECORDED, SIMULATED, VERDICT, CHANGES.
func replayRows(t *testing.T, r cliResult) map[string][]string {
	t.Helper()
	lines := strings.Split(r.stdout, "\n")
	head := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "RUN ") {
			head = i
			break
		}
	}
	require.GreaterOrEqual(t, head, 0, "no table header:\n%s", r)
	require.Equal(t, []string{"RUN", "RECORDED", "SIMULATED", "VERDICT", "CHANGES"}, strings.Fields(lines[head]), "table header:\n%s", r)
	rows := map[string][]string{}
	for _, l := range lines[head+1:] {
		f := strings.Fields(l)
		if len(f) < 5 || !runIDPattern.MatchString("run "+f[0]+" ") {
			break // the summary line
		}
		rows[f[0]] = []string{f[0], f[1], f[2], f[3], strings.Join(f[4:], " ")}
	}
	return rows
}

// replayJSON decodes `weft replay --json`'s stdout: the replay document,
// done, and nothing else.
func replayJSON(t *testing.T, r cliResult) client.Replay {
	t.Helper()
	var rep client.Replay
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep), "--json stdout:\n%s", r)
	require.False(t, dec.More(), "--json printed more than the document:\n%s", r)
	require.Equal(t, client.ReplayDone, rep.Status)
	require.True(t, strings.HasPrefix(rep.ReplayID, "rpl_"), "replay id %q", rep.ReplayID)
	return rep
}
