package testinfra

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
