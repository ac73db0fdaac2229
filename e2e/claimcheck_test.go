package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/weftworks/weft/execution"
)

// maxHistoryPayload is the largest Temporal payload a run may put in its
// history: values over 32 KiB travel by reference (claim check).
const maxHistoryPayload = 64 << 10

// bigGraph: the 1 MiB input is echoed (a 1 MiB node output), merged with a
// small value and returned.
const bigGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "big", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "small", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1},
     "mapping": {"tag": {"literal": "s"}}},
    {"id": "join", "kind": "merge", "inputs": {"big": "any", "small": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "big.in"}, {"from": "in.out", "to": "small.in"},
    {"from": "big.out", "to": "join.big"}, {"from": "small.out", "to": "join.small"},
    {"from": "join.out", "to": "out.in"}
  ]
}`

// hugeGraph: five 1 MiB echoes merged: the merge's output exceeds the
// 4 MiB value limit.
func hugeGraph() string {
	nodes := []string{`{"id": "in", "kind": "input", "outputs": {"out": "any"}}`}
	var edges, ports []string
	for i := range 5 {
		nodes = append(nodes, fmt.Sprintf(`{"id": "e%d", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}}`, i))
		edges = append(edges, fmt.Sprintf(`{"from": "in.out", "to": "e%d.in"}`, i), fmt.Sprintf(`{"from": "e%d.out", "to": "join.p%d"}`, i, i))
		ports = append(ports, fmt.Sprintf(`"p%d": "any"`, i))
	}
	nodes = append(nodes, `{"id": "join", "kind": "merge", "inputs": {`+strings.Join(ports, ", ")+`}, "outputs": {"out": "any"}}`,
		`{"id": "out", "kind": "output", "inputs": {"in": "any"}}`)
	edges = append(edges, `{"from": "join.out", "to": "out.in"}`)
	return `{"schemaVersion": 1, "nodes": [` + strings.Join(nodes, ", ") + `], "edges": [` + strings.Join(edges, ", ") + `]}`
}

// fanInGraph: eight echoes of the input feed a merge and an action with
// eight input ports each; their results are merged and returned.
func fanInGraph() string {
	nodes := []string{`{"id": "in", "kind": "input", "outputs": {"out": "any"}}`}
	var edges, ports, mapping []string
	for i := range 8 {
		nodes = append(nodes, fmt.Sprintf(`{"id": "a%d", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}}`, i))
		edges = append(edges, fmt.Sprintf(`{"from": "in.out", "to": "a%d.in"}`, i),
			fmt.Sprintf(`{"from": "a%d.out", "to": "join.p%d"}`, i, i), fmt.Sprintf(`{"from": "a%d.out", "to": "pack.p%d"}`, i, i))
		ports = append(ports, fmt.Sprintf(`"p%d": "any"`, i))
		mapping = append(mapping, fmt.Sprintf(`"p%d": {"pointer": "/p%d"}`, i, i))
	}
	nodes = append(nodes,
		`{"id": "join", "kind": "merge", "inputs": {`+strings.Join(ports, ", ")+`}, "outputs": {"out": "any"}}`,
		`{"id": "pack", "kind": "action", "inputs": {`+strings.Join(ports, ", ")+`}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}, "mapping": {`+strings.Join(mapping, ", ")+`}}`,
		`{"id": "fin", "kind": "merge", "inputs": {"join": "any", "pack": "any"}, "outputs": {"out": "any"}}`,
		`{"id": "out", "kind": "output", "inputs": {"in": "any"}}`)
	edges = append(edges, `{"from": "join.out", "to": "fin.join"}`, `{"from": "pack.out", "to": "fin.pack"}`, `{"from": "fin.out", "to": "out.in"}`)
	return `{"schemaVersion": 1, "nodes": [` + strings.Join(nodes, ", ") + `], "edges": [` + strings.Join(edges, ", ") + `]}`
}

// mibInput is an input of exactly 1 MiB of JSON (the enqueue limit).
func mibInput() map[string]string {
	return map[string]string{"blob": strings.Repeat("x", 1<<20-len(`{"blob":""}`))}
}

// largestHistoryPayload reads the whole history of the workflow (every
// execution of a continue-as-new chain, from the latest back to the first)
// and returns the largest Temporal payload in it, how many payloads there
// were and how many executions the chain has.
func (e *env) largestHistoryPayload(workflowID string) (largest, count, executions int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for runID := ""; ; executions++ {
		it := e.tc.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		events, previous := 0, ""
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(e.t, err)
			events++
			if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
				previous = a.GetContinuedExecutionRunId()
			}
			walkPayloads(ev.ProtoReflect(), func(p *commonpb.Payload) {
				count++
				largest = max(largest, proto.Size(p))
			})
		}
		require.NotZero(e.t, events)
		if previous == "" {
			return largest, count, executions + 1
		}
		runID = previous
	}
}

// walkPayloads calls f for every temporal.api.common.v1.Payload nested
// anywhere in m (inputs, results, markers, failures, memos, headers).
func walkPayloads(m protoreflect.Message, f func(*commonpb.Payload)) {
	if p, ok := m.Interface().(*commonpb.Payload); ok {
		f(p)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			l := v.List()
			for i := range l.Len() {
				walkPayloads(l.Get(i).Message(), f)
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				walkPayloads(mv.Message(), f)
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			walkPayloads(v.Message(), f)
		}
		return true
	})
}

func TestLargeValuesTravelByReference(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("big", bigGraph)
	input := mibInput()
	id := e.run("big", input)
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "error: %+v events: %v", v.Error, e.eventTypes(id))

	// The API returns the resolved value, not a reference.
	var out struct {
		Big   map[string]string `json:"big"`
		Small map[string]string `json:"small"`
	}
	require.NoError(t, json.Unmarshal(v.Output, &out))
	require.Equal(t, map[string]string{"tag": "s"}, out.Small)
	require.Equal(t, len(input["blob"]), len(out.Big["blob"]), "the 1 MiB value came through the merge whole")
	require.Equal(t, input["blob"], out.Big["blob"])
	require.Greater(t, len(v.Output), 1<<20)

	// Events carry references for the large values.
	refs := map[string]*execution.ValueRef{}
	for _, ev := range e.events(id) {
		var d execution.EventData
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		if ev.Type == execution.EventNodeCompleted || ev.Type == execution.EventRunSucceeded {
			key := ev.NodeID
			if ev.Type == execution.EventRunSucceeded {
				key = "run"
			}
			refs[key] = d.OutputRef
		}
	}
	for _, n := range []string{"in", "big", "join", "out", "run"} {
		require.NotNil(t, refs[n], "%s completed without a reference", n)
		require.GreaterOrEqual(t, refs[n].Size, 1<<20, n)
	}
	require.Nil(t, refs["small"], "a small value stays inline")
	// Stored under (tenant, run, node, port, sha256).
	var stored []string
	rows, err := e.st.Pool.Query(context.Background(), `SELECT node_id || '.' || port FROM run_values WHERE tenant_id = $1 AND run_id = $2 ORDER BY 1`, e.tenant, id)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		stored = append(stored, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"big.out", "in.out", "join.out"}, stored)

	// No payload in the Temporal history comes near the value.
	largest, count, _ := e.largestHistoryPayload(v.Temporal.WorkflowID)
	require.NotZero(t, count)
	require.LessOrEqual(t, largest, maxHistoryPayload, "a history payload of %d bytes", largest)
	t.Logf("history: %d payloads, largest %d bytes", count, largest)
	e.checkChain(id)
}

func TestOversizedValueFailsTheNodeAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("huge", hugeGraph())
	id := e.run("huge", mibInput())
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusFailed, v.Status)
	require.NotNil(t, v.Error)
	require.Equal(t, execution.RunErrNodeFailed, v.Error.Code)
	require.Equal(t, "join", v.Error.NodeID)
	require.Contains(t, v.Error.Message, `node "join" produced`)

	var failed *execution.EventData
	for _, ev := range e.events(id) {
		if ev.Type == execution.EventNodeFailed {
			failed = &execution.EventData{}
			require.NoError(t, json.Unmarshal(ev.Data, failed))
			require.Equal(t, "join", ev.NodeID)
		}
		require.NotEqual(t, execution.EventNodeRetryScheduled, ev.Type, "an oversized value is never retried")
	}
	require.NotNil(t, failed)
	require.Equal(t, execution.ErrPayloadTooLarge, failed.Error.Type)
	require.Equal(t, 1, failed.Attempts)

	largest, _, _ := e.largestHistoryPayload(v.Temporal.WorkflowID)
	require.LessOrEqual(t, largest, maxHistoryPayload, "a history payload of %d bytes", largest)
	e.checkChain(id)
}

// TestWideNodeInputsStayOutOfHistory: eight 20 KiB values meet in a merge
// and in an action with eight input ports. Each is under the 32 KiB inline
// limit, but together (160 KiB) they would be one activity input recorded
// in the history; the interpreter claim-checks them first.
func TestWideNodeInputsStayOutOfHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startWorker()
	e.publish("fanin", fanInGraph())
	blob := strings.Repeat("x", 20<<10-len(`{"blob":""}`))
	id := e.run("fanin", map[string]string{"blob": blob})
	v := e.wait(id, 60*time.Second)
	require.Equal(t, execution.StatusSucceeded, v.Status, "error: %+v events: %v", v.Error, e.eventTypes(id))

	var out struct {
		Join map[string]map[string]string `json:"join"`
		Pack map[string]map[string]string `json:"pack"`
	}
	require.NoError(t, json.Unmarshal(v.Output, &out))
	require.Len(t, out.Join, 8)
	require.Len(t, out.Pack, 8)
	for i := range 8 {
		p := fmt.Sprintf("p%d", i)
		require.Equal(t, blob, out.Join[p]["blob"], "join.%s", p)
		require.Equal(t, blob, out.Pack[p]["blob"], "pack.%s", p)
	}

	largest, count, _ := e.largestHistoryPayload(v.Temporal.WorkflowID)
	require.NotZero(t, count)
	require.LessOrEqual(t, largest, maxHistoryPayload, "a history payload of %d bytes", largest)
	t.Logf("history: %d payloads, largest %d bytes", count, largest)
	e.checkChain(id)
}
