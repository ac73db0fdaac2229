package workflows

import (
	"fmt"
	"slices"

	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
)

// changeNodeInputRefs: an activity's input is recorded in the history, and
// each input port may carry up to 32 KiB inline, so a node with many ports
// could record ~1 MiB at once. Since this change the values it would pass
// beyond nodeInputInlineBudget are claim-checked first and passed by
// reference. Histories recorded before it pass every value inline, as
// they did.
const changeNodeInputRefs = "weft-node-input-refs"

// nodeInputInlineBudget is the most inline bytes one node attempt's input
// ports may carry together.
const nodeInputInlineBudget = 32 << 10

// attemptInputs returns the values of n's fired inputs for an attempt.
// When an activity's inline values add up to more than
// nodeInputInlineBudget, the largest are stored (the StoreValues local
// activity, under the node and port that produced them) until the rest
// fit, and their ports are resolved to the references from then on, so
// later consumers and continue-as-new reuse them. Local activities (gates,
// validators, merges) get their values as they are: their input never
// reaches the history. Every choice follows compiled order and sizes, so
// replay makes the same one.
func (i *interpreter) attemptInputs(n *node) (map[string]execution.Value, error) {
	inputs := i.inputValues(n)
	if isLocal(n.plan.Kind) {
		return inputs, nil
	}
	// One candidate per source port, which may feed several input ports.
	type source struct {
		key, node, port string
		size, ports     int
	}
	var sources []*source
	byKey := map[string]*source{}
	total := 0
	for _, in := range n.plan.Inputs {
		v, ok := inputs[in.Port]
		if !ok || v.Ref != nil || len(v.Inline) == 0 {
			continue
		}
		total += len(v.Inline)
		key := portName(in.FromNode, in.FromPort)
		if s := byKey[key]; s != nil {
			s.ports++
			continue
		}
		s := &source{key: key, node: in.FromNode, port: in.FromPort, size: len(v.Inline), ports: 1}
		byKey[key] = s
		sources = append(sources, s)
	}
	if total <= nodeInputInlineBudget {
		return inputs, nil
	}
	if !i.changed(changeNodeInputRefs) {
		return inputs, nil
	}
	// Largest first (ties in compiled order), until the rest fit.
	slices.SortStableFunc(sources, func(a, b *source) int { return b.size*b.ports - a.size*a.ports })
	var picked []*source
	var values []execution.PortValue
	for _, s := range sources {
		if total <= nodeInputInlineBudget {
			break
		}
		picked = append(picked, s)
		values = append(values, execution.PortValue{NodeID: s.node, Port: s.port, Value: i.ports[s.key].Value.Inline})
		total -= s.size * s.ports
	}
	ctx := workflow.WithLocalActivityOptions(i.work,
		infraActivityOptions(fmt.Sprintf("claim-check %d inputs of %s", len(values), n.plan.ID)))
	var res execution.StoreValuesResult
	err := workflow.ExecuteLocalActivity(ctx, execution.ActivityStoreValues,
		execution.StoreValuesInput{TenantID: i.p.TenantID, RunID: i.p.RunID, Values: values}).Get(ctx, &res)
	if err != nil {
		return nil, err
	}
	if len(res.Refs) != len(picked) {
		return nil, nonRetryable(execution.ErrPayloadTooLarge,
			fmt.Sprintf("claim-check inputs of %s: %d references for %d values", n.plan.ID, len(res.Refs), len(picked)))
	}
	for k, s := range picked {
		ref := res.Refs[k]
		i.ports[s.key] = execution.PortSlot{Fired: true, Value: execution.Value{Ref: &ref}}
	}
	return i.inputValues(n), nil
}
