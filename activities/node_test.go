package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

const actionDoc = `{"schemaVersion":1,"nodes":[
 {"id":"in","kind":"input","outputs":{"out":"any"}},
 {"id":"echo","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.echo","version":1}},
 {"id":"mapped","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.echo","version":1},
  "mapping":{"lit":{"literal":{"x":[1,2]}},"nil":{"literal":null},"ptr":{"pointer":"/in/items/1/name"},"whole":{"pointer":"/in"},
   "esc":{"pointer":"/in/a~1b"},
   "tpl":{"template":"Item {{ item.id }} by {{ context.user.displayName }} <{{ context.user.email }}> on {{ context.today }} in {{ run.id }}/{{ workflow.key }} for {{ context.tenantName }}; items={{ items }} \\{{ literal }}",
          "bindings":{"item.id":"/in/id","items":"/in/items"}}}},
 {"id":"missing","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.echo","version":1},
  "mapping":{"x":{"pointer":"/in/items/7"}}},
 {"id":"missingtpl","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.echo","version":1},
  "mapping":{"x":{"template":"{{ a.b }}","bindings":{"a.b":"/in/nope"}}}},
 {"id":"save","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"workspace.notes.write","version":1},
  "mapping":{"title":{"template":"Item {{ item.id }}","bindings":{"item.id":"/in/id"}},"body":{"pointer":"/in"}}},
 {"id":"flaky","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.fail","version":1}},
 {"id":"nap","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"core.sleep","version":1},"timeoutMs":300},
 {"id":"bad","kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},"action":{"id":"test.bad","version":1}},
 {"id":"out","kind":"output","inputs":{"in":"any"}}],
 "edges":[{"from":"in.out","to":"echo.in"},{"from":"in.out","to":"mapped.in"},{"from":"in.out","to":"missing.in"},
  {"from":"in.out","to":"missingtpl.in"},{"from":"in.out","to":"save.in"},{"from":"in.out","to":"flaky.in"},
  {"from":"in.out","to":"nap.in"},{"from":"in.out","to":"bad.in"},{"from":"echo.out","to":"out.in"}]}`

