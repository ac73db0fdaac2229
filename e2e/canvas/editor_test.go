package canvas_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
)

// setField sets an input, textarea or select the way a user would (React
// sees an input or change event).
func setField(t *testing.T, ctx context.Context, sel, value string) {
	t.Helper()
	waitFor(t, ctx, "the field "+sel, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	js := fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		const proto = el.tagName === 'SELECT' ? HTMLSelectElement.prototype : el.tagName === 'TEXTAREA' ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
		Object.getOwnPropertyDescriptor(proto, 'value').set.call(el, %q);
		el.dispatchEvent(new Event(el.tagName === 'SELECT' ? 'change' : 'input', { bubbles: true }));
		return true;
	})()`, sel, value)
	eval[bool](t, ctx, js)
}

// click clicks the element sel once it is there and enabled. It is a DOM
// click, not a pointer at coordinates: a canvas still fitting its view (slow
// under load) would move a node from under a pointer and the click would
// land on the pane.
func click(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	waitFor(t, ctx, "clickable "+sel, fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && !el.disabled; })()`, sel))
	eval[bool](t, ctx, fmt.Sprintf(`(document.querySelector(%q).click(), true)`, sel))
}

// connect draws an edge from the selected node's output port to an input
// port, with the inspector's connect form (the keyboard way), and waits
// until the canvas shows it.
func connect(t *testing.T, ctx context.Context, from, to string) {
	t.Helper()
	node, port, _ := strings.Cut(from, ".")
	waitFor(t, ctx, "the inspector of "+node, fmt.Sprintf(`document.querySelector('[data-testid=inspector]')?.dataset.node === %q`, node))
	setField(t, ctx, `[data-testid=connect-from]`, port)
	setField(t, ctx, `[data-testid=connect-to]`, to)
	click(t, ctx, `[data-testid=connect]`)
	id := from + "->" + to
	waitFor(t, ctx, "the edge "+id, fmt.Sprintf(`!!document.querySelector('.react-flow__edge[data-id=%q]') || [...document.querySelectorAll('.react-flow__edge')].some(e => e.getAttribute('data-id') === %q || (e.getAttribute('aria-label') || '').includes(%q))`, id, id, id))
}

// selectNode selects a node on the canvas by clicking it.
func selectNode(t *testing.T, ctx context.Context, id string) {
	t.Helper()
	click(t, ctx, fmt.Sprintf(`[data-node-id=%q]`, id))
	waitFor(t, ctx, "the inspector of "+id, fmt.Sprintf(`document.querySelector('[data-testid=inspector]')?.dataset.node === %q`, id))
}

// waitSaved waits until the editor shows draft revision rev saved and its
// dry-run.
func waitSaved(t *testing.T, ctx context.Context, rev int) {
	t.Helper()
	waitFor(t, ctx, fmt.Sprintf("draft r%d saved and dry-run", rev), fmt.Sprintf(`(() => {
		const e = document.querySelector('[data-testid=editor]');
		const v = document.querySelector('[data-testid=verdict]');
		return e?.dataset.draftRevision === '%d' && e?.dataset.dirty === 'false' && v?.dataset.source === 'dry-run' && v.textContent.includes('r%d');
	})()`, rev, rev))
}

