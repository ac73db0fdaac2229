package activities

import (
	"context"
	"encoding/json"
	"maps"
	"slices"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// Output ports of local nodes.
const (
	PortPass = "pass"
	PortFail = "fail"
	PortOut  = "out"
)

// LocalNodeActivities runs gate, validator and merge nodes: pure,
// short computations the interpreter runs as local activities.
type LocalNodeActivities struct {
	revisions *revisionCache
	values    valueCodec
}

// RunLocalNode (execution.ActivityRunLocalNode, local) runs one gate,
// validator or merge node:
//
//   - gate: evaluates its cel/v1 expression on the input value; port pass
//     or fail, carrying the input unchanged. An evaluation error (missing
//     field, cost limit, non-bool) is permanent EXPRESSION_FAILED.
//   - validator: port pass with the value, or fail with {value, errors}
//     where errors are [{path, keyword, message}].
//   - merge: port out with an object keyed by input port of the values
//     present (dead ports are absent).
//
// Local nodes behave the same in simulation, so Mode is not consulted.
func (a *LocalNodeActivities) RunLocalNode(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
	rev, n, err := a.revisions.node(ctx, in)
	if err != nil {
		return execution.NodeResult{}, err
	}
	switch n.Kind {
	case graph.KindGate:
		return a.gate(ctx, in, rev, n)
	case graph.KindValidator:
		return a.validator(ctx, in, rev, n)
	case graph.KindMerge:
		return a.merge(ctx, in, n)
	}
	return execution.NodeResult{}, permanent(execution.ErrNodeNotFound, nil,
		"node %q is a %s, which does not run as a local activity", n.ID, n.Kind)
}

// singleInput returns the one input port of a gate or validator.
func singleInput(n graph.Node) (string, error) {
	if len(n.Inputs) != 1 {
		return "", permanent(execution.ErrMappingUnresolved, nil, "node %q has %d input ports; it needs exactly one", n.ID, len(n.Inputs))
	}
	for p := range n.Inputs {
		return p, nil
	}
	panic("unreachable")
}

func (a *LocalNodeActivities) gate(ctx context.Context, in execution.NodeInput, rev *revision, n graph.Node) (execution.NodeResult, error) {
	port, err := singleInput(n)
	if err != nil {
		return execution.NodeResult{}, err
	}
	raw, err := a.values.port(ctx, in, port)
	if err != nil {
		return execution.NodeResult{}, err
	}
	g, err := rev.gate(n)
	if err != nil {
		return execution.NodeResult{}, err
	}
	ok, err := g.EvalJSON(ctx, raw)
	if err != nil && cancelled(ctx) {
		return execution.NodeResult{}, ctx.Err()
	}
	if err != nil {
		return execution.NodeResult{}, permanent(execution.ErrExpressionFailed, err, "gate %q: %v", n.ID, err)
	}
	out := PortFail
	if ok {
		out = PortPass
	}
	// The input Value passes through as is: a reference stays a reference.
	return execution.NodeResult{Port: out, Value: in.Inputs[port]}, nil
}

func (a *LocalNodeActivities) validator(ctx context.Context, in execution.NodeInput, rev *revision, n graph.Node) (execution.NodeResult, error) {
	port, err := singleInput(n)
	if err != nil {
		return execution.NodeResult{}, err
	}
	raw, err := a.values.port(ctx, in, port)
	if err != nil {
		return execution.NodeResult{}, err
	}
	s, err := rev.validatorSchema(n)
	if err != nil {
		return execution.NodeResult{}, err
	}
	errs, err := validate(s, raw)
	if err != nil {
		return execution.NodeResult{}, permanent(execution.ErrSchemaViolation, err, "validator %q: input is not JSON: %v", n.ID, err)
	}
	if errs == nil {
		return execution.NodeResult{Port: PortPass, Value: in.Inputs[port]}, nil
	}
	failed, err := graph.EncodeValue(struct {
		Value  json.RawMessage `json:"value"`
		Errors []SchemaError   `json:"errors"`
	}{raw, errs})
	if err != nil {
		return execution.NodeResult{}, err
	}
	v, err := a.values.result(ctx, in, PortFail, failed)
	if err != nil {
		return execution.NodeResult{}, err
	}
	return execution.NodeResult{Port: PortFail, Value: v}, nil
}

func (a *LocalNodeActivities) merge(ctx context.Context, in execution.NodeInput, n graph.Node) (execution.NodeResult, error) {
	obj := make(map[string]json.RawMessage, len(in.Inputs))
	ports := slices.Sorted(maps.Keys(in.Inputs))
	for _, p := range ports {
		if _, declared := n.Inputs[p]; !declared {
			return execution.NodeResult{}, permanent(execution.ErrMappingUnresolved, nil, "merge %q has no input port %q", n.ID, p)
		}
		raw, err := a.values.load(ctx, in, in.Inputs[p])
		if err != nil {
			return execution.NodeResult{}, err
		}
		obj[p] = raw
	}
	raw, err := graph.EncodeValue(obj)
	if err != nil {
		return execution.NodeResult{}, permanent(execution.ErrSchemaViolation, err, "merge %q: %v", n.ID, err)
	}
	v, err := a.values.result(ctx, in, PortOut, raw)
	if err != nil {
		return execution.NodeResult{}, err
	}
	return execution.NodeResult{Port: PortOut, Value: v}, nil
}
