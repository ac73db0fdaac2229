package graph

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// cycleJSON is a graph whose merge feeds a gate that feeds the merge back.
const cycleJSON = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "m", "kind": "merge", "inputs": {"a": "any", "b": "any"}, "outputs": {"out": "any"}},
    {"id": "g", "kind": "gate", "inputs": {"in": "any"}, "outputs": {"pass": "any", "fail": "any"},
     "language": "cel/v1", "expression": "true"},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [
    {"from": "in.out", "to": "m.a"}, {"from": "m.out", "to": "g.in"},
    {"from": "g.pass", "to": "m.b"}, {"from": "g.fail", "to": "out.in"}
  ]
}`

// agentNode is a valid agent node fed by the example's gate.
func agentNode(id string) Node {
	return Node{ID: id, Kind: KindAgent, Inputs: map[string]string{"in": "Item"},
		Outputs: map[string]string{"out": "any"}, Agent: &AgentRef{Key: "triage", Revision: 2}}
}

func strp(s string) *string { return &s }

type stubTemplates struct{}

func (stubTemplates) CheckTemplate(tmpl string, _ map[string]string) ([]string, []Issue) {
	if strings.Contains(tmpl, "nope") {
		return nil, []Issue{{Code: CodeUnknownVariable, Message: "unknown variable nope"}}
	}
	return []string{"variables.read"}, nil
}

func TestValidateExampleIsClean(t *testing.T) {
	require.Empty(t, Validate(exampleDoc(t), testCatalog()))
}

func TestValidateCodes(t *testing.T) {
	cases := []struct {
		name   string
		base   string // JSON; the SPEC example when empty
		mutate func(d *Document)
		opts   Options
		code   string
		path   string
	}{
		{name: "cycle", base: cycleJSON, code: CodeCycle, path: "/edges/1"},
		{name: "self loop", mutate: func(d *Document) {
			d.Nodes[2].Inputs["again"] = "any"
			d.Nodes[2].Mapping["again"] = Mapping{Pointer: strp("/again")}
			d.Edges = append(d.Edges, Edge{From: "save.out", To: "save.again"})
		}, code: CodeCycle, path: "/edges/3"},
		{name: "edge to missing node", mutate: func(d *Document) {
			d.Edges = append(d.Edges, Edge{From: "save.out", To: "ghost.in"})
		}, code: CodeDanglingEdge, path: "/edges/3/to"},
		{name: "edge from missing node", mutate: func(d *Document) {
			d.Edges[0].From = "ghost.out"
		}, code: CodeDanglingEdge, path: "/edges/0/from"},
		{name: "endpoint without port", mutate: func(d *Document) {
			d.Edges[1].To = "save"
		}, code: CodeDanglingEdge, path: "/edges/1/to"},
		{name: "input port without edge", mutate: func(d *Document) {
			d.Edges = d.Edges[:2]
		}, code: CodeDanglingEdge, path: "/nodes/3/inputs/in"},
		{name: "unreachable node", mutate: func(d *Document) {
			d.Edges = d.Edges[1:]
		}, code: CodeUnreachableNode, path: "/nodes/1"},
		{name: "no input node", mutate: func(d *Document) {
			d.Nodes[0].Kind = KindMerge
		}, code: CodeUnreachableNode, path: "/nodes"},
		{name: "no output node", mutate: func(d *Document) {
			d.Nodes = d.Nodes[:3]
			d.Edges = d.Edges[:2]
		}, code: CodeMissingOutput, path: "/nodes"},
		{name: "no reachable output", mutate: func(d *Document) {
			d.Edges[2].From = "ghost.out"
		}, code: CodeMissingOutput, path: "/nodes"},
		{name: "edge schemas differ", mutate: func(d *Document) {
			d.Nodes[3].Inputs["in"] = "Item"
		}, code: CodeIncompatiblePort, path: "/edges/2"},
		{name: "gate output claims another schema", mutate: func(d *Document) {
			d.Schemas["Other"] = json.RawMessage(`{"type":"object"}`)
			d.Nodes[1].Outputs["fail"] = "Other"
		}, code: CodeIncompatiblePort, path: "/nodes/1/outputs/fail"},
		{name: "undeclared source port", mutate: func(d *Document) {
			d.Edges[1].From = "check.maybe"
		}, code: CodeUnknownPort, path: "/edges/1/from"},
		{name: "input port used as source", mutate: func(d *Document) {
			d.Edges[1].From = "check.in"
		}, code: CodeUnknownPort, path: "/edges/1/from"},
		{name: "undeclared target port", mutate: func(d *Document) {
			d.Edges[2].To = "out.other"
		}, code: CodeUnknownPort, path: "/edges/2/to"},
		{name: "second edge into a port", mutate: func(d *Document) {
			d.Edges = append(d.Edges, Edge{From: "check.fail", To: "save.in"})
		}, code: CodeInvalidNode, path: "/edges/3/to"},
		{name: "duplicate node", mutate: func(d *Document) {
			d.Nodes = append(d.Nodes, d.Nodes[2])
		}, code: CodeDuplicateNode, path: "/nodes/4/id"},
		{name: "action version missing", mutate: func(d *Document) {
			d.Nodes[2].Action.Version = 2
		}, code: CodeMissingDependency, path: "/nodes/2/action"},
		{name: "agent revision missing", mutate: func(d *Document) {
			n := agentNode("save")
			n.Agent.Revision = 3
			d.Nodes[2] = n
		}, code: CodeMissingDependency, path: "/nodes/2/agent"},
		{name: "agent archived", mutate: func(d *Document) {
			n := agentNode("save")
			n.Agent = &AgentRef{Key: "old", Revision: 1}
			d.Nodes[2] = n
		}, code: CodeMissingDependency, path: "/nodes/2/agent"},
		{name: "toolset tool missing", mutate: func(d *Document) {
			d.Toolsets = map[string]Toolset{"ops": {Tools: []string{"core.echo@1", "core.echo@9"}, Skill: "Be brief."}}
		}, code: CodeMissingDependency, path: "/toolsets/ops/tools/1"},
		{name: "external action", mutate: func(d *Document) {
			d.Nodes[2].Action = &ActionRef{ID: "core.http.fetch", Version: 1}
		}, code: CodeUnsupportedActionRisk, path: "/nodes/2/action"},
		{name: "external tool in toolset", mutate: func(d *Document) {
			d.Toolsets = map[string]Toolset{"web": {Tools: []string{"core.http.fetch@1"}, Skill: "Fetch."}}
		}, code: CodeUnsupportedActionRisk, path: "/toolsets/web/tools/0"},
		{name: "too many attempts", mutate: func(d *Document) {
			d.Nodes[2].Retry.MaxAttempts = 11
		}, code: CodeLimitExceeded, path: "/nodes/2/retry/maxAttempts"},
		{name: "timeout too short", mutate: func(d *Document) {
			d.Nodes[2].TimeoutMs = 100
		}, code: CodeLimitExceeded, path: "/nodes/2/timeoutMs"},
		{name: "timeout too long", mutate: func(d *Document) {
			d.Nodes[1].TimeoutMs = 600_001
		}, code: CodeLimitExceeded, path: "/nodes/1/timeoutMs"},
		{name: "expression too long", mutate: func(d *Document) {
			d.Nodes[1].Expression = "true" + strings.Repeat(" ", 2000)
		}, code: CodeLimitExceeded, path: "/nodes/1/expression"},
		{name: "template too long", mutate: func(d *Document) {
			d.Nodes[2].Mapping["title"] = Mapping{Template: strp(strings.Repeat("é", 8001))}
		}, code: CodeLimitExceeded, path: "/nodes/2/mapping/title/template"},
		{name: "too many mapping entries", mutate: func(d *Document) {
			for k := range 64 {
				d.Nodes[2].Mapping[fmt.Sprintf("f%d", k)] = Mapping{Literal: json.RawMessage("1")}
			}
		}, code: CodeLimitExceeded, path: "/nodes/2/mapping"},
		{name: "too many nodes", mutate: func(d *Document) {
			for k := range 200 {
				d.Nodes = append(d.Nodes, Node{ID: fmt.Sprintf("x%d", k), Kind: KindMerge})
			}
		}, code: CodeLimitExceeded, path: "/nodes"},
		{name: "too many edges", mutate: func(d *Document) {
			for range 400 {
				d.Edges = append(d.Edges, d.Edges[0])
			}
		}, code: CodeLimitExceeded, path: "/edges"},
		{name: "too many schemas", mutate: func(d *Document) {
			for k := range 64 {
				d.Schemas[fmt.Sprintf("S%d", k)] = json.RawMessage(`{}`)
			}
		}, code: CodeLimitExceeded, path: "/schemas"},
		{name: "fan-in", mutate: func(d *Document) {
			m := Node{ID: "m", Kind: KindMerge, Inputs: map[string]string{}, Outputs: map[string]string{"out": "any"}}
			for k := range 33 {
				m.Inputs[fmt.Sprintf("p%d", k)] = "any"
				d.Edges = append(d.Edges, Edge{From: "in.out", To: fmt.Sprintf("m.p%d", k)})
			}
			d.Nodes = append(d.Nodes, m)
		}, code: CodeLimitExceeded, path: "/nodes/4/inputs"},
		{name: "expression does not parse", mutate: func(d *Document) {
			d.Nodes[1].Expression = "input.id +"
		}, code: CodeInvalidExpression, path: "/nodes/1/expression"},
		{name: "expression is not bool", mutate: func(d *Document) {
			d.Nodes[1].Expression = "'text'"
		}, code: CodeInvalidExpression, path: "/nodes/1/expression"},
		{name: "expression uses unknown variable", mutate: func(d *Document) {
			d.Nodes[1].Expression = "item.id != ''"
		}, code: CodeInvalidExpression, path: "/nodes/1/expression"},
		{name: "expression uses an extension function", mutate: func(d *Document) {
			d.Nodes[1].Expression = "input.id.lowerAscii() == 'a'"
		}, code: CodeInvalidExpression, path: "/nodes/1/expression"},
		{name: "empty expression", mutate: func(d *Document) {
			d.Nodes[1].Expression = ""
		}, code: CodeInvalidExpression, path: "/nodes/1/expression"},
		{name: "gate language", mutate: func(d *Document) {
			d.Nodes[1].Language = "js"
		}, code: CodeInvalidExpression, path: "/nodes/1/language"},
		{name: "schema does not compile", mutate: func(d *Document) {
			d.Schemas["Item"] = json.RawMessage(`{"type": 12}`)
		}, code: CodeInvalidSchema, path: "/schemas/Item"},
		{name: "schema references the network", mutate: func(d *Document) {
			d.Schemas["Item"] = json.RawMessage(`{"$ref": "https://example.com/item.json"}`)
		}, code: CodeInvalidSchema, path: "/schemas/Item"},
		{name: "schema name reserved", mutate: func(d *Document) {
			d.Schemas["any"] = json.RawMessage(`{}`)
		}, code: CodeInvalidSchema, path: "/schemas/any"},
		{name: "port names unknown schema", mutate: func(d *Document) {
			d.Nodes[0].Outputs["out"] = "Thing"
		}, code: CodeInvalidSchema, path: "/nodes/0/outputs/out"},
		{name: "validator names unknown schema", mutate: func(d *Document) {
			d.Nodes[1] = Node{ID: "check", Kind: KindValidator, Inputs: map[string]string{"in": "Item"},
				Outputs: map[string]string{"pass": "Item", "fail": "any"}, Schema: json.RawMessage(`"Thing"`)}
		}, code: CodeInvalidSchema, path: "/nodes/1/schema"},
		{name: "validator inline schema broken", mutate: func(d *Document) {
			d.Nodes[1] = Node{ID: "check", Kind: KindValidator, Inputs: map[string]string{"in": "Item"},
				Outputs: map[string]string{"pass": "Item", "fail": "any"}, Schema: json.RawMessage(`{"minimum": "x"}`)}
		}, code: CodeInvalidSchema, path: "/nodes/1/schema"},
		{name: "pointer to unknown port", mutate: func(d *Document) {
			d.Nodes[2].Mapping["body"] = Mapping{Pointer: strp("/nope")}
		}, code: CodeInvalidMapping, path: "/nodes/2/mapping/body/pointer"},
		{name: "pointer syntax", mutate: func(d *Document) {
			d.Nodes[2].Mapping["body"] = Mapping{Pointer: strp("/in/~2")}
		}, code: CodeInvalidMapping, path: "/nodes/2/mapping/body/pointer"},
		{name: "pointer without leading slash", mutate: func(d *Document) {
			d.Nodes[2].Mapping["body"] = Mapping{Pointer: strp("in")}
		}, code: CodeInvalidMapping, path: "/nodes/2/mapping/body/pointer"},
		{name: "entry with two sources", mutate: func(d *Document) {
			d.Nodes[2].Mapping["body"] = Mapping{Pointer: strp("/in"), Literal: json.RawMessage(`"x"`)}
		}, code: CodeInvalidMapping, path: "/nodes/2/mapping/body"},
		{name: "entry with no source", mutate: func(d *Document) {
			d.Nodes[2].Mapping["body"] = Mapping{}
		}, code: CodeInvalidMapping, path: "/nodes/2/mapping/body"},
		{name: "binding to unknown port", mutate: func(d *Document) {
			d.Nodes[2].Mapping["title"].Bindings["item.id"] = "/other/id"
		}, code: CodeInvalidMapping, path: "/nodes/2/mapping/title/bindings/item.id"},
		{name: "mapping on a gate", mutate: func(d *Document) {
			d.Nodes[1].Mapping = map[string]Mapping{"x": {Pointer: strp("/in")}}
		}, code: CodeInvalidMapping, path: "/nodes/1/mapping"},
		{name: "several inputs and no mapping", mutate: func(d *Document) {
			d.Nodes[2].Mapping = nil
			d.Nodes[2].Inputs["raw"] = "Item"
			d.Edges = append(d.Edges, Edge{From: "in.out", To: "save.raw"})
		}, code: CodeInvalidMapping, path: "/nodes/2/mapping"},
		{name: "unknown variable via hook", opts: Options{Templates: stubTemplates{}}, mutate: func(d *Document) {
			d.Nodes[2].Mapping["title"] = Mapping{Template: strp("{{ nope }}")}
		}, code: CodeUnknownVariable, path: "/nodes/2/mapping/title/template"},
		{name: "default toolset missing", mutate: func(d *Document) {
			d.Tools = "ops"
		}, code: CodeInvalidToolsPath, path: "/tools"},
		{name: "node toolset missing", mutate: func(d *Document) {
			n := agentNode("save")
			n.Tools = "ops"
			d.Nodes[2] = n
		}, code: CodeInvalidToolsPath, path: "/nodes/2/tools"},
		{name: "tools on an action", mutate: func(d *Document) {
			d.Toolsets = map[string]Toolset{"ops": {Tools: []string{"core.echo@1"}, Skill: "x"}}
			d.Nodes[2].Tools = "ops"
		}, code: CodeInvalidToolsPath, path: "/nodes/2/tools"},
		{name: "toolset tool not id@version", mutate: func(d *Document) {
			d.Toolsets = map[string]Toolset{"ops": {Tools: []string{"core.echo"}, Skill: "x"}}
		}, code: CodeInvalidToolsPath, path: "/toolsets/ops/tools/0"},
		{name: "toolset without skill", mutate: func(d *Document) {
			d.Toolsets = map[string]Toolset{"ops": {Tools: []string{"core.echo@1"}, Skill: " "}}
		}, code: CodeInvalidToolsPath, path: "/toolsets/ops/skill"},
		{name: "toolset name is a URL", mutate: func(d *Document) {
			d.Toolsets = map[string]Toolset{"https://x/y": {Tools: []string{"core.echo@1"}, Skill: "x"}}
		}, code: CodeInvalidToolsPath, path: "/toolsets/https:~1~1x~1y"},
		{name: "default tools an uncaptured folder path", mutate: func(d *Document) {
			d.Toolsets = map[string]Toolset{"shared": {Tools: []string{"core.echo@1"}, Skill: "x"}}
			d.Tools = "./tools/shared"
		}, code: CodeInvalidToolsPath, path: "/tools"},
		{name: "node tools a file URL", mutate: func(d *Document) {
			n := agentNode("save")
			n.Tools = "file:///etc/tools"
			d.Nodes[2] = n
		}, code: CodeInvalidToolsPath, path: "/nodes/2/tools"},
		{name: "unknown kind", mutate: func(d *Document) {
			d.Nodes[1].Kind = "loop"
		}, code: CodeInvalidNode, path: "/nodes/1/kind"},
		{name: "bad id", mutate: func(d *Document) {
			d.Nodes[3].ID = "Out"
		}, code: CodeInvalidNode, path: "/nodes/3/id"},
		{name: "input with an input port", mutate: func(d *Document) {
			d.Nodes[0].Inputs = map[string]string{"x": "any"}
		}, code: CodeInvalidNode, path: "/nodes/0/inputs"},
		{name: "two input nodes", mutate: func(d *Document) {
			d.Nodes = append(d.Nodes, Node{ID: "in2", Kind: KindInput, Outputs: map[string]string{"out": "any"}})
		}, code: CodeInvalidNode, path: "/nodes/4/kind"},
		{name: "gate with two inputs", mutate: func(d *Document) {
			d.Nodes[1].Inputs["other"] = "Item"
		}, code: CodeInvalidNode, path: "/nodes/1/inputs"},
		{name: "gate with an extra output", mutate: func(d *Document) {
			d.Nodes[1].Outputs["maybe"] = "Item"
		}, code: CodeInvalidNode, path: "/nodes/1/outputs/maybe"},
		{name: "gate without fail", mutate: func(d *Document) {
			delete(d.Nodes[1].Outputs, "fail")
		}, code: CodeInvalidNode, path: "/nodes/1/outputs"},
		{name: "action output named wrong", mutate: func(d *Document) {
			d.Nodes[2].Outputs = map[string]string{"result": "any"}
		}, code: CodeInvalidNode, path: "/nodes/2/outputs/result"},
		{name: "merge out typed", mutate: func(d *Document) {
			d.Nodes = append(d.Nodes, Node{ID: "m", Kind: KindMerge, Inputs: map[string]string{"a": "Item"}, Outputs: map[string]string{"out": "Item"}})
			d.Edges = append(d.Edges, Edge{From: "check.fail", To: "m.a"})
		}, code: CodeInvalidNode, path: "/nodes/4/outputs/out"},
		{name: "output with an output port", mutate: func(d *Document) {
			d.Nodes[3].Outputs = map[string]string{"out": "any"}
		}, code: CodeInvalidNode, path: "/nodes/3/outputs/out"},
		{name: "action without action", mutate: func(d *Document) {
			d.Nodes[2].Action = nil
		}, code: CodeInvalidNode, path: "/nodes/2/action"},
		{name: "agent without agent", mutate: func(d *Document) {
			n := agentNode("save")
			n.Agent = nil
			d.Nodes[2] = n
		}, code: CodeInvalidNode, path: "/nodes/2/agent"},
		{name: "expression on an action", mutate: func(d *Document) {
			d.Nodes[2].Expression = "true"
		}, code: CodeInvalidNode, path: "/nodes/2/expression"},
		{name: "retry on an output", mutate: func(d *Document) {
			d.Nodes[3].Retry = &Retry{MaxAttempts: 2}
		}, code: CodeInvalidNode, path: "/nodes/3/retry"},
		{name: "backoff below one", mutate: func(d *Document) {
			d.Nodes[2].Retry.Backoff = 0.5
		}, code: CodeInvalidNode, path: "/nodes/2/retry/backoff"},
		{name: "bad port name", mutate: func(d *Document) {
			d.Nodes[3].Inputs = map[string]string{"a.b": "any"}
		}, code: CodeInvalidNode, path: "/nodes/3/inputs/a.b"},
		{name: "schemaVersion", mutate: func(d *Document) {
			d.SchemaVersion = 2
		}, code: CodeInvalidDocument, path: "/schemaVersion"},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.code] = true
		t.Run(tc.name, func(t *testing.T) {
			var doc *Document
			if tc.base != "" {
				var err error
				doc, err = Decode([]byte(tc.base))
				require.NoError(t, err)
			} else {
				doc = exampleDoc(t)
			}
			if tc.mutate != nil {
				tc.mutate(doc)
			}
			issues := ValidateWith(doc, testCatalog(), tc.opts)
			require.Containsf(t, issueKeys(issues), tc.code+" "+tc.path, "issues: %v", issues)
			c, compileIssues := CompileWith(doc, testCatalog(), tc.opts)
			require.Nil(t, c)
			require.Equal(t, issues, compileIssues)
		})
	}
	for _, code := range []string{CodeCycle, CodeDanglingEdge, CodeUnreachableNode, CodeMissingOutput,
		CodeIncompatiblePort, CodeUnknownPort, CodeDuplicateNode, CodeMissingDependency,
		CodeUnsupportedActionRisk, CodeLimitExceeded, CodeInvalidExpression, CodeInvalidSchema,
		CodeInvalidMapping, CodeUnknownVariable, CodeInvalidToolsPath, CodeInvalidNode, CodeInvalidDocument} {
		require.Truef(t, covered[code], "no case for %s", code)
	}
}

func issueKeys(issues []Issue) []string {
	keys := make([]string, len(issues))
	for i, is := range issues {
		keys[i] = is.Code + " " + is.Path
	}
	return keys
}

func TestValidateReturnsAllIssues(t *testing.T) {
	doc := exampleDoc(t)
	doc.Nodes[1].Expression = "input.id +"                             // INVALID_EXPRESSION
	doc.Nodes[2].Action.Version = 7                                    // MISSING_DEPENDENCY
	doc.Nodes[2].Retry.MaxAttempts = 50                                // LIMIT_EXCEEDED
	doc.Nodes[2].Mapping["body"] = Mapping{Pointer: strp("/nope")}     // INVALID_MAPPING
	doc.Nodes = append(doc.Nodes, doc.Nodes[3])                        // DUPLICATE_NODE
	doc.Edges = append(doc.Edges, Edge{From: "ghost.out", To: "x.in"}) // 2 x DANGLING_EDGE
	doc.Schemas["Bad"] = json.RawMessage(`{"type": "nope"}`)           // INVALID_SCHEMA
	doc.Tools = "missing"                                              // INVALID_TOOLS_PATH

	issues := Validate(doc, testCatalog())
	require.ElementsMatch(t, []string{
		"INVALID_SCHEMA /schemas/Bad",
		"INVALID_TOOLS_PATH /tools",
		"DUPLICATE_NODE /nodes/4/id",
		"INVALID_EXPRESSION /nodes/1/expression",
		"LIMIT_EXCEEDED /nodes/2/retry/maxAttempts",
		"MISSING_DEPENDENCY /nodes/2/action",
		"INVALID_MAPPING /nodes/2/mapping/body/pointer",
		"DANGLING_EDGE /edges/3/from",
		"DANGLING_EDGE /edges/3/to",
	}, issueKeys(issues))
	for _, is := range issues {
		require.NotEmpty(t, is.Message)
	}
	// Issues come in the same order every time.
	require.Equal(t, issues, Validate(doc, testCatalog()))
}

func TestValidateNilInputs(t *testing.T) {
	require.Equal(t, []string{"INVALID_DOCUMENT "}, issueKeys(Validate(nil, nil)))
	// A nil catalog resolves nothing instead of panicking.
	issues := Validate(exampleDoc(t), nil)
	require.Equal(t, []string{"MISSING_DEPENDENCY /nodes/2/action"}, issueKeys(issues))
}

func TestValidateWithTemplateScopes(t *testing.T) {
	c, issues := CompileWith(exampleDoc(t), testCatalog(), Options{Templates: stubTemplates{}})
	require.Empty(t, issues)
	require.Equal(t, []string{"notes.write", "variables.read"}, c.NodePermissions["save"])
	require.Equal(t, []string{"notes.write", "variables.read"}, c.Permissions)
}

func TestValidateAcceptsEveryKind(t *testing.T) {
	doc, err := Decode([]byte(`{
	  "schemaVersion": 1,
	  "schemas": {"Item": {"type": "object"}},
	  "toolsets": {"ops": {"tools": ["core.echo@1"], "skill": "Answer briefly."}},
	  "tools": "ops",
	  "nodes": [
	    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
	    {"id": "valid", "kind": "validator", "inputs": {"in": "any"}, "outputs": {"pass": "Item", "fail": "any"}, "schema": "Item"},
	    {"id": "inline", "kind": "validator", "inputs": {"in": "Item"}, "outputs": {"pass": "Item", "fail": "any"},
	     "schema": {"type": "object", "required": ["id"]}},
	    {"id": "think", "kind": "agent", "inputs": {"in": "Item"}, "outputs": {"out": "any"},
	     "agent": {"key": "triage", "revision": 2}, "tools": "ops", "retry": {"maxAttempts": 10}, "timeoutMs": 600000},
	    {"id": "decide", "kind": "agent-decision", "inputs": {"a": "any", "b": "Item"}, "outputs": {"pass": "any", "fail": "any"},
	     "agent": {"key": "triage", "revision": 2},
	     "mapping": {"answer": {"pointer": "/a"}, "item": {"pointer": "/b"}, "mode": {"literal": null}}},
	    {"id": "join", "kind": "merge", "inputs": {"yes": "any", "no": "any", "bad": "any"}, "outputs": {"out": "any"}},
	    {"id": "wait", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"},
	     "action": {"id": "core.sleep", "version": 1}, "mapping": {"ms": {"literal": 5}}, "timeoutMs": 250},
	    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
	  ],
	  "edges": [
	    {"from": "in.out", "to": "valid.in"},
	    {"from": "valid.pass", "to": "inline.in"},
	    {"from": "inline.pass", "to": "think.in"},
	    {"from": "think.out", "to": "decide.a"},
	    {"from": "inline.pass", "to": "decide.b"},
	    {"from": "decide.pass", "to": "join.yes"},
	    {"from": "decide.fail", "to": "join.no"},
	    {"from": "valid.fail", "to": "join.bad"},
	    {"from": "join.out", "to": "wait.in"},
	    {"from": "wait.out", "to": "out.in"}
	  ]
	}`))
	require.NoError(t, err)
	require.Equal(t, json.RawMessage("null"), doc.Nodes[4].Mapping["mode"].Literal)
	c, issues := Compile(doc, testCatalog())
	require.Empty(t, issues)
	require.Equal(t, []string{"in", "valid", "inline", "think", "decide", "join", "wait", "out"}, c.Order)
	require.Equal(t, []string{"agents.run"}, c.Permissions)
	require.Equal(t, []string{"core.echo", "core.sleep"}, []string{c.Actions[0].ID, c.Actions[1].ID})
	require.Equal(t, "feedface", c.Agents[0].Hash)
}

func TestValidIdent(t *testing.T) {
	for _, ok := range []string{"a", "in", "check-1", "save_note", "aB9", "a" + strings.Repeat("x", 63)} {
		require.True(t, validIdent(ok), ok)
	}
	for _, bad := range []string{"", "A", "1a", "_a", "a.b", "a b", "é", "a/b", "a" + strings.Repeat("x", 64)} {
		require.False(t, validIdent(bad), bad)
	}
}

// TestHandWrittenMatchers checks the regexp-free matchers and the
// first-token pointer parse against their definitions on every short string
// over an alphabet that exercises each rule.
func TestHandWrittenMatchers(t *testing.T) {
	alphabet := []string{"a", "z", "A", "0", ".", "_", "-", "~", "/", "1", "é", ""}
	var all []string
	var build func(prefix string, n int)
	build = func(prefix string, n int) {
		all = append(all, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			if c != "" {
				build(prefix+c, n-1)
			}
		}
	}
	build("", 4)
	for _, s := range all {
		toks, perr := ParsePointer(s)
		first, ok, err := firstPointerToken(s)
		require.Equal(t, perr, err, "pointer %q", s)
		require.Equal(t, len(toks) > 0, ok, "pointer %q", s)
		if ok {
			require.Equal(t, toks[0], first, "pointer %q", s)
		}
	}
}
