package canvas_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/internal/testinfra"
)

// diamondGraph: a gate sends the input to one of two branches, a merge
// joins them: with big=false the `big` branch is a dead path.
const diamondGraph = `{
  "schemaVersion": 1,
  "schemas": {"Item": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}, "big": {"type": "boolean"}}}},
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "Item"}},
    {"id": "check", "kind": "gate", "inputs": {"in": "Item"}, "outputs": {"pass": "Item", "fail": "Item"},
     "language": "cel/v1", "expression": "input.big == true"},
    {"id": "big", "kind": "action", "inputs": {"in": "Item"}, "outputs": {"out": "any"},
     "action": {"id": "core.echo", "version": 1}, "retry": {"maxAttempts": 3, "initialIntervalMs": 500, "backoff": 2.0}, "timeoutMs": 30000},
    {"id": "small", "kind": "action", "inputs": {"in": "Item"}, "outputs": {"out": "any"},
     "action": {"id": "core.echo", "version": 1},
     "mapping": {"id": {"pointer": "/in/id"}, "note": {"template": "small {{ item.id }}", "bindings": {"item.id": "/in/id"}}}},
    {"id": "join", "kind": "merge", "inputs": {"big": "any", "small": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "check.in"},
    {"from": "check.pass", "to": "big.in"}, {"from": "check.fail", "to": "small.in"},
    {"from": "big.out", "to": "join.big"}, {"from": "small.out", "to": "join.small"},
    {"from": "join.out", "to": "out.in"}
  ]
}`

// napGraph sleeps for the input's ms (core.sleep@1 heartbeats and honours
// cancellation).
const napGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "nap", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"},
     "action": {"id": "core.sleep", "version": 1}, "mapping": {"ms": {"pointer": "/in/ms"}}, "timeoutMs": 120000},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "nap.in"}, {"from": "nap.out", "to": "out.in"}]
}`

var (
	diamondOnce sync.Once
	napOnce     sync.Once
)

func (w *world) diamond(t *testing.T) {
	diamondOnce.Do(func() { w.publish(t, "diamond", diamondGraph) })
}

func (w *world) nap(t *testing.T) {
	napOnce.Do(func() { w.publish(t, "nap", napGraph) })
}

// TestDiamondRunAndDeepLinks: a finished diamond run's page shows each
// node's final state, taken edges and the dead path, and every event; a
// reload of the run's deep link (and of a revision's) lands on the same
// view, signed in, with no token left in the address bar. weft dev's
// printed canvas link signs in.
func TestDiamondRunAndDeepLinks(t *testing.T) {
	w := env(t)
	w.diamond(t)
	id := w.run(t, "diamond", map[string]any{"id": "a1", "big": false})
	w.waitRunStatus(t, id, "succeeded")

	ctx := w.tab(t)
	w.open(t, ctx, "/ui/runs/"+id, w.devToken)
	want := map[string]string{"in": "succeeded", "check": "succeeded", "big": "skipped", "small": "succeeded", "join": "succeeded", "out": "succeeded"}
	for node, status := range want {
		waitFor(t, ctx, node+" "+status, nodeStatus(node, status))
	}
	waitFor(t, ctx, "the run succeeded", `document.querySelector('[data-testid=run-page]')?.dataset.runStatus === 'succeeded'`)
	// Taken edges highlighted, the dead path dimmed.
	waitFor(t, ctx, "4 taken and 2 dead edges", `document.querySelectorAll('.react-flow__edge.edge-taken').length === 4 &&
		document.querySelectorAll('.react-flow__edge.edge-dead').length === 2`)
	assert.True(t, eval[bool](t, ctx, `document.querySelector('[data-node-id=big]').classList.contains('dead-path')`), "the skipped branch is not shown as a dead path")
	// Every event, each with its data.
	events := len(w.do(t, http.MethodGet, "/v1/runs/"+id+"/events?limit=500", nil).JSON(t)["events"].([]any))
	waitFor(t, ctx, fmt.Sprintf("%d events listed", events), fmt.Sprintf(`document.querySelectorAll('[data-testid=event-list] tr.ev').length === %d`, events))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr.ev[data-type="run.succeeded"]`))))
	waitFor(t, ctx, "the run.succeeded event's data", `[...document.querySelectorAll('tr.ev-data pre')].some(p => p.textContent.includes('"nodeId": "out"'))`)
	// The selected node's panel: attempts and pinned action.
	click(t, ctx, `[data-node-id=small]`)
	waitFor(t, ctx, "the node panel", `document.querySelector('[data-testid=node-panel]')?.textContent.includes('core.echo@1')`)
	got := eval[string](t, ctx, `document.querySelector('[data-testid=temporal-link]').href`)
	assert.Contains(t, got, "/workflows/weft-diamond-", "Temporal Web UI link %q does not name the workflow id weft-diamond-<hash>", got)
	screenshot(t, ctx, "canvas-run")

	// No token in the address bar; a reload keeps the view and the sign-in.
	loc := eval[string](t, ctx, `location.href`)
	require.NotContains(t, loc, "token", "address after sign-in: %s", loc)
	require.True(t, strings.HasSuffix(loc, "/ui/runs/"+id), "address after sign-in: %s", loc)
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload()))
	waitFor(t, ctx, "the same run after a reload", fmt.Sprintf(`location.pathname === '/ui/runs/%s' && %s && %s`, id,
		nodeStatus("small", "succeeded"), nodeStatus("big", "skipped")))

	// The revision's deep link: the graph, the compiled order, a node's
	// mapping, pinned action, retry and permissions; then a reload.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(w.api+"/ui/workflows/diamond/revisions/1")))
	waitFor(t, ctx, "the revision graph", `document.querySelector('[data-testid=graph-canvas]')?.dataset.laidOut === 'true' &&
		document.querySelectorAll('[data-node-id]').length === 6`)
	got = eval[string](t, ctx, `document.querySelector('[data-testid=compiled-order]').textContent`)
	assert.Contains(t, got, "in→check→", "compiled order shows %q", got)
	click(t, ctx, `[data-node-id=small]`)
	waitFor(t, ctx, "the node panel with the mapping", `document.querySelector('[data-testid=mapping]')?.textContent.includes('small {{ item.id }}')`)
	screenshot(t, ctx, "canvas-workflow")
	require.NoError(t, chromedp.Do(ctx, chromedp.Reload()))
	waitFor(t, ctx, "the revision after a reload", `location.pathname === '/ui/workflows/diamond/revisions/1' &&
		document.querySelector('[data-testid=revision-title]')?.textContent.includes('r1')`)

	// The link weft dev printed signs a fresh tab in.
	ctx2 := w.tab(t)
	require.NoError(t, chromedp.Do(ctx2, chromedp.Navigate(strings.Replace(w.canvasLink, "localhost", "127.0.0.1", 1))))
	waitFor(t, ctx2, "the workflow list via the printed link", `!!document.querySelector('[data-testid=workflow-list]') &&
		document.body.innerText.includes('diamond') && location.hash === '' && !!document.querySelector('.dots a.dot')`)
}