// TestEditorBuildsSimulatesPublishesAndRuns: from an empty workflow, the
// canvas alone builds input → gate → (pass) action / (fail) action → merge
// → output, saves it, shows the issue the test provoked on the gate, takes
// the fix, simulates with a fixture, publishes with the diff, and starts a
// live run that finishes.
func TestEditorBuildsSimulatesPublishesAndRuns(t *testing.T) {
	w := env(t)
	ctx := w.tab(t)
	logPageErrors(t, ctx)
	w.open(t, ctx, "/ui/workflows", w.devToken)
	click(t, ctx, `a[href="/ui/new"]`)
	setField(t, ctx, `[data-testid=new-key]`, "edited")
	click(t, ctx, `[data-testid=from-scratch]`)
	click(t, ctx, `[data-testid=create]`)
	waitFor(t, ctx, "the editor of the new workflow", `location.pathname === '/ui/workflows/edited/edit' && !!document.querySelector('[data-testid=palette]')`)

	// Built from the output back, so each new node (selected when added)
	// connects to one already there.
	click(t, ctx, `[data-testid=add-output]`)
	click(t, ctx, `[data-testid=add-merge]`)
	connect(t, ctx, "merge.out", "output.in")
	click(t, ctx, `[data-testid="add-action-core.echo@1"]`)
	connect(t, ctx, "echo.out", "merge.b")
	click(t, ctx, `[data-testid="add-action-core.echo@1"]`)
	connect(t, ctx, "echo-2.out", "merge.a")
	click(t, ctx, `[data-testid=add-gate]`)
	connect(t, ctx, "gate.pass", "echo-2.in")
	connect(t, ctx, "gate.fail", "echo.in")
	click(t, ctx, `[data-testid=add-input]`)
	connect(t, ctx, "input.out", "gate.in")
	waitFor(t, ctx, "six nodes and six edges", `document.querySelectorAll('[data-node-id]').length === 6 && document.querySelectorAll('.react-flow__edge').length === 6`)

	// An input port takes one edge: the server refuses a second on the spot.
	selectNode(t, ctx, "echo")
	setField(t, ctx, `[data-testid=connect-from]`, "out")
	setField(t, ctx, `[data-testid=connect-to]`, "gate.in")
	click(t, ctx, `[data-testid=connect]`)
	waitFor(t, ctx, "the refusal with its reason", `document.querySelector('[data-testid=connect-refused]')?.textContent.includes('echo.out → gate.in refused')`)
	n := eval[int](t, ctx, `document.querySelectorAll('.react-flow__edge').length`)
	require.Equal(t, 6, n, "a refused edge was drawn: %d edges", n)

	// The provoked issue: an expression that does not compile.
	selectNode(t, ctx, "gate")
	setField(t, ctx, `[data-testid=gate-expression]`, "input.big ==")
	click(t, ctx, `[data-testid=save]`)
	waitSaved(t, ctx, 2)
	waitFor(t, ctx, "the issue on the gate", `document.querySelector('[data-node-id=gate]').dataset.issues !== '0' &&
		document.querySelector('[data-node-id=gate]').dataset.issueCodes.includes('INVALID_EXPRESSION') &&
		[...document.querySelectorAll('[data-node-id]')].filter(n => n.dataset.issues !== '0').length === 1`)
	click(t, ctx, `[data-testid=tab-issues]`)
	waitFor(t, ctx, "the issue listed on the gate", `[...document.querySelectorAll('[data-testid=issue-list] li')].some(li => li.dataset.node === 'gate' && li.dataset.code === 'INVALID_EXPRESSION')`)
	click(t, ctx, `[data-testid=issue-list] li[data-node=gate] button`)
	waitFor(t, ctx, "the expression's issue in the inspector", `!!document.querySelector('[data-testid="field-issues-/expression"]')`)
	setField(t, ctx, `[data-testid=gate-expression]`, "input.big == true")
	click(t, ctx, `[data-testid=save]`)
	waitSaved(t, ctx, 3)
	waitFor(t, ctx, "a valid draft", `document.querySelector('[data-testid=verdict]').dataset.valid === 'true' && document.querySelectorAll('[data-node-id][data-issues="0"]').length === 6`)
	// Positions were saved beside the draft, not in it.
	layout := w.do(t, http.MethodGet, "/v1/workflows/edited/layout", nil).JSON(t)
	got := len(layout["positions"].(map[string]any))
	assert.Equal(t, 6, got, "layout holds %d positions, want 6: %v", got, layout)
	d := w.do(t, http.MethodGet, "/v1/workflows/edited", nil).JSON(t)["draft"].(map[string]any)
	assert.NotContains(t, fmt.Sprint(d["graph"]), "position", "the draft holds positions: %v", d["graph"])
	// Tidy lays the graph out left to right again (the nodes were added
	// from the output back).
	click(t, ctx, `[data-testid=tidy]`)
	waitFor(t, ctx, "the tidy layout", `(() => { const x = id => document.querySelector('[data-node-id="' + id + '"]').getBoundingClientRect().x;
		return x('input') < x('gate') && x('gate') < x('echo') && x('echo') < x('merge') && x('merge') < x('output'); })()`)
	click(t, ctx, `[data-testid=tab-dryrun]`)
	waitFor(t, ctx, "the dry-run panel", `document.querySelector('[data-testid=dryrun-order]')?.textContent.startsWith('input → gate') &&
		document.querySelector('[data-testid=dryrun-checksum]').textContent.length === 64`)
	screenshot(t, ctx, "editor")

	// Simulate with a fixture: the pass branch's action answers {"fixed": true}.
	click(t, ctx, `[data-testid=tab-simulate]`)
	setField(t, ctx, `[data-testid=simulate-input]`, `{"big": true}`)
	setField(t, ctx, `[data-testid=fixture-output-echo-2]`, `{"fixed": true}`)
	setField(t, ctx, `[data-testid=fixture-duration-echo-2]`, `5000`)
	click(t, ctx, `[data-testid=simulate]`)
	waitFor(t, ctx, "the simulated run succeeded", `location.pathname.startsWith('/ui/runs/') && !!document.querySelector('[data-testid=simulation-badge]') &&
		document.querySelector('[data-testid=run-page]')?.dataset.runStatus === 'succeeded' && `+nodeStatus("echo-2", "succeeded")+` && `+nodeStatus("echo", "skipped"))
	simID := strings.TrimPrefix(eval[string](t, ctx, `location.pathname`), "/ui/runs/")
	run := w.do(t, http.MethodGet, "/v1/runs/"+simID, nil).JSON(t)
	out, _ := json.Marshal(run["output"])
	assert.Contains(t, string(out), `"fixed":true`, "the simulated run's output %s does not carry the fixture", out)

	// Publish: checksum, pinned action and the diff against nothing.
	w.open(t, ctx, "/ui/workflows/edited/edit", w.devToken)
	waitSaved(t, ctx, 3)
	click(t, ctx, `[data-testid=tab-publish]`)
	waitFor(t, ctx, "the publish panel", `document.querySelector('[data-testid=publish-checksum]')?.textContent.length === 64 &&
		document.querySelector('[data-testid=publish-deps]').textContent.includes('core.echo@1') &&
		document.querySelectorAll('[data-diff=node-added]').length === 6 && document.querySelectorAll('[data-diff=edge-added]').length === 6`)
	click(t, ctx, `[data-testid=publish]`)
	waitFor(t, ctx, "published r1", `document.querySelector('[data-testid=published]')?.textContent.includes('r1')`)
	setField(t, ctx, `[data-testid=run-input]`, `{"big": false}`)
	click(t, ctx, `[data-testid=start-run]`)
	waitFor(t, ctx, "the live run page", `location.pathname.startsWith('/ui/runs/') && !document.querySelector('[data-testid=simulation-badge]')`)
	waitFor(t, ctx, "the live run finished", `document.querySelector('[data-testid=run-page]')?.dataset.runStatus === 'succeeded' && `+
		nodeStatus("echo", "succeeded")+` && `+nodeStatus("echo-2", "skipped"))

	// The next edit's diff names what changed against r1.
	w.open(t, ctx, "/ui/workflows/edited/edit", w.devToken)
	waitSaved(t, ctx, 3)
	selectNode(t, ctx, "gate")
	setField(t, ctx, `[data-testid=gate-expression]`, "input.big == false")
	click(t, ctx, `[data-testid=save]`)
	waitSaved(t, ctx, 4)
	click(t, ctx, `[data-testid=tab-publish]`)
	waitFor(t, ctx, "the diff against r1", `document.querySelectorAll('[data-diff=node-changed]').length === 1 &&
		document.querySelector('[data-diff=node-changed]').textContent.includes('gate (expression)') && document.querySelectorAll('[data-testid=diff] li').length === 1`)
	screenshot(t, ctx, "editor-publish")
}

