package testinfra

import "fmt"

// ItemGraph is input → core.echo@1 → output; its input needs {"id": string}.
const ItemGraph = `{
  "schemaVersion": 1,
  "schemas": {"Item": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "minLength": 1}}}},
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "Item"}},
    {"id": "echo", "kind": "action", "inputs": {"in": "Item"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "echo.in"}, {"from": "echo.out", "to": "out.in"}]
}`

// NotesGraph writes a note titled "t" whose body is its input, so its runs
// need notes.write.
const NotesGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "save", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"},
     "action": {"id": "workspace.notes.write", "version": 1},
     "mapping": {"title": {"literal": "t"}, "body": {"pointer": "/in"}}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "save.in"}, {"from": "save.out", "to": "out.in"}]
}`

// RoutingGraph is docs/replays.md's order-routing diamond with the gate
// expression expr: pass goes to bulk, fail to single, two echoes a merge
// joins.
func RoutingGraph(expr string) string {
	return fmt.Sprintf(`{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "gate", "kind": "gate", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"},
     "language": "cel/v1", "expression": %q},
    {"id": "bulk", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "single", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "join", "kind": "merge", "inputs": {"bulk": "any", "single": "any"}, "outputs": {"out": "any"}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "gate.in"},
    {"from": "gate.pass", "to": "bulk.in"}, {"from": "gate.fail", "to": "single.in"},
    {"from": "bulk.out", "to": "join.bulk"}, {"from": "single.out", "to": "join.single"},
    {"from": "join.out", "to": "out.in"}
  ]
}`, expr)
}
