package graph

import (
	"encoding/json"
	"fmt"
)

// genGraph builds a valid graph of 3·blocks+2 nodes. Each block is a gate, an
// action (two inputs, a mapping) and a merge (three inputs, plus a fourth for
// the first `extra` blocks), chained through the previous block's merge, so
// edges = 6·blocks + extra + 1. blocks=66, extra=3 gives 200 nodes and 400
// edges with fan-in ≤ 4.
func genGraph(blocks, extra int) *Document {
	doc := &Document{
		SchemaVersion: 1,
		Schemas: map[string]json.RawMessage{
			"Item":  json.RawMessage(`{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"n":{"type":"number","minimum":0}}}`),
			"Notes": json.RawMessage(`{"type":"array","items":{"type":"string"}}`),
		},
		Toolsets: map[string]Toolset{"ops": {Tools: []string{"core.echo@1", "core.sleep@1"}, Skill: "Use the tools sparingly."}},
		Nodes:    []Node{{ID: "in", Kind: KindInput, Outputs: map[string]string{"out": "Item"}}},
	}
	edge := func(from, to string) { doc.Edges = append(doc.Edges, Edge{From: from, To: to}) }
	prev := "in.out"
	for k := range blocks {
		g, a, m := fmt.Sprintf("g%d", k), fmt.Sprintf("a%d", k), fmt.Sprintf("m%d", k)
		tmpl := fmt.Sprintf("block %d: {{ v }}", k)
		doc.Nodes = append(doc.Nodes,
			Node{ID: g, Kind: KindGate, Inputs: map[string]string{"in": "any"},
				Outputs: map[string]string{"pass": "any", "fail": "any"}, Language: LanguageCELv1,
				Expression: fmt.Sprintf("input != null && %d >= 0", k)},
			Node{ID: a, Kind: KindAction, Inputs: map[string]string{"p": "any", "q": "any"},
				Outputs: map[string]string{"out": "any"}, Action: &ActionRef{ID: "core.echo", Version: 1},
				Mapping: map[string]Mapping{
					"p":   {Pointer: strp("/p")},
					"q":   {Pointer: strp("/q/id")},
					"lit": {Literal: json.RawMessage(fmt.Sprintf(`{"k":%d,"tags":["a","b"],"f":1.5}`, k))},
					"t":   {Template: &tmpl, Bindings: map[string]string{"v": "/p"}},
				},
				Retry: &Retry{MaxAttempts: 3, InitialIntervalMs: 500, Backoff: 2}, TimeoutMs: 10_000},
			Node{ID: m, Kind: KindMerge, Inputs: map[string]string{"a": "any", "b": "any", "c": "any"},
				Outputs: map[string]string{"out": "any"}},
		)
		edge(prev, g+".in")
		edge(g+".pass", a+".p")
		edge(prev, a+".q")
		edge(a+".out", m+".a")
		edge(g+".fail", m+".b")
		edge(prev, m+".c")
		if k < extra {
			doc.Nodes[len(doc.Nodes)-1].Inputs["d"] = "any"
			edge(g+".pass", m+".d")
		}
		prev = m + ".out"
	}
	doc.Nodes = append(doc.Nodes, Node{ID: "out", Kind: KindOutput, Inputs: map[string]string{"in": "any"}})
	edge(prev, "out.in")
	return doc
}