// TestEditorConflict: two tabs edit one draft; the second save gets the
// conflict view naming who saved which revision, nothing is overwritten and
// the second tab's version stays at hand until it reloads.
func TestEditorConflict(t *testing.T) {
	w := env(t)
	res := w.do(t, http.MethodPost, "/v1/workflows", map[string]any{"key": "conflicted", "graph": json.RawMessage(diamondGraph)})
	require.Equal(t, http.StatusCreated, res.Status, "create: %d %s", res.Status, res.Body)
	a, b := w.tab(t), w.tab(t)
	tokenA := w.devToken
	tokenB := w.mint(t, auth.ScopeWorkflowsRead, auth.ScopeWorkflowsWrite, auth.ScopeVariablesRead)
	for _, c := range []struct {
		ctx   context.Context
		token string
	}{{a, tokenA}, {b, tokenB}} {
		w.open(t, c.ctx, "/ui/workflows/conflicted/edit", c.token)
		waitSaved(t, c.ctx, 1)
	}
	selectNode(t, a, "check")
	setField(t, a, `[data-testid=gate-expression]`, "input.big == false")
	click(t, a, `[data-testid=save]`)
	waitSaved(t, a, 2)

	selectNode(t, b, "check")
	setField(t, b, `[data-testid=gate-expression]`, "has(input.big)")
	click(t, b, `[data-testid=save]`)
	waitFor(t, b, "the conflict view", `document.querySelector('[data-testid=conflict-revision]')?.textContent === 'r2' &&
		document.querySelector('[data-testid=conflict-who]').textContent.length > 0 &&
		document.querySelector('[data-diff=node-changed]')?.textContent.includes('check') &&
		document.querySelector('[data-testid=conflict-mine]').value.includes('has(input.big)')`)
	who := eval[string](t, b, `document.querySelector('[data-testid=conflict-who]').textContent`)
	draft := w.do(t, http.MethodGet, "/v1/workflows/conflicted", nil).JSON(t)["draft"].(map[string]any)
	assert.False(t, who != draft["savedBy"] || draft["revision"].(float64) != 2, "conflict names %q; the draft is r%v saved by %v", who, draft["revision"], draft["savedBy"])
	g, _ := json.Marshal(draft["graph"])
	assert.Contains(t, string(g), `input.big == false`, "the first save was overwritten: %s", g)
	// B still has its edit; reloading takes A's.
	got := eval[string](t, b, `document.querySelector('[data-testid=gate-expression]').value`)
	assert.Equal(t, "has(input.big)", got, "tab B lost its edit: %q", got)
	click(t, b, `[data-testid=conflict-reload]`)
	waitSaved(t, b, 2)
	selectNode(t, b, "check")
	got = eval[string](t, b, `document.querySelector('[data-testid=gate-expression]').value`)
	assert.Equal(t, "input.big == false", got, "after reload tab B shows %q", got)

	// The YAML view is the server's export; edited and saved, the canvas
	// shows what the server read.
	click(t, b, `[data-testid=tab-yaml]`)
	waitFor(t, b, "the YAML export", `document.querySelector('[data-testid=yaml-text]')?.value.includes('input.big == false')`)
	yaml := eval[string](t, b, `document.querySelector('[data-testid=yaml-text]').value`)
	pulled := w.do(t, http.MethodGet, "/v1/workflows/conflicted/draft?format=yaml&revision=2", nil)
	assert.Equal(t, yaml, string(pulled.Body), "the YAML view differs from the export weft pull reads:\n%s\n---\n%s", yaml, pulled.Body)
	setField(t, b, `[data-testid=yaml-text]`, strings.Replace(yaml, "input.big == false", "input.big != false", 1))
	click(t, b, `[data-testid=yaml-save]`)
	waitSaved(t, b, 3)
	selectNode(t, b, "check")
	got = eval[string](t, b, `document.querySelector('[data-testid=gate-expression]').value`)
	assert.Equal(t, "input.big != false", got, "after saving YAML the canvas shows %q", got)
}

