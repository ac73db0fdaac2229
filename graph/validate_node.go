package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// portRule is the port shape a kind requires (SPEC §2).
type portRule struct {
	// inputs is the exact number of input ports, or atLeastOne.
	inputs int
	// outputs is the exact set of output port names, sorted.
	outputs []string
}

const atLeastOne = -1

var portRules = map[Kind]portRule{
	KindInput:         {inputs: 0, outputs: []string{"out"}},
	KindAgent:         {inputs: atLeastOne, outputs: []string{"out"}},
	KindAgentDecision: {inputs: atLeastOne, outputs: []string{"fail", "pass"}},
	KindGate:          {inputs: 1, outputs: []string{"fail", "pass"}},
	KindValidator:     {inputs: 1, outputs: []string{"fail", "pass"}},
	KindAction:        {inputs: atLeastOne, outputs: []string{"out"}},
	KindMerge:         {inputs: atLeastOne, outputs: []string{"out"}},
	KindOutput:        {inputs: 1, outputs: nil},
	KindApproval:      {inputs: 1, outputs: []string{PortApproved, PortRejected, PortTimedOut}},
}

// callsSomething reports whether a node of kind k calls an agent or action,
// and so builds a call input from a mapping.
func callsSomething(k Kind) bool {
	return k == KindAgent || k == KindAgentDecision || k == KindAction
}

func isAgentKind(k Kind) bool { return k == KindAgent || k == KindAgentDecision }

func (a *analysis) checkNode(i int) {
	n := a.doc.Nodes[i]
	rule, known := portRules[n.Kind]
	if !known {
		a.add(CodeInvalidNode, nodePath(i, "kind"), "unknown node kind %q", n.Kind)
	}
	a.checkPortNames(i, n)
	if known {
		a.checkPortShape(i, n, rule)
	}
	a.checkFieldsForKind(i, n)
	if runsActivity(n.Kind) {
		a.checkRetry(i, n)
	}
	switch n.Kind {
	case KindGate:
		a.checkGate(i, n)
	case KindValidator:
		a.checkValidator(i, n)
	case KindAgent, KindAgentDecision:
		a.checkAgent(i, n)
	case KindAction:
		a.checkAction(i, n)
	case KindApproval:
		a.checkApproval(i, n)
	}
	a.checkMapping(i, n)
	a.checkOutputSchemas(i, n)
}

// checkPortNames checks port name syntax and that every port names a schema.
func (a *analysis) checkPortNames(i int, n Node) {
	for _, side := range []struct {
		field string
		ports map[string]string
	}{{"inputs", n.Inputs}, {"outputs", n.Outputs}} {
		for _, p := range slices.Sorted(maps.Keys(side.ports)) {
			if !validIdent(p) {
				a.add(CodeInvalidNode, nodePath(i, side.field, p), "port name %q must match %s", p, identPattern)
			}
			s := side.ports[p]
			if _, ok := a.doc.Schemas[s]; !ok && s != AnySchema {
				a.add(CodeInvalidSchema, nodePath(i, side.field, p), "port schema %q is neither %q nor a name in schemas", s, AnySchema)
			}
		}
	}
}

func (a *analysis) checkPortShape(i int, n Node, rule portRule) {
	switch {
	case rule.inputs == 0 && len(n.Inputs) > 0:
		a.add(CodeInvalidNode, nodePath(i, "inputs"), "%s nodes have no input ports", n.Kind)
	case rule.inputs == 1 && len(n.Inputs) != 1:
		a.add(CodeInvalidNode, nodePath(i, "inputs"), "%s nodes have exactly one input port, not %d", n.Kind, len(n.Inputs))
	case rule.inputs == atLeastOne && len(n.Inputs) == 0:
		a.add(CodeInvalidNode, nodePath(i, "inputs"), "%s nodes need at least one input port", n.Kind)
	}
	for _, p := range slices.Sorted(maps.Keys(n.Outputs)) {
		if !slices.Contains(rule.outputs, p) {
			a.add(CodeInvalidNode, nodePath(i, "outputs", p), "%s nodes have no output port %q (%s)", n.Kind, p, describePorts(rule.outputs))
		}
	}
	for _, p := range rule.outputs {
		if _, ok := n.Outputs[p]; !ok {
			a.add(CodeInvalidNode, nodePath(i, "outputs"), "%s nodes need output port %q (%s)", n.Kind, p, describePorts(rule.outputs))
		}
	}
	if n.Kind == KindMerge {
		if s, ok := n.Outputs["out"]; ok && s != AnySchema {
			a.add(CodeInvalidNode, nodePath(i, "outputs", "out"), "merge out is an object keyed by input port, so its schema must be %q", AnySchema)
		}
	}
}

func describePorts(ports []string) string {
	if len(ports) == 0 {
		return "it has no output ports"
	}
	return "its output ports are exactly " + strings.Join(ports, ", ")
}

// checkOutputSchemas keeps the port type system sound where a node forwards
// its input unchanged: a gate's or agent-decision's pass/fail and an
// approval's approved/rejected/timedOut carry the input, so they may only
// claim the input's schema (or any); a validator's pass may also claim the
// schema the validator enforces.
func (a *analysis) checkOutputSchemas(i int, n Node) {
	if n.Kind != KindGate && n.Kind != KindAgentDecision && n.Kind != KindValidator && n.Kind != KindApproval {
		return
	}
	in := AnySchema
	if len(n.Inputs) == 1 {
		for _, s := range n.Inputs {
			in = s
		}
	}
	ports := []string{"fail", "pass"}
	switch n.Kind {
	case KindValidator:
		ports = []string{"pass"}
	case KindApproval:
		ports = portRules[KindApproval].outputs
	}
	for _, p := range ports {
		s, ok := n.Outputs[p]
		if !ok || s == AnySchema || s == in {
			continue
		}
		if n.Kind == KindValidator && s == schemaNameOf(n.Schema) {
			continue
		}
		a.add(CodeIncompatiblePort, nodePath(i, "outputs", p),
			"%s %s carries the node's input (schema %q), so it cannot claim schema %q", n.Kind, p, in, s)
	}
}

// schemaNameOf returns the schema name a validator references, or "" for an
// inline schema.
func schemaNameOf(raw json.RawMessage) string {
	var name string
	if json.Unmarshal(raw, &name) != nil {
		return ""
	}
	return name
}

// checkFieldsForKind refuses fields that do not apply to the node's kind, so
// an author never believes a setting is in effect when it is ignored.
func (a *analysis) checkFieldsForKind(i int, n Node) {
	if n.Kind != KindGate {
		if n.Language != "" {
			a.add(CodeInvalidNode, nodePath(i, "language"), "only gate nodes have a language")
		}
		if n.Expression != "" {
			a.add(CodeInvalidNode, nodePath(i, "expression"), "only gate nodes have an expression")
		}
	}
	if n.Kind != KindValidator && len(n.Schema) > 0 {
		a.add(CodeInvalidNode, nodePath(i, "schema"), "only validator nodes have a schema")
	}
	if !isAgentKind(n.Kind) {
		if n.Agent != nil {
			a.add(CodeInvalidNode, nodePath(i, "agent"), "only agent and agent-decision nodes reference an agent")
		}
		if n.Tools != "" {
			a.add(CodeInvalidToolsPath, nodePath(i, "tools"), "only agent and agent-decision nodes select a toolset")
		}
	}
	if n.Kind != KindAction && n.Action != nil {
		a.add(CodeInvalidNode, nodePath(i, "action"), "only action nodes reference an action")
	}
	if !runsActivity(n.Kind) {
		if n.Retry != nil {
			a.add(CodeInvalidNode, nodePath(i, "retry"), "%s nodes run no activity and take no retry policy", n.Kind)
		}
		if n.TimeoutMs != 0 && n.Kind != KindApproval {
			a.add(CodeInvalidNode, nodePath(i, "timeoutMs"), "%s nodes run no activity and take no timeout", n.Kind)
		}
	}
}

func (a *analysis) checkRetry(i int, n Node) {
	l := DefaultLimits
	if n.TimeoutMs != 0 && (n.TimeoutMs < l.MinTimeoutMs || n.TimeoutMs > l.MaxTimeoutMs) {
		a.add(CodeLimitExceeded, nodePath(i, "timeoutMs"), "timeoutMs %d is outside %d–%d", n.TimeoutMs, l.MinTimeoutMs, l.MaxTimeoutMs)
	}
	r := n.Retry
	if r == nil {
		return
	}
	switch {
	case r.MaxAttempts < 0:
		a.add(CodeInvalidNode, nodePath(i, "retry", "maxAttempts"), "maxAttempts must be at least 1")
	case r.MaxAttempts > l.MaxAttempts:
		a.add(CodeLimitExceeded, nodePath(i, "retry", "maxAttempts"), "maxAttempts %d exceeds the limit of %d", r.MaxAttempts, l.MaxAttempts)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"initialIntervalMs", r.InitialIntervalMs}, {"maxIntervalMs", r.MaxIntervalMs}} {
		switch {
		case f.v < 0:
			a.add(CodeInvalidNode, nodePath(i, "retry", f.name), "%s must be positive", f.name)
		case f.v > l.MaxRetryIntervalMs:
			a.add(CodeLimitExceeded, nodePath(i, "retry", f.name), "%s %d exceeds the limit of %d", f.name, f.v, l.MaxRetryIntervalMs)
		}
	}
	if r.MaxIntervalMs > 0 && r.InitialIntervalMs > r.MaxIntervalMs {
		a.add(CodeInvalidNode, nodePath(i, "retry", "maxIntervalMs"), "maxIntervalMs must not be below initialIntervalMs")
	}
	switch {
	case math.IsNaN(r.Backoff) || (r.Backoff != 0 && r.Backoff < 1):
		a.add(CodeInvalidNode, nodePath(i, "retry", "backoff"), "backoff must be at least 1")
	case r.Backoff > l.MaxBackoff:
		a.add(CodeLimitExceeded, nodePath(i, "retry", "backoff"), "backoff %g exceeds the limit of %g", r.Backoff, l.MaxBackoff)
	}
}

