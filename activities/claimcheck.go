package activities

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/weftworks/weft/execution"
)

// ValueActivities claim-checks values for the interpreter.
type ValueActivities struct {
	values valueStore
}

// StoreValues (execution.ActivityStoreValues, local) stores each inline
// value under (tenant, run, node, port, sha256) and returns the references
// in input order. The interpreter calls it before continue-as-new so the
// next execution's parameters carry references instead of values. Storing
// is idempotent, so a re-executed attempt is harmless; a value the store
// refuses (not JSON) is permanent, a database failure is retried.
func (a *ValueActivities) StoreValues(ctx context.Context, in execution.StoreValuesInput) (execution.StoreValuesResult, error) {
	out := execution.StoreValuesResult{Refs: make([]execution.ValueRef, 0, len(in.Values))}
	for _, v := range in.Values {
		if !json.Valid(v.Value) {
			return execution.StoreValuesResult{}, permanent(execution.ErrSchemaViolation, nil,
				"value of %s.%s is not valid JSON", v.NodeID, v.Port)
		}
		ref, err := a.values.PutValue(ctx, in.TenantID, in.RunID, v.NodeID, v.Port, v.Value)
		if err != nil {
			return execution.StoreValuesResult{}, storeError(execution.ErrPayloadTooLarge, err,
				fmt.Sprintf("store value of %s.%s", v.NodeID, v.Port))
		}
		out.Refs = append(out.Refs, ref)
	}
	return out, nil
}