// badAction returns output its own contract refuses.
var badAction = catalog.Action{
	Contract: graph.ActionContract{ID: "test.bad", Version: 1, Risk: graph.RiskRead,
		InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{"type":"object","required":["ok"]}`),
		RequiredPermissions: []string{}, TimeoutMs: 1000, Idempotency: catalog.IdempotencyNone},
	Handler: func(context.Context, catalog.Call) (json.RawMessage, error) {
		return json.RawMessage(`{"nope":1}`), nil
	},
}

const item = `{"id":"a","items":[{"name":"x"},{"name":"y"}],"a/b":"slash"}`

func TestActionHappyPath(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	res, err := b.runNode(b.input("echo", graph.KindAction, map[string]string{"in": item}))
	require.NoError(t, err, "%+v", res)
	require.Equal(t, "out", res.Port, "%+v %v", res, err)
	require.Nil(t, res.Value.Ref, "%+v %v", res, err)
	require.Equal(t, item, b.value(res.Value), "%+v %v", res, err)
}

func TestActionLargeOutputIsClaimChecked(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", activities.InlineValueLimit)})
	res, err := b.runNode(b.input("echo", graph.KindAction, map[string]string{"in": string(big)}))
	require.NoError(t, err, "%+v", res)
	require.NotNil(t, res.Value.Ref, "%+v %v", res, err)
	require.Nil(t, res.Value.Inline, "%+v %v", res, err)
	var got map[string]string
	err = json.Unmarshal([]byte(b.value(res.Value)), &got)
	require.NoError(t, err, "stored value")
	require.Len(t, got["text"], activities.InlineValueLimit, "stored value: %v", err)
}

func TestMappingPointerLiteralTemplate(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	res, err := b.runNode(b.input("mapped", graph.KindAction, map[string]string{"in": item}))
	require.NoError(t, err)
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(b.value(res.Value)), &got))
	want := map[string]string{
		"lit":   `{"x":[1,2]}`,
		"nil":   `null`,
		"ptr":   `"y"`,
		"whole": item,
		"esc":   `"slash"`,
	}
	for k, w := range want {
		var a, b any
		_ = json.Unmarshal(got[k], &a)
		_ = json.Unmarshal([]byte(w), &b)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		assert.Equal(t, string(jb), string(ja), "%s = %s, want %s", k, got[k], w)
	}
	var tpl string
	_ = json.Unmarshal(got["tpl"], &tpl)
	wantTpl := `Item a by Ada Lovelace <ada@example.com> on 2026-12-01 in run-1/wf for Acme; items=[{"name":"x"},{"name":"y"}] {{ literal }}`
	assert.Equal(t, wantTpl, tpl, "tpl = %q\nwant  %q", tpl, wantTpl)
}

func TestMappingUnresolvedIsPermanent(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	_, err := b.runNode(b.input("missing", graph.KindAction, map[string]string{"in": item}))
	ae := wantAppErr(t, err, execution.ErrMappingUnresolved, true)
	require.Contains(t, ae.Error(), "/in/items/7", "message does not name the pointer: %v", ae)
	_, err = b.runNode(b.input("missingtpl", graph.KindAction, map[string]string{"in": item}))
	wantAppErr(t, err, execution.ErrMappingUnresolved, true)
	// No value at all on the input port.
	_, err = b.runNode(b.input("echo", graph.KindAction, nil))
	wantAppErr(t, err, execution.ErrMappingUnresolved, true)
}

func TestPermissionRecheckDenied(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	in := b.input("save", graph.KindAction, map[string]string{"in": item})
	in.Permissions = []string{"runs.read"}
	_, err := b.runNode(in)
	ae := wantAppErr(t, err, execution.ErrPermissionDenied, true)
	var details map[string][]string
	err = ae.Details(&details)
	require.NoError(t, err, "details %v", details)
	require.Len(t, details["missing"], 1, "details %v %v", details, err)
	require.Equal(t, "notes.write", details["missing"][0], "details %v %v", details, err)
	notes, _ := b.st.ListNotes(context.Background(), tenant, 10, nil)
	require.Empty(t, notes, "a denied node wrote a note")
}

func TestCoreFailRetrySemanticsByAttempt(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	in := b.input("flaky", graph.KindAction, map[string]string{"in": `{"untilAttempt":3,"value":"done"}`})
	for attempt := 1; attempt <= 3; attempt++ {
		in.Attempt = attempt
		res, err := b.runNode(in)
		if attempt < 3 {
			wantAppErr(t, err, execution.ErrActionFailed, false)
			continue
		}
		require.NoError(t, err, "attempt 3: %+v", res)
		require.Equal(t, `"done"`, b.value(res.Value), "attempt 3: %+v %v", res, err)
	}
}

func TestSchemaViolationAndInvalidOutput(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	_, err := b.runNode(b.input("flaky", graph.KindAction, map[string]string{"in": `{"untilAttempt":"x"}`}))
	wantAppErr(t, err, execution.ErrSchemaViolation, true)
	_, err = b.runNode(b.input("bad", graph.KindAction, map[string]string{"in": `{}`}))
	wantAppErr(t, err, execution.ErrInvalidOutput, true)
}

func TestNodeTimeoutIsRetryableAndPrompt(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	var beats int
	b.env.SetOnActivityHeartbeatListener(func(_ *activity.Info, _ converter.EncodedValues) { beats++ })
	start := time.Now()
	_, err := b.runNode(b.input("nap", graph.KindAction, map[string]string{"in": `{"ms":5000}`}))
	wantAppErr(t, err, execution.ErrActionTimeout, false)
	d := time.Since(start)
	require.LessOrEqual(t, d, time.Duration(2*time.Second), "took %v with a 300 ms node timeout", d)
	require.NotEqual(t, 0, beats, "no heartbeat while the handler ran")
	res, err := b.runNode(b.input("nap", graph.KindAction, map[string]string{"in": `{"ms":10}`}))
	require.NoError(t, err, "%+v", res)
	require.Equal(t, `{"sleptMs":10}`, b.value(res.Value), "%+v %v", res, err)
}

func TestNotesWriteExactlyOnceAcrossAttempts(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction))
	ctx := context.Background()
	in := b.input("save", graph.KindAction, map[string]string{"in": item})
	var first string
	for attempt := 1; attempt <= 3; attempt++ {
		in.Attempt = attempt
		res, err := b.runNode(in)
		require.NoError(t, err, "attempt %d", attempt)
		var out struct{ NoteID string }
		_ = json.Unmarshal([]byte(b.value(res.Value)), &out)
		if first == "" {
			first = out.NoteID
		}
		require.NotEmpty(t, out.NoteID, "attempt %d: note %q, first %q", attempt, out.NoteID, first)
		require.Equal(t, first, out.NoteID, "attempt %d: note %q, first %q", attempt, out.NoteID, first)
	}
	notes, err := b.st.ListNotes(ctx, tenant, 10, nil)
	require.NoError(t, err, "%d notes,", len(notes))
	require.Len(t, notes, 1, "%d notes, %v", len(notes), err)
	n := notes[0]
	require.Equal(t, "Item a", n.Title, "note %+v", n)
	require.Equal(t, "run-1", n.RunID, "note %+v", n)
	require.Equal(t, "save", n.NodeID, "note %+v", n)
	// The same (tenant, run, node) with another input fails closed.
	in.Inputs["in"] = execution.Value{Inline: json.RawMessage(`{"id":"b"}`)}
	_, err = b.runNode(in)
	wantAppErr(t, err, execution.ErrIdempotencyConflict, true)
	notes, _ = b.st.ListNotes(ctx, tenant, 10, nil)
	require.Len(t, notes, 1, "%d notes after the conflict", len(notes))
}

// Live agent nodes are refused until the agent runtime lands (simulated
// ones are covered in simulate_test.go).
// An agent node runs only the revision publication pinned: pinned in the
// compiled revision but missing from the store (deleted, another
// database), it is AGENT_UNAVAILABLE, permanently, before any provider
// call. (Live agents do run: see agents/harness_test.go and
// e2e/agents_test.go.)
func TestAgentWithAMissingRevisionIsUnavailable(t *testing.T) {
	t.Parallel()
	agentDoc := `{"schemaVersion":1,"nodes":[
	 {"id":"in","kind":"input","outputs":{"out":"any"}},
	 {"id":"bot","kind":"agent","inputs":{"in":"any"},"outputs":{"out":"any"},"agent":{"key":"bot","revision":1}},
	 {"id":"out","kind":"output","inputs":{"in":"any"}}],
	 "edges":[{"from":"in.out","to":"bot.in"},{"from":"bot.out","to":"out.in"}]}`
	ab := newBundle(t, agentDoc, withAgent(graph.AgentContract{Key: "bot", Revision: 1, Hash: "h",
		OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{}}))
	_, err := ab.runNode(ab.input("bot", graph.KindAgent, map[string]string{"in": item}))
	appErr := wantAppErr(t, err, execution.ErrAgentUnavailable, true)
	require.Contains(t, appErr.Error(), "is not stored", "refused for another reason: %v", appErr)
}

func TestActionContractMismatchIsRefused(t *testing.T) {
	t.Parallel()
	changed := catalog.EchoV1
	changed.Description = "a different contract under the same id@version"
	b := newBundle(t, actionDoc, withActions(badAction), withRegistry(catalog.Action{Contract: changed,
		Handler: func(_ context.Context, c catalog.Call) (json.RawMessage, error) { return c.Input, nil }}))
	_, err := b.runNode(b.input("echo", graph.KindAction, map[string]string{"in": item}))
	wantAppErr(t, err, execution.ErrActionUnavailable, true)
	_, err = b.runNode(b.input("flaky", graph.KindAction, map[string]string{"in": `{"untilAttempt":1}`}))
	wantAppErr(t, err, execution.ErrActionUnavailable, true) // not registered at all
}

func TestExternalRiskIsNeverExecuted(t *testing.T) {
	t.Parallel()
	b := newBundle(t, actionDoc, withActions(badAction), withEdit(func(c *graph.Compiled) {
		for i := range c.Actions {
			if c.Actions[i].ID == "core.echo" {
				c.Actions[i].Risk = graph.RiskExternal
			}
		}
	}))
	_, err := b.runNode(b.input("echo", graph.KindAction, map[string]string{"in": item}))
	ae := wantAppErr(t, err, execution.ErrActionUnavailable, true)
	require.Contains(t, ae.Error(), "external", "message: %v", ae)
}