// TestSimulationRun: a simulated run is marked as such and shows its
// virtual clock.
func TestSimulationRun(t *testing.T) {
	w := env(t)
	w.diamond(t)
	res := w.do(t, http.MethodPost, "/v1/workflows/diamond/runs", map[string]any{"input": map[string]any{"id": "s1", "big": true},
		"idempotencyKey": uuid.NewString(), "mode": "simulation", "fixtures": map[string]any{"big": map[string]any{"output": map[string]any{"ok": true}, "durationMs": 90000}}})
	require.Equal(t, http.StatusAccepted, res.Status, "simulate: %d %s", res.Status, res.Body)
	id := res.JSON(t)["runId"].(string)
	ctx := w.tab(t)
	w.open(t, ctx, "/ui/runs/"+id, w.devToken)
	waitFor(t, ctx, "the simulated run with its virtual time", `!!document.querySelector('[data-testid=simulation-badge]') &&
		!!document.querySelector('[data-testid=virtual-time]') && document.querySelector('[data-testid=simulation-bar]').textContent.includes('virtual') && `+
		nodeStatus("big", "succeeded")+` && `+nodeStatus("small", "skipped"))
	got := eval[string](t, ctx, `document.querySelector('[data-testid=simulation-bar]').textContent`)
	assert.Contains(t, got, "+1 min 30 s virtual", "the simulation bar says %q, want the 90 s the fixture took", got)
}

// request is one request the page sent.
type request struct {
	method, url string
	at          time.Time
}

// recorder records the page's requests.
type recorder struct {
	mu       sync.Mutex
	requests []request
	mimes    map[string]string // by URL
}

