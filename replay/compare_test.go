package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/graph"
)

// diamond is a recorded outcome of a diamond gate -> (big | small) -> out.
func diamond(status, bigStatus, smallStatus string, output string) Outcome {
	o := Outcome{Status: status, Nodes: map[string]NodeOutcome{
		"in":    {Status: "succeeded", Port: "out"},
		"gate":  {Status: "succeeded", Port: "true"},
		"big":   {Status: bigStatus},
		"small": {Status: smallStatus},
	}}
	if bigStatus == "skipped" {
		o.Nodes["gate"] = NodeOutcome{Status: "succeeded", Port: "false"}
	}
	if output != "" {
		o.Output = json.RawMessage(output)
	}
	return o
}

func TestCompareVerdicts(t *testing.T) {
	failedErr := json.RawMessage(`{"code":"NODE_FAILED","message":"boom","nodeId":"big"}`)
	withErr := func(o Outcome, e json.RawMessage) Outcome { o.Error = e; return o }
	cases := []struct {
		name      string
		rec, sim  Outcome
		added     map[string]bool
		verdict   string
		nodes     []NodeChange
		outputOps []string // op path pairs
		truncated bool
	}{
		{name: "same", rec: diamond("succeeded", "succeeded", "skipped", `{"a":1}`),
			sim: diamond("succeeded", "succeeded", "skipped", `{"a":1.0}`), verdict: VerdictSame},
		{name: "output changed", rec: diamond("succeeded", "succeeded", "skipped", `{"a":1,"b":[1,2],"c":"x"}`),
			sim: diamond("succeeded", "succeeded", "skipped", `{"a":2,"b":[1],"d":true,"c":"x"}`), verdict: VerdictOutputChanged,
			outputOps: []string{"replace /a", "remove /b/1", "add /d"}},
		{name: "path changed beats output", rec: diamond("succeeded", "succeeded", "skipped", `{"route":"big"}`),
			sim: diamond("succeeded", "skipped", "succeeded", `{"route":"small"}`), verdict: VerdictPathChanged,
			nodes: []NodeChange{{"big", "succeeded", "skipped"}, {"gate", "succeeded:true", "succeeded:false"},
				{"small", "skipped", "succeeded"}}, outputOps: []string{"replace /route"}},
		{name: "now fails beats path", rec: diamond("succeeded", "succeeded", "skipped", `{}`),
			sim: withErr(diamond("failed", "failed", "skipped", ""), failedErr), verdict: VerdictNowFails,
			nodes: []NodeChange{{"big", "succeeded", "failed"}}, outputOps: []string{"remove ", "add /error"}},
		{name: "now succeeds", rec: withErr(diamond("failed", "failed", "skipped", ""), failedErr),
			sim: diamond("succeeded", "succeeded", "skipped", `{}`), verdict: VerdictNowSucceeds,
			nodes: []NodeChange{{"big", "failed", "succeeded"}}, outputOps: []string{"add ", "remove /error"}},
		{name: "both failed, other error", rec: withErr(diamond("failed", "failed", "skipped", ""), failedErr),
			sim:     withErr(diamond("failed", "failed", "skipped", ""), json.RawMessage(`{"code":"NODE_FAILED","message":"bang","nodeId":"big"}`)),
			verdict: VerdictOutputChanged, outputOps: []string{"replace /error/message"}},
		{name: "both failed alike", rec: withErr(diamond("failed", "failed", "skipped", ""), failedErr),
			sim: withErr(diamond("failed", "failed", "skipped", ""), failedErr), verdict: VerdictSame},
		{name: "added node is no path change", rec: diamond("succeeded", "succeeded", "skipped", `{}`),
			sim: func() Outcome {
				o := diamond("succeeded", "succeeded", "skipped", `{}`)
				o.Nodes["audit"] = NodeOutcome{Status: "succeeded", Port: "out"}
				return o
			}(), added: map[string]bool{"audit": true}, verdict: VerdictSame},
		{name: "removed node is a path change", rec: diamond("succeeded", "succeeded", "skipped", `{}`),
			sim: func() Outcome {
				o := diamond("succeeded", "succeeded", "skipped", `{}`)
				delete(o.Nodes, "small")
				return o
			}(), verdict: VerdictPathChanged, nodes: []NodeChange{{"small", "skipped", "none"}}},
		{name: "cancelled then succeeded", rec: diamond("cancelled", "succeeded", "skipped", ""),
			sim: diamond("succeeded", "succeeded", "skipped", ""), verdict: VerdictOutputChanged},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			verdict, d := Compare(tc.rec, tc.sim, tc.added)
			assert.Equal(t, tc.verdict, verdict)
			assert.Equal(t, tc.nodes, d.Nodes)
			var ops []string
			for _, op := range d.Output {
				ops = append(ops, op.Op+" "+op.Path)
			}
			assert.Equal(t, tc.outputOps, ops)
			assert.Equal(t, tc.truncated, d.Truncated)
		})
	}
}

