package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// changeCarryRefs: continue-as-new claim-checks the inline port values it
// would carry (SPEC §5: carry node states and references only). Histories
// recorded before it continue as new with inline values, as they did.
const changeCarryRefs = "weft-carry-refs"

// changeCarryAllRefs: continue-as-new carries every resolved port value by
// reference, however small, so the next execution's input holds node
// states and references only. Histories recorded between changeCarryRefs
// and it kept values adding up to carryInlineBudget inline, and still do.
const changeCarryAllRefs = "weft-carry-all-refs"

// carryInlineBudget is, before changeCarryAllRefs, the most inline value
// bytes continue-as-new carried as they are; above it, every inline port value is stored first and
// carried by reference, so the next execution's input stays small however
// many nodes the graph has (200 values of up to 32 KiB would otherwise be
// several MB, beyond Temporal's payload limit).
const carryInlineBudget = 32 << 10

// claimCheckCarry replaces the inline values of resolved ports (and the run
// input, which the input node's port repeats) by references when they add
// up to more than carryInlineBudget. Ports are visited in compiled order,
// so the StoreValues local activity's input is deterministic.
func (i *interpreter) claimCheckCarry(next *execution.RunParams) error {
	if !i.changed(changeCarryRefs) {
		return nil
	}
	var keys []string
	var values []execution.PortValue
	total := 0
	for _, n := range i.nodes {
		for _, out := range n.plan.Outputs {
			key := portName(n.plan.ID, out.Port)
			slot, ok := i.ports[key]
			if !ok || !slot.Fired || slot.Value.Ref != nil || len(slot.Value.Inline) == 0 {
				continue
			}
			keys = append(keys, key)
			values = append(values, execution.PortValue{NodeID: n.plan.ID, Port: out.Port, Value: slot.Value.Inline})
			total += len(slot.Value.Inline)
		}
	}
	budget := carryInlineBudget
	if i.changed(changeCarryAllRefs) {
		budget = 0
	}
	if total <= budget {
		return nil
	}
	ctx := workflow.WithLocalActivityOptions(i.work, infraActivityOptions(fmt.Sprintf("claim-check %d values", len(values))))
	var res execution.StoreValuesResult
	err := workflow.ExecuteLocalActivity(ctx, execution.ActivityStoreValues,
		execution.StoreValuesInput{TenantID: i.p.TenantID, RunID: i.p.RunID, Values: values}).Get(ctx, &res)
	if err != nil {
		return fmt.Errorf("claim-check carried values: %w", err)
	}
	if len(res.Refs) != len(keys) {
		return fmt.Errorf("claim-check carried values: %d references for %d values", len(res.Refs), len(keys))
	}
	for k, key := range keys {
		ref := res.Refs[k]
		i.ports[key] = execution.PortSlot{Fired: true, Value: execution.Value{Ref: &ref}}
	}
	// The run input is the input node's out port: carry its reference.
	for _, n := range i.nodes {
		if n.plan.Kind == graph.KindInput && n.state.Status == execution.NodeSucceeded {
			if slot, ok := i.ports[portName(n.plan.ID, "out")]; ok && slot.Fired {
				next.Input = slot.Value
			}
			break
		}
	}
	return nil
}
