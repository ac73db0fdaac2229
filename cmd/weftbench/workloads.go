package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
)

// A workload is one graph weft runs and the workflow one would write by
// hand for Temporal to do the same work: the same activities (echo), the
// same fan-out and joins, the routing and merging in workflow code.
type workload struct {
	key   string          // weft workflow key
	graph json.RawMessage // weft graph document
	hand  string          // hand-written workflow type
	// nodes counts the graph's action nodes; activities, the ones a run
	// executes (what per-node figures divide by).
	nodes, activities int
}

// Hand-written baseline names.
const (
	handActivityName = "bench.Echo"
	handChainPrefix  = "bench.Chain"
	handFanOutName   = "bench.FanOut"
	handDiamondName  = "bench.Diamond"
)

// fanOutWidth is how many echo actions the fan-out workload runs at once.
const fanOutWidth = 10

// workloads are what the latency section measures, chain10 first (the
// throughput, enqueue and capacity sections use it).
func workloads() []workload {
	return []workload{
		{key: "chain10", graph: chainGraph(10), hand: handChainName(10), nodes: 10, activities: 10},
		{key: "fanout10", graph: fanOutGraph(fanOutWidth), hand: handFanOutName, nodes: fanOutWidth, activities: fanOutWidth},
		{key: "diamond", graph: diamondGraph(), hand: handDiamondName, nodes: 3, activities: 2}, // a, then b or c
		{key: "chain50", graph: chainGraph(50), hand: handChainName(50), nodes: 50, activities: 50},
	}
}

func handChainName(n int) string { return fmt.Sprintf("%s%d", handChainPrefix, n) }

var benchInput = json.RawMessage(`{"text":"hello from weftbench","n":42}`)

// Graph documents.

type doc struct {
	SchemaVersion int              `json:"schemaVersion"`
	Nodes         []map[string]any `json:"nodes"`
	Edges         []map[string]any `json:"edges"`
}

func echoNode(id string) map[string]any {
	return map[string]any{"id": id, "kind": "action", "inputs": map[string]string{"in": "any"},
		"outputs": map[string]string{"out": "any"}, "action": map[string]any{"id": "core.echo", "version": 1}}
}

func edge(from, to string) map[string]any { return map[string]any{"from": from, "to": to} }

func marshal(d doc) json.RawMessage {
	raw, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	return raw
}

// chainGraph is input → e1 → … → en → output, every e a core.echo@1 action.
func chainGraph(n int) json.RawMessage {
	d := doc{SchemaVersion: 1, Nodes: []map[string]any{{"id": "in", "kind": "input", "outputs": map[string]string{"out": "any"}}}}
	prev := "in"
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("e%d", i)
		d.Nodes = append(d.Nodes, echoNode(id))
		d.Edges = append(d.Edges, edge(prev+".out", id+".in"))
		prev = id
	}
	d.Nodes = append(d.Nodes, map[string]any{"id": "out", "kind": "output", "inputs": map[string]string{"in": "any"}})
	d.Edges = append(d.Edges, edge(prev+".out", "out.in"))
	return marshal(d)
}

// fanOutGraph is input → n echo actions at once → merge → output.
func fanOutGraph(n int) json.RawMessage {
	d := doc{SchemaVersion: 1, Nodes: []map[string]any{{"id": "in", "kind": "input", "outputs": map[string]string{"out": "any"}}}}
	mergeInputs := map[string]string{}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("f%d", i)
		d.Nodes = append(d.Nodes, echoNode(id))
		d.Edges = append(d.Edges, edge("in.out", id+".in"), edge(id+".out", "m.p"+id))
		mergeInputs["p"+id] = "any"
	}
	d.Nodes = append(d.Nodes,
		map[string]any{"id": "m", "kind": "merge", "inputs": mergeInputs, "outputs": map[string]string{"out": "any"}},
		map[string]any{"id": "out", "kind": "output", "inputs": map[string]string{"in": "any"}})
	d.Edges = append(d.Edges, edge("m.out", "out.in"))
	return marshal(d)
}

// diamondGraph is input → a → gate(n > 2) → pass: b | fail: c → merge → output.
func diamondGraph() json.RawMessage {
	return marshal(doc{SchemaVersion: 1,
		Nodes: []map[string]any{
			{"id": "in", "kind": "input", "outputs": map[string]string{"out": "any"}},
			echoNode("a"),
			{"id": "g", "kind": "gate", "inputs": map[string]string{"in": "any"},
				"outputs": map[string]string{"pass": "any", "fail": "any"}, "language": "cel/v1", "expression": "input.n > 2"},
			echoNode("b"), echoNode("c"),
			{"id": "m", "kind": "merge", "inputs": map[string]string{"pass": "any", "fail": "any"}, "outputs": map[string]string{"out": "any"}},
			{"id": "out", "kind": "output", "inputs": map[string]string{"in": "any"}},
		},
		Edges: []map[string]any{
			edge("in.out", "a.in"), edge("a.out", "g.in"), edge("g.pass", "b.in"), edge("g.fail", "c.in"),
			edge("b.out", "m.pass"), edge("c.out", "m.fail"), edge("m.out", "out.in"),
		}})
}

// Hand-written workflows: each activity with a summary, as weft gives its
// attempts; routing and merging in workflow code.

func handOptions(ctx workflow.Context, summary string) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second, Summary: summary})
}

func handChain(n int) func(workflow.Context, json.RawMessage) (json.RawMessage, error) {
	return func(ctx workflow.Context, input json.RawMessage) (json.RawMessage, error) {
		v := input
		for i := 1; i <= n; i++ {
			if err := workflow.ExecuteActivity(handOptions(ctx, fmt.Sprintf("e%d · echo", i)), handActivityName, v).Get(ctx, &v); err != nil {
				return nil, err
			}
		}
		return v, nil
	}
}

func handFanOut(ctx workflow.Context, input json.RawMessage) (json.RawMessage, error) {
	futures := make([]workflow.Future, fanOutWidth)
	for i := range futures {
		futures[i] = workflow.ExecuteActivity(handOptions(ctx, fmt.Sprintf("f%d · echo", i+1)), handActivityName, input)
	}
	merged := map[string]json.RawMessage{}
	for i, f := range futures {
		var v json.RawMessage
		if err := f.Get(ctx, &v); err != nil {
			return nil, err
		}
		merged[fmt.Sprintf("pf%d", i+1)] = v
	}
	return json.Marshal(merged)
}

func handDiamond(ctx workflow.Context, input json.RawMessage) (json.RawMessage, error) {
	var v json.RawMessage
	if err := workflow.ExecuteActivity(handOptions(ctx, "a · echo"), handActivityName, input).Get(ctx, &v); err != nil {
		return nil, err
	}
	var in struct{ N int }
	if err := json.Unmarshal(v, &in); err != nil {
		return nil, err
	}
	branch, port := "b", "pass"
	if in.N <= 2 {
		branch, port = "c", "fail"
	}
	var out json.RawMessage
	if err := workflow.ExecuteActivity(handOptions(ctx, branch+" · echo"), handActivityName, v).Get(ctx, &out); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]json.RawMessage{port: out})
}

func handEcho(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil }
