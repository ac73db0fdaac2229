package activities

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/variables"
)

// mapper builds one node's call input from its input ports (SPEC §2
// mappings, §6 templates). Port values are decoded at most once.
type mapper struct {
	ctx       context.Context
	in        execution.NodeInput
	node      graph.Node
	values    valueCodec
	variables *variables.Registry
	decoded   map[string]any
}

// callInput returns the call input: with a mapping, an object with one field
// per mapping entry; without, the single input port's value.
func (m *mapper) callInput() (json.RawMessage, error) {
	if len(m.node.Mapping) == 0 {
		port, err := singleInput(m.node)
		if err != nil {
			return nil, err
		}
		return m.values.port(m.ctx, m.in, port)
	}
	keys := slices.Sorted(maps.Keys(m.node.Mapping))
	obj := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		v, err := m.entry(k, m.node.Mapping[k])
		if err != nil {
			return nil, err
		}
		obj[k] = v
	}
	return graph.EncodeValue(obj)
}

func (m *mapper) entry(field string, e graph.Mapping) (json.RawMessage, error) {
	switch {
	case e.Pointer != nil:
		v, err := m.resolve(*e.Pointer)
		if err != nil {
			return nil, unresolved(m.node.ID, field, err)
		}
		return graph.EncodeValue(v)
	case e.Template != nil:
		s, err := m.template(field, *e.Template, e.Bindings)
		if err != nil {
			return nil, err
		}
		return graph.EncodeValue(s)
	case len(e.Literal) > 0:
		if !json.Valid(e.Literal) {
			return nil, permanent(execution.ErrMappingUnresolved, nil, "node %q mapping %q: literal is not JSON", m.node.ID, field)
		}
		return e.Literal, nil
	}
	return nil, permanent(execution.ErrMappingUnresolved, nil, "node %q mapping %q is neither literal, pointer nor template", m.node.ID, field)
}

func unresolved(nodeID, field string, err error) error {
	return permanent(execution.ErrMappingUnresolved, nil, "node %q mapping %q: %v", nodeID, field, err)
}

// resolve evaluates a mapping pointer: the first token names an input port,
// the rest is RFC 6901 into that port's value.
func (m *mapper) resolve(p string) (any, error) {
	tokens, err := graph.ParsePointer(p)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, errors.New("pointer names no input port")
	}
	cur, err := m.portValue(tokens[0])
	if err != nil {
		return nil, err
	}
	for i, t := range tokens[1:] {
		next, ok := step(cur, t)
		if !ok {
			return nil, errors.New("pointer " + strconv.Quote(p) + " resolves to nothing at " + strconv.Quote(graph.Pointer(tokens[:i+2]...)))
		}
		cur = next
	}
	return cur, nil
}

// step applies one RFC 6901 reference token. Array indexes are decimal
// without leading zeros; "-" (past the end) never resolves.
func step(v any, token string) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		next, ok := t[token]
		return next, ok
	case []any:
		if token == "" || (len(token) > 1 && token[0] == '0') {
			return nil, false
		}
		i, err := strconv.Atoi(token)
		if err != nil || i < 0 || i >= len(t) {
			return nil, false
		}
		return t[i], true
	}
	return nil, false
}

func (m *mapper) portValue(port string) (any, error) {
	if v, ok := m.decoded[port]; ok {
		return v, nil
	}
	if _, ok := m.in.Inputs[port]; !ok {
		return nil, errors.New("input port " + strconv.Quote(port) + " has no value")
	}
	raw, err := m.values.load(m.ctx, m.in, m.in.Inputs[port])
	if err != nil {
		return nil, err
	}
	v, err := graph.DecodeValue(raw)
	if err != nil {
		return nil, err
	}
	if m.decoded == nil {
		m.decoded = map[string]any{}
	}
	m.decoded[port] = v
	return v, nil
}

// template renders a mapping template: bound pointer values first (strings
// as they are, anything else as canonical JSON), then the variable registry
// for context and run variables. Any value missing is permanent.
func (m *mapper) template(field, tmpl string, bindings map[string]string) (string, error) {
	bound := make(map[string]string, len(bindings))
	for key, p := range bindings {
		v, err := m.resolve(p)
		if err != nil {
			return "", permanent(execution.ErrMappingUnresolved, nil, "node %q mapping %q binding %q: %v", m.node.ID, field, key, err)
		}
		s, ok := v.(string)
		if !ok {
			c, err := graph.Canonical(v)
			if err != nil {
				return "", permanent(execution.ErrMappingUnresolved, err, "node %q mapping %q binding %q: %v", m.node.ID, field, key, err)
			}
			s = string(c)
		}
		bound[key] = s
	}
	out, err := m.variables.Resolve(m.ctx, tmpl, variables.Request{
		TenantID:    m.in.TenantID,
		TenantName:  m.in.TenantName,
		Actor:       variables.Actor{Sub: m.in.Actor.Sub, Name: m.in.Actor.Name, Email: m.in.Actor.Email},
		Permissions: m.in.Permissions,
		RunID:       m.in.RunID,
		WorkflowKey: m.in.WorkflowKey,
		Today:       runDay(m.in),
		Bindings:    bound, // a binding may feed a source (e.g. agentId) ...
		Values:      bound, // ... or a token directly (e.g. item.id)
	})
	if err == nil {
		return out, nil
	}
	var ref *variables.Refusal
	if errors.As(err, &ref) {
		switch {
		case ref.Retryable(): // a source failed: try again later
			return "", temporal.NewApplicationErrorWithCause(ref.Message, ref.Code, err)
		case ref.Code == variables.CodeMissingScope:
			return "", permanentWithDetails(execution.ErrPermissionDenied, map[string]any{"missing": ref.Scopes},
				"node %q mapping %q: %s", m.node.ID, field, ref.Message)
		case ref.Code == variables.CodeCancelled && m.ctx.Err() != nil:
			return "", m.ctx.Err()
		}
		return "", permanent(execution.ErrMappingUnresolved, nil, "node %q mapping %q: %s", m.node.ID, field, ref.Message)
	}
	return "", err
}

// runDay is the instant context.today renders: the run's start, so every
// attempt renders the same date. Older interpreters that do not send it
// fall back to the simulation clock, then to now.
func runDay(in execution.NodeInput) time.Time {
	switch {
	case !in.RunStartedAt.IsZero():
		return in.RunStartedAt.UTC()
	case !in.VirtualNow.IsZero():
		return in.VirtualNow.UTC()
	}
	return time.Now().UTC()
}