func (a *analysis) checkGate(i int, n Node) {
	if n.Language != LanguageCELv1 {
		if n.Language == "" {
			a.add(CodeInvalidExpression, nodePath(i, "language"), "gate language is required; the only language is %q", LanguageCELv1)
		} else {
			a.add(CodeInvalidExpression, nodePath(i, "language"), "gate language %q is not supported; the only language is %q", n.Language, LanguageCELv1)
		}
	}
	if c := utf8.RuneCountInString(n.Expression); c > DefaultLimits.MaxExpressionChars {
		a.add(CodeLimitExceeded, nodePath(i, "expression"), "expression has %d characters; the limit is %d", c, DefaultLimits.MaxExpressionChars)
		return
	}
	if n.Language != LanguageCELv1 {
		return
	}
	// Each distinct expression is checked once (see gateChecks), and the
	// Compiler remembers it across calls.
	if msg := a.gates.problem(n.Expression); msg != "" {
		a.add(CodeInvalidExpression, nodePath(i, "expression"), "%s", strings.TrimSpace(msg))
	}
}

func (a *analysis) checkValidator(i int, n Node) {
	path := nodePath(i, "schema")
	raw := bytes.TrimSpace(n.Schema)
	switch {
	case len(raw) == 0:
		a.add(CodeInvalidNode, path, "validator nodes need a schema: a name in schemas or an inline schema object")
	case raw[0] == '"':
		name := schemaNameOf(raw)
		if _, ok := a.doc.Schemas[name]; !ok {
			a.add(CodeInvalidSchema, path, "schema %q is not in schemas", name)
		}
		// A named schema is compiled (and reported) under /schemas.
	case raw[0] == '{':
		if msg := a.schemaProblem(raw); msg != "" {
			a.add(CodeInvalidSchema, path, "schema does not compile: %s", msg)
		}
	default:
		a.add(CodeInvalidSchema, path, "schema must be a name in schemas or an inline schema object")
	}
}

func (a *analysis) checkAgent(i int, n Node) {
	path := nodePath(i, "agent")
	if n.Tools != "" {
		if _, ok := a.doc.Toolsets[n.Tools]; !ok {
			a.add(CodeInvalidToolsPath, nodePath(i, "tools"), "tools names toolset %q, which is not in toolsets", n.Tools)
		}
	}
	if n.Agent == nil {
		a.add(CodeInvalidNode, path, "%s nodes need an agent {key, revision}", n.Kind)
		return
	}
	ok := true
	if n.Agent.Key == "" {
		a.add(CodeInvalidNode, path+"/key", "agent key is required")
		ok = false
	}
	if n.Agent.Revision < 1 {
		a.add(CodeInvalidNode, path+"/revision", "agent revision must be an exact revision number (1 or more)")
		ok = false
	}
	if !ok {
		return
	}
	if c, found := a.resolveAgent(*n.Agent, path); found {
		a.addPerms(n.ID, c.RequiredPermissions)
		a.resolveAgentTools(c, path)
	}
}

func (a *analysis) checkAction(i int, n Node) {
	path := nodePath(i, "action")
	if n.Action == nil {
		a.add(CodeInvalidNode, path, "action nodes need an action {id, version}")
		return
	}
	ok := true
	if n.Action.ID == "" {
		a.add(CodeInvalidNode, path+"/id", "action id is required")
		ok = false
	}
	if n.Action.Version < 1 {
		a.add(CodeInvalidNode, path+"/version", "action version must be an exact version number (1 or more)")
		ok = false
	}
	if !ok {
		return
	}
	if c, found := a.resolveAction(*n.Action, path); found {
		a.addPerms(n.ID, c.RequiredPermissions)
	}
}

// checkApproval: an approval node must say how long it waits, within its
// own range (a wait for a person, up to 30 days; the node timeout range
// bounds attempts, and an approval makes none).
func (a *analysis) checkApproval(i int, n Node) {
	l := DefaultLimits
	switch {
	case n.TimeoutMs == 0:
		a.add(CodeInvalidNode, nodePath(i, "timeoutMs"), "approval nodes need a timeoutMs: how long to wait for a decision (%d–%d ms)",
			l.MinApprovalTimeoutMs, l.MaxApprovalTimeoutMs)
	case n.TimeoutMs < l.MinApprovalTimeoutMs || n.TimeoutMs > l.MaxApprovalTimeoutMs:
		a.add(CodeLimitExceeded, nodePath(i, "timeoutMs"), "approval timeoutMs %d is outside %d–%d (30 days)",
			n.TimeoutMs, l.MinApprovalTimeoutMs, l.MaxApprovalTimeoutMs)
	}
}

func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// fmtPorts renders port names for messages.
func fmtPorts(ports map[string]string) string {
	if len(ports) == 0 {
		return "none"
	}
	return fmt.Sprint(slices.Sorted(maps.Keys(ports)))
}