func record(t *testing.T, ctx context.Context) *recorder {
	t.Helper()
	r := &recorder{mimes: map[string]string{}}
	err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			r.mu.Lock()
			r.requests = append(r.requests, request{method: e.Request.Method, url: e.Request.URL, at: time.Now()})
			r.mu.Unlock()
		case *network.EventResponseReceived:
			r.mu.Lock()
			r.mimes[e.Response.URL] = e.Response.MimeType
			r.mu.Unlock()
		}
	})
	require.NoError(t, err)
	return r
}

func (r *recorder) count(match func(request) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, q := range r.requests {
		if match(q) {
			n++
		}
	}
	return n
}

// TestSleepingNodeGoesLive: the page of a run whose node sleeps shows the
// node running, then succeeded, with no reload and no polling: it
// subscribed to the run's event stream once, and read the run itself only
// when it opened and when the stream said the run ended.
func TestSleepingNodeGoesLive(t *testing.T) {
	w := env(t)
	w.nap(t)
	ctx := w.tab(t)
	rec := record(t, ctx)
	// 20 s: the page must open and subscribe while the node still runs; on
	// a loaded machine opening the page alone has taken over 5 s.
	id := w.run(t, "nap", map[string]any{"ms": 20000})
	w.open(t, ctx, "/ui/runs/"+id, w.devToken)
	waitFor(t, ctx, "nap running", nodeStatus("nap", "running"))
	waitFor(t, ctx, "the live badge", `!!document.querySelector('[data-testid=live-badge]')`)
	// A marker that a reload would wipe.
	eval[bool](t, ctx, `(window.__noReload = true)`)
	waitFor(t, ctx, "nap succeeded", nodeStatus("nap", "succeeded")+` && `+nodeStatus("out", "succeeded"))
	waitFor(t, ctx, "the run succeeded", `document.querySelector('[data-testid=run-page]')?.dataset.runStatus === 'succeeded'`)
	require.True(t, eval[bool](t, ctx, `window.__noReload === true`), "the page reloaded")

	base := w.api + "/v1/runs/" + id
	stream := rec.count(func(q request) bool {
		return q.method == http.MethodGet && strings.HasPrefix(q.url, base+"/events/stream")
	})
	runReads := rec.count(func(q request) bool { return q.method == http.MethodGet && q.url == base })
	pages := rec.count(func(q request) bool { return strings.HasPrefix(q.url, base+"/events?") || q.url == base+"/events" })
	assert.Equal(t, 1, stream, "the page opened %d event streams, want 1", stream)
	assert.LessOrEqual(t, runReads, 2, "the page read the run %d times in a 5 s run: polling (want the first read and one after the stream ended)", runReads)
	assert.Equal(t, 0, pages, "the page read the paged event list %d times", pages)
	rec.mu.Lock()
	mime := rec.mimes[base+"/events/stream"]
	rec.mu.Unlock()
	assert.Equal(t, "text/event-stream", mime, "the stream answered %q, want text/event-stream", mime)
}

// TestCancelFromThePage: Cancel on a running run's page cancels it; the
// page shows the node and the run cancelled as the events arrive.
func TestCancelFromThePage(t *testing.T) {
	w := env(t)
	w.nap(t)
	id := w.run(t, "nap", map[string]any{"ms": 60000})
	ctx := w.tab(t)
	w.open(t, ctx, "/ui/runs/"+id, w.devToken)
	waitFor(t, ctx, "nap running", nodeStatus("nap", "running"))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=cancel-run]`))))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=confirm-cancel]`))))
	waitFor(t, ctx, "the run cancelled on the page", `document.querySelector('[data-testid=run-page]')?.dataset.runStatus === 'cancelled' && `+
		nodeStatus("nap", "cancelled")+` && `+nodeStatus("out", "skipped"))
	got := w.runStatus(t, id)
	require.Equal(t, "cancelled", got, "the API says the run is %s", got)
	assert.False(t, eval[bool](t, ctx, `!!document.querySelector('[data-testid=cancel-run]')`), "a cancelled run still offers Cancel")
}

