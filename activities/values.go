package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// Value size limits (SPEC §5: claim check, no payload near Temporal's 2 MB).
const (
	// InlineValueLimit is the largest value passed inline through Temporal;
	// larger ones are stored in run_values and passed by reference.
	InlineValueLimit = 32 << 10
	// MaxValueBytes is the largest value a node may produce; beyond it the
	// node fails with PAYLOAD_TOO_LARGE (non-retryable) naming the node.
	MaxValueBytes = 4 << 20
	// maxReportedSchemaErrors bounds the errors a validator's fail port carries.
	maxReportedSchemaErrors = 50
)

// valueCodec turns execution.Values into JSON and back, claim-checking
// large ones.
type valueCodec struct {
	store valueStore
}

// load returns the JSON a Value stands for.
func (c valueCodec) load(ctx context.Context, in execution.NodeInput, v execution.Value) (json.RawMessage, error) {
	if v.Ref != nil {
		raw, err := c.store.GetValue(ctx, in.TenantID, in.RunID, *v.Ref)
		if err != nil {
			return nil, storeError(execution.ErrMappingUnresolved, err,
				fmt.Sprintf("load value %s.%s", v.Ref.NodeID, v.Ref.Port))
		}
		return raw, nil
	}
	if len(v.Inline) == 0 {
		return json.RawMessage("null"), nil
	}
	return v.Inline, nil
}

// port returns the value of one input port of the node.
func (c valueCodec) port(ctx context.Context, in execution.NodeInput, port string) (json.RawMessage, error) {
	v, ok := in.Inputs[port]
	if !ok {
		return nil, permanent(execution.ErrMappingUnresolved, nil, "node %q: input port %q has no value", in.NodeID, port)
	}
	return c.load(ctx, in, v)
}

// result wraps a node's output: inline up to InlineValueLimit, stored and
// referenced up to MaxValueBytes, refused beyond.
func (c valueCodec) result(ctx context.Context, in execution.NodeInput, port string, raw json.RawMessage) (execution.Value, error) {
	switch {
	case len(raw) > MaxValueBytes:
		return execution.Value{}, permanent(execution.ErrPayloadTooLarge, nil,
			"node %q produced %d bytes on port %q; the limit is %d", in.NodeID, len(raw), port, MaxValueBytes)
	case len(raw) > InlineValueLimit:
		ref, err := c.store.PutValue(ctx, in.TenantID, in.RunID, in.NodeID, port, raw)
		if err != nil {
			return execution.Value{}, storeError(execution.ErrPayloadTooLarge, err, "store value of "+in.NodeID+"."+port)
		}
		return execution.Value{Ref: &ref}, nil
	}
	return execution.Value{Inline: raw}, nil
}

// SchemaError is one validation error: where in the value, which schema
// keyword, and why.
type SchemaError = graph.SchemaError

// validate checks raw against s and returns the leaf validation errors
// (nil when valid); an error only when raw is not JSON. A schema that
// accepts every value needs raw to be JSON only: json.Valid's verdict is
// the decoder's (one value, whitespace around it), and anything it refuses
// takes the full path, for the same error.
func validate(s *schema, raw json.RawMessage) ([]SchemaError, error) {
	if s.open && json.Valid(raw) {
		return nil, nil
	}
	return graph.SchemaErrors(s.compiled, raw, maxReportedSchemaErrors)
}

// summarize renders schema errors for an error message.
func summarize(errs []SchemaError) string {
	parts := make([]string, 0, min(len(errs), 5))
	for i, e := range errs {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(errs)-5))
			break
		}
		path := e.Path
		if path == "" {
			path = "/"
		}
		parts = append(parts, path+": "+e.Message)
	}
	return strings.Join(parts, "; ")
}