func TestDiffBounds(t *testing.T) {
	a, b := map[string]int{}, map[string]int{}
	for i := range MaxDiffOps + 10 {
		a[strings.Repeat("k", i+1)] = i
		b[strings.Repeat("k", i+1)] = i + 1
	}
	ra, _ := json.Marshal(a)
	rb, _ := json.Marshal(b)
	ops, cut := diffJSON(ra, rb)
	assert.Len(t, ops, MaxDiffOps)
	assert.True(t, cut)

	big := `"` + strings.Repeat("x", 20<<10) + `"`
	ops, cut = diffJSON(json.RawMessage(`{"v":"small"}`), json.RawMessage(`{"v":`+big+`}`))
	require.Len(t, ops, 1)
	assert.False(t, cut)
	assert.Equal(t, map[string]any{"bytes": len(big)}, ops[0].To, "a large value is shown by its size")
	assert.Equal(t, "small", ops[0].From)

	ops, _ = diffJSON(json.RawMessage(`{"a/b":{"c~d":1}}`), json.RawMessage(`{"a/b":{"c~d":2}}`))
	require.Len(t, ops, 1)
	assert.Equal(t, "/a~1b/c~0d", ops[0].Path, "keys are escaped as JSON pointer tokens")
}

func TestAddedAndUnrecorded(t *testing.T) {
	rec := &graph.Document{Nodes: []graph.Node{{ID: "in"}, {ID: "gate"}, {ID: "big"}, {ID: "small"}}}
	draft := &graph.Document{Nodes: []graph.Node{{ID: "in"}, {ID: "gate"}, {ID: "big"}, {ID: "small"}, {ID: "audit"}}}
	assert.Equal(t, map[string]bool{"audit": true}, AddedNodes(rec, draft))

	sim := diamond("succeeded", "skipped", "succeeded", `{}`)
	sim.Nodes["audit"] = NodeOutcome{Status: "succeeded"}
	// big has no recording but the simulation skipped it: no note.
	assert.Equal(t, []string{"audit", "small"}, UsedUnrecorded([]string{"small", "big", "audit"}, sim))
	assert.Nil(t, UsedUnrecorded([]string{"big"}, sim))
}

func TestComparableError(t *testing.T) {
	live := comparableError(json.RawMessage(`{"code":"NODE_FAILED","message":"node flaky failed after 2 attempt(s): boom","nodeId":"flaky"}`))
	sim := comparableError(json.RawMessage(`{"code":"NODE_FAILED","message":"node flaky failed after 1 attempt(s): node \"flaky\" (simulated): boom","nodeId":"flaky"}`))
	assert.JSONEq(t, `{"code":"NODE_FAILED","message":"","nodeId":"flaky"}`, string(live))
	assert.Equal(t, live, sim, "messages are not compared")
	other := comparableError(json.RawMessage(`{"code":"NODE_FAILED","message":"x","nodeId":"other"}`))
	assert.NotEqual(t, live, other, "the failing node is")
	assert.Nil(t, comparableError(nil))
	assert.Nil(t, comparableError(json.RawMessage(`null`)))
}