// TestThrottledRunOnTheCanvas: a run over its workflow's cap shows
// throttled with its place in the queue in the runs list (filtered by the
// new status) and on its page, which explains the wait; Cancel there
// removes it from the queue and it never starts; the workflow's page shows
// its limits.
func TestThrottledRunOnTheCanvas(t *testing.T) {
	w := env(t)
	w.publish(t, "gated", napGraph)
	res := w.do(t, http.MethodPut, "/v1/workflows/gated/limits", map[string]any{"maxConcurrentRuns": 1})
	require.Equal(t, http.StatusOK, res.Status, "set limits: %d %s", res.Status, res.Body)
	holder := w.run(t, "gated", map[string]any{"ms": 120000})
	t.Cleanup(func() { w.do(t, http.MethodPost, "/v1/runs/"+holder+"/cancel", nil) })
	waiter := w.run(t, "gated", map[string]any{"ms": 1})
	got := w.runStatus(t, waiter)
	require.Equal(t, "throttled", got, "the second run is %s, want throttled", got)

	ctx := w.tab(t)
	w.open(t, ctx, "/ui/runs?workflowKey=gated&status=throttled", w.devToken)
	waitFor(t, ctx, "the throttled run listed with its place in the queue",
		fmt.Sprintf(`document.querySelector('tr[data-run-id=%q] [data-status=throttled]')?.textContent === 'throttled #1' &&
			document.querySelectorAll('[data-testid=run-list] tbody tr').length === 1`, waiter))
	got = eval[string](t, ctx, `document.querySelector('select[name=status]').value`)
	assert.Equal(t, "throttled", got, "the status filter shows %q", got)

	w.open(t, ctx, "/ui/runs/"+waiter, w.devToken)
	waitFor(t, ctx, "the run page of the throttled run", `document.querySelector('[data-testid=run-page]')?.dataset.runStatus === 'throttled' &&
		document.querySelector('[data-testid=throttled-note]')?.textContent.includes('#1') && `+nodeStatus("nap", "pending"))
	screenshot(t, ctx, "canvas-throttled")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=cancel-run]`))))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=confirm-cancel]`))))
	waitFor(t, ctx, "the throttled run cancelled on the page", `document.querySelector('[data-testid=run-page]')?.dataset.runStatus === 'cancelled' &&
		document.querySelector('[data-testid=run-error]')?.textContent.includes('never started')`)
	got = w.runStatus(t, waiter)
	require.Equal(t, "cancelled", got, "the API says the run is %s", got)
	var started bool
	for _, ev := range w.do(t, http.MethodGet, "/v1/runs/"+waiter+"/events", nil).JSON(t)["events"].([]any) {
		started = started || ev.(map[string]any)["type"] == "run.started"
	}
	assert.False(t, started, "the cancelled throttled run started")

	w.open(t, ctx, "/ui/workflows/gated", w.devToken)
	waitFor(t, ctx, "the workflow's limits", `document.querySelector('[data-testid=workflow-limits]')?.textContent.includes('at most 1 at once')`)
}

// TestSignInAndDenied: without a token the canvas asks for one and
// accepts a pasted token; a refused token returns to sign-in; a token
// without runs.read sees the denied state naming runs.read.
func TestSignInAndDenied(t *testing.T) {
	w := env(t)
	w.diamond(t)
	id := w.run(t, "diamond", map[string]any{"id": "d1", "big": true})

	ctx := w.tab(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(w.api+"/ui/runs")))
	waitFor(t, ctx, "the sign-in screen", `!!document.querySelector('[data-testid=sign-in]')`)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#token`), "Bearer "+w.mint(t, auth.ScopeRunsRead, auth.ScopeWorkflowsRead)),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
	))
	waitFor(t, ctx, "the runs list after a pasted token", `!!document.querySelector('[data-testid=run-list]')`)
	screenshot(t, ctx, "canvas-runs")

	// A tenant with nothing yet: the empty state says how to start.
	w.open(t, ctx, "/ui/workflows", testinfra.TokenFor(t, w.keys, auth.Principal{Tenant: "empty-" + uuid.NewString()[:8], Sub: "x",
		Scopes: []string{auth.ScopeWorkflowsRead, auth.ScopeRunsRead}}))
	waitFor(t, ctx, "the empty state", `document.querySelector('[data-testid=state-empty]')?.textContent.includes('weft push')`)

	// A forged token: the API answers 401, the canvas asks again.
	w.open(t, ctx, "/ui/workflows", w.devToken+"x")
	waitFor(t, ctx, "sign-in after a refused token", `!!document.querySelector('[data-testid=sign-in-reason]')`)

	// workflows.read but not runs.read.
	w.open(t, ctx, "/ui/runs/"+id, w.mint(t, auth.ScopeWorkflowsRead))
	waitFor(t, ctx, "the denied state", `document.querySelector('[data-testid=state-denied]')?.textContent.includes('runs.read')`)
	got := eval[string](t, ctx, `document.querySelector('[data-testid=missing-scope]').textContent`)
	assert.Equal(t, auth.ScopeRunsRead, got, "the denied state names %q, want %s", got, auth.ScopeRunsRead)
	screenshot(t, ctx, "canvas-denied")
}