// TestEditorTemplateVariables: the {{ menu lists exactly the variables the
// token's scopes allow; a forbidden variable is flagged before saving,
// shown as an issue by the dry-run after saving and refused at publication.
func TestEditorTemplateVariables(t *testing.T) {
	w := env(t)
	token := w.mint(t, auth.ScopeWorkflowsRead, auth.ScopeWorkflowsWrite, auth.ScopeWorkflowsPublish, auth.ScopeVariablesRead)
	ctx := w.tab(t)
	w.open(t, ctx, "/ui/new", token)
	setField(t, ctx, `[data-testid=new-key]`, "templated")
	click(t, ctx, `[data-testid=from-quickstart]`)
	click(t, ctx, `[data-testid=create]`)
	waitFor(t, ctx, "the editor of the example", `location.pathname === '/ui/workflows/templated/edit'`)
	waitSaved(t, ctx, 1)
	waitFor(t, ctx, "the example laid out", `document.querySelector('[data-testid=edit-canvas]').dataset.laidOut === 'true'`)
	selectNode(t, ctx, "save")

	res := testinfraDo(t, w, http.MethodGet, "/v1/variables", token)
	var allowed []string
	for _, v := range res["variables"].([]any) {
		allowed = append(allowed, v.(map[string]any)["key"].(string))
	}
	require.False(t, slices.Contains(allowed, "agent.name"), "the token's variables %v: want some, without agent.name", allowed)
	require.NotEmpty(t, allowed, "the token's variables %v: want some, without agent.name", allowed)
	// Typing {{ opens the menu with exactly those.
	eval[bool](t, ctx, `(() => {
		const el = document.querySelector('[data-testid=template-title]');
		const v = el.value + ' {{';
		Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(el, v);
		el.setSelectionRange(v.length, v.length);
		el.dispatchEvent(new Event('input', { bubbles: true }));
		return true;
	})()`)
	waitFor(t, ctx, "the variable menu", `document.querySelectorAll('[data-testid=var-menu] li[data-var]').length > 0`)
	listed := eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid=var-menu] li[data-var]')].map(li => li.dataset.var)`)
	assert.True(t, slices.Equal(listed, allowed), "the menu lists %v, the token allows %v", listed, allowed)
	screenshot(t, ctx, "editor-template")
	// Choose the first; then type a forbidden one by hand.
	eval[bool](t, ctx, `(document.querySelector('[data-testid=var-menu] li[data-var]').dispatchEvent(new MouseEvent('mousedown', { bubbles: true })), true)`)
	waitFor(t, ctx, "the chosen variable as a pill", fmt.Sprintf(`!!document.querySelector('[data-testid=pills-title] .pill[data-token=%q]')`, allowed[0]))
	setField(t, ctx, `[data-testid=template-title]`, "Item {{ item.id }} for {{ agent.name }}")
	waitFor(t, ctx, "the forbidden variable flagged before saving", `document.querySelector('[data-testid=editor]').dataset.dirty === 'true' &&
		document.querySelector('[data-testid=pills-title] .pill[data-token="agent.name"]')?.dataset.flagged === 'true' &&
		document.querySelector('[data-testid=pills-title] .pill[data-token="item.id"]')?.dataset.flagged === 'false'`)
	click(t, ctx, `[data-testid=save]`)
	waitSaved(t, ctx, 2)
	waitFor(t, ctx, "the dry-run's issue on the node", `document.querySelector('[data-node-id=save]').dataset.issueCodes.includes('UNKNOWN_VARIABLE')`)
	screenshot(t, ctx, "editor-inspector")
	click(t, ctx, `[data-testid=tab-publish]`)
	click(t, ctx, `[data-testid=publish]`)
	waitFor(t, ctx, "publication refused", `document.querySelector('[data-testid=publish-error]')?.textContent.includes('UNKNOWN_VARIABLE')`)
	res = w.do(t, http.MethodGet, "/v1/workflows/templated", nil).JSON(t)
	assert.True(t, res["publishedRevision"] == nil, "a revision was published: %v", res["publishedRevision"])
}

