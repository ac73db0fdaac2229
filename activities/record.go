package activities

import (
	"context"
	"encoding/json"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/store"
)

// resultRecorder keeps live node results their events leave out (store.Store).
type resultRecorder interface {
	PutNodeResult(ctx context.Context, tenantID, runID, nodeID string, attempt, redispatch int, port string, value json.RawMessage, size int) error
}

var _ resultRecorder = (*store.Store)(nil)

// recorded wraps a node activity so that every live result stays
// recoverable (issue 21, recordings): a value up to
// execution.MaxEventValueBytes is copied into its node.completed event, one
// over InlineValueLimit is claim-checked (run_values), and one in between
// would be stored nowhere, so it is recorded here, under (tenant, run,
// node, attempt), before the attempt answers. The common small value and a
// simulated run's values add no write. A failure to record fails the
// attempt like a failed claim check: a database blip is retried (or, with
// PostgreSQL unreachable, re-dispatched by durable), a value the store
// refuses is permanent.
func recorded(run nodeRunner, results resultRecorder) nodeRunner {
	return func(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
		res, err := run(ctx, in)
		if err != nil || in.Mode != execution.ModeLive || res.Approval != nil || res.Value.Ref != nil {
			return res, err
		}
		size, leftOut := eventSize(res.Value.Inline)
		if !leftOut {
			return res, nil
		}
		if err := results.PutNodeResult(ctx, in.TenantID, in.RunID, in.NodeID, in.Attempt, in.Redispatch,
			res.Port, res.Value.Inline, size); err != nil {
			return execution.NodeResult{}, storeError(execution.ErrInvalidOutput, err,
				"record the result of "+in.NodeID+"."+res.Port)
		}
		return res, nil
	}
}

// eventSize is the size of an inline value as the interpreter will see it,
// and whether that is over execution.MaxEventValueBytes, so its event will
// say truncated instead of carrying it. The value reaches the interpreter
// through Temporal's JSON payload converter (encoding/json), which compacts
// it and escapes <, >, & and U+2028/9 (up to six bytes for one), so the
// size is measured the same way; a value that cannot reach six times the
// bound is not measured at all.
func eventSize(v json.RawMessage) (int, bool) {
	if len(v)*6 <= execution.MaxEventValueBytes {
		return len(v), false
	}
	enc, err := json.Marshal(v)
	if err != nil {
		// Not JSON: the payload converter refuses it too, so the attempt
		// fails in the SDK and nothing is recorded for it.
		return len(v), false
	}
	return len(enc), len(enc) > execution.MaxEventValueBytes
}