// TestReadModeOnASmallScreen: at 390 px wide the run page is a readable,
// read-only list: no graph canvas, no Cancel.
func TestReadModeOnASmallScreen(t *testing.T) {
	w := env(t)
	w.nap(t)
	id := w.run(t, "nap", map[string]any{"ms": 60000})
	t.Cleanup(func() { w.do(t, http.MethodPost, "/v1/runs/"+id+"/cancel", nil) })
	ctx := w.tab(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2))))
	w.open(t, ctx, "/ui/runs/"+id, w.devToken)
	waitFor(t, ctx, "read mode with the node list", `document.querySelector('[data-testid=app]')?.dataset.readMode === 'true' &&
		!!document.querySelector('[data-testid=read-mode]') && `+nodeStatus("nap", "running"))
	assert.False(t, eval[bool](t, ctx, `!!document.querySelector('[data-testid=graph-canvas]')`), "read mode shows the graph canvas")
	assert.False(t, eval[bool](t, ctx, `!!document.querySelector('[data-testid=cancel-run]')`), "read mode offers Cancel")
	width := eval[int](t, ctx, `document.documentElement.scrollWidth`)
	assert.LessOrEqual(t, width, 390, "the page is %d px wide at a 390 px viewport: it scrolls sideways", width)
	screenshot(t, ctx, "canvas-read-mode")
}

// gateGraph waits for a decision; rejected settles on "refused".
const gateGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "ok", "kind": "approval", "inputs": {"in": "any"},
     "outputs": {"approved": "any", "rejected": "any", "timedOut": "any"}, "timeoutMs": 3600000},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}},
    {"id": "refused", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "ok.in"}, {"from": "ok.approved", "to": "out.in"}, {"from": "ok.rejected", "to": "refused.in"}]
}`

// TestDecideFromThePage: a run waiting for a decision draws its approval
// node awaiting approval with Approve and Reject; the API refuses a token
// without runs.approve (the page says so); Reject with a comment decides
// it, and the page follows the run to its end through the stream.
func TestDecideFromThePage(t *testing.T) {
	w := env(t)
	w.publish(t, "gatekeeper", gateGraph)
	id := w.run(t, "gatekeeper", map[string]any{"order": 1})

	denied := w.tab(t)
	w.open(t, denied, "/ui/runs/"+id, w.mint(t, "runs.read", "workflows.read"))
	waitFor(t, denied, "ok awaiting approval", nodeStatus("ok", "awaiting_approval")+` && !!document.querySelector('[data-testid=approve-ok]')`)
	require.NoError(t, chromedp.Do(denied, chromedp.Click(chromedp.CSS(`[data-testid=approve-ok]`))))
	waitFor(t, denied, "the denial", `(document.querySelector('[data-testid=approval-error-ok]')?.innerText ?? '').includes('runs.approve')`)
	got := w.runStatus(t, id)
	require.Equal(t, "running", got, "a denied decision changed the run: %s", got)

	ctx := w.tab(t)
	w.open(t, ctx, "/ui/runs/"+id, w.devToken)
	waitFor(t, ctx, "ok awaiting approval", nodeStatus("ok", "awaiting_approval")+` && !!document.querySelector('[data-testid=reject-ok]')`)
	screenshot(t, ctx, "canvas-approval")
	require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(`[aria-label="comment on ok"]`, "not this order")))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid=reject-ok]`))))
	waitFor(t, ctx, "the run settled on refused", `document.querySelector('[data-testid=run-page]')?.dataset.runStatus === 'succeeded' && `+
		nodeStatus("ok", "succeeded")+` && `+nodeStatus("refused", "succeeded")+` && `+nodeStatus("out", "skipped"))
	assert.False(t, eval[bool](t, ctx, `!!document.querySelector('[data-testid=approvals]')`), "a decided run still offers Approve and Reject")
	res := w.do(t, http.MethodGet, "/v1/approvals?runId="+id, nil)
	a := res.JSON(t)["approvals"].([]any)[0].(map[string]any)
	assert.False(t, a["status"] != "rejected" || a["comment"] != "not this order" || a["actor"].(map[string]any)["sub"] != "dev-user", "the recorded decision: %v", a)
}