// logPageErrors logs the page's uncaught exceptions and console errors, so
// a failing wait says why the page stopped.
func logPageErrors(t *testing.T, ctx context.Context) {
	t.Helper()
	err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			t.Logf("page exception: %s %s", e.ExceptionDetails.Text, func() string {
				if e.ExceptionDetails.Exception != nil {
					return e.ExceptionDetails.Exception.Description
				}
				return ""
			}())
		case *runtime.EventConsoleAPICalled:
			if e.Type == "error" {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				t.Logf("console error: %s", strings.Join(parts, " "))
			}
		}
	})
	require.NoError(t, err)
}

// testinfraDo calls the API with token and returns the JSON object answered.
func testinfraDo(t *testing.T, w *world, method, path, token string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, w.api+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var out map[string]any
	err = json.NewDecoder(res.Body).Decode(&out)
	require.NoError(t, err, "%s %s: %d", method, path, res.StatusCode)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s %s: %d %v", method, path, res.StatusCode, err)
	return out
}

// TestEditorMoveAndDelete: dragging a node saves its position beside the
// draft (no draft revision, the same checksum); Delete removes the
// selected node and its edges.
func TestEditorMoveAndDelete(t *testing.T) {
	w := env(t)
	res := w.do(t, http.MethodPost, "/v1/workflows", map[string]any{"key": "moved", "graph": json.RawMessage(diamondGraph)})
	require.Equal(t, http.StatusCreated, res.Status, "create: %d %s", res.Status, res.Body)
	checksum := w.do(t, http.MethodPost, "/v1/workflows/moved/dry-run", nil).JSON(t)["checksum"]
	ctx := w.tab(t)
	logPageErrors(t, ctx)
	w.open(t, ctx, "/ui/workflows/moved/edit", w.devToken)
	waitSaved(t, ctx, 1)
	waitFor(t, ctx, "six nodes drawn", `document.querySelectorAll('.react-flow__node').length === 6 && document.querySelectorAll('.react-flow__edge').length === 6`)
	// ELK lays the graph out (no position was saved yet); let it and the
	// fit settle before measuring where the node is.
	waitFor(t, ctx, "the automatic layout", `document.querySelector('[data-testid=editor]').dataset.positions === '6'`)
	waitFor(t, ctx, "a stable position", `(() => { const r = document.querySelector('[data-node-id=small]').getBoundingClientRect();
		const k = r.x + ',' + r.y; const last = window.__lastSmall; window.__lastSmall = k; return last === k; })()`)
	rect := eval[[]float64](t, ctx, `(() => { const r = document.querySelector('[data-node-id=small] .wnode-title').getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`)
	x, y := rect[0], rect[1]
	actions := []chromedp.Action[chromedp.Void]{chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x, y), chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1))}
	for i := 1; i <= 10; i++ {
		actions = append(actions, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x+float64(i)*12, y+float64(i)*8, chromedp.ButtonLeft))
	}
	actions = append(actions, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x+120, y+80, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	require.NoError(t, chromedp.Do(ctx, actions...))
	deadline := time.Now().Add(60 * time.Second)
	for {
		pos := w.do(t, http.MethodGet, "/v1/workflows/moved/layout", nil).JSON(t)["positions"].(map[string]any)
		if _, ok := pos["small"]; ok {
			break
		}
		require.False(t, time.Now().After(deadline), "the moved node's position was not saved: %v", pos)
		time.Sleep(100 * time.Millisecond)
	}
	wf := w.do(t, http.MethodGet, "/v1/workflows/moved", nil).JSON(t)
	assert.Equal(t, float64(1), wf["draftRevision"].(float64), "moving a node made draft r%v", wf["draftRevision"])
	got := w.do(t, http.MethodPost, "/v1/workflows/moved/dry-run", nil).JSON(t)["checksum"]
	assert.True(t, got == checksum, "moving a node changed the checksum: %v, was %v", got, checksum)
	assert.Equal(t, "false", eval[string](t, ctx, `document.querySelector('[data-testid=editor]').dataset.dirty`), "moving a node left the draft with unsaved changes")

	// Delete from the keyboard: select the output node, press Delete.
	selectNode(t, ctx, "out")
	eval[bool](t, ctx, `(document.querySelector('.react-flow__node[data-id=out]').focus(), true)`)
	require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent(kb.Delete)))
	waitFor(t, ctx, "the node and its edge gone", `!document.querySelector('[data-node-id=out]') && document.querySelectorAll('.react-flow__edge').length === 5 &&
		document.querySelector('[data-testid=editor]').dataset.dirty === 'true'`)
	// The server says what the graph now lacks.
	waitFor(t, ctx, "the check of the unsaved graph", `document.querySelector('[data-testid=verdict]')?.dataset.source === 'check' && document.querySelector('[data-testid=verdict]').dataset.valid === 'false'`)
}
