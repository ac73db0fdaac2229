package temporalclient

import (
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/weftworks/weft/execution"
)

// DataConverter is the SDK's default data converter with a shortcut for
// the payloads weft sends most: node attempts' inputs and results, event
// appends and run parameters go straight to the JSON converter.
//
// The default converter offers every value to its proto converters first,
// and each of them, to find out that a struct is not a proto message,
// copies it into a new pointer (reflect.New): two copies of a NodeInput
// (about 350 bytes) for every attempt a workflow task schedules, two of
// a NodeResult for every attempt that answers. The payloads themselves do
// not change: the same JSON under the same "json/plain" encoding, which
// the default converter (a worker of an earlier release) decodes as
// before, and decoding is the default converter's.
func DataConverter() converter.DataConverter {
	return &dataConverter{DataConverter: defaultDataConverter, json: converter.NewJSONPayloadConverter()}
}

// defaultDataConverter is converter.GetDefaultDataConverter's composition
// (the SDK makes whatever a client is given transfer-aware itself).
var defaultDataConverter = converter.NewCompositeDataConverter(
	converter.NewNilPayloadConverter(),
	converter.NewByteSlicePayloadConverter(),
	converter.NewProtoJSONPayloadConverter(),
	converter.NewProtoPayloadConverter(),
	converter.NewJSONPayloadConverter(),
)

type dataConverter struct {
	converter.DataConverter
	json *converter.JSONPayloadConverter
}

// plainJSON reports whether v is one of weft's payload types, which are
// plain JSON structs (never proto messages, byte slices or nil pointers).
func plainJSON(v any) bool {
	switch v := v.(type) {
	case execution.NodeInput, execution.NodeResult, execution.AppendEventsInput, execution.RunParams:
		return true
	case *execution.NodeInput:
		return v != nil
	case *execution.NodeResult:
		return v != nil
	case *execution.AppendEventsInput:
		return v != nil
	case *execution.RunParams:
		return v != nil
	}
	return false
}

// ToPayload converts one value.
func (c *dataConverter) ToPayload(v any) (*commonpb.Payload, error) {
	if plainJSON(v) {
		return c.json.ToPayload(v)
	}
	return c.DataConverter.ToPayload(v)
}

// ToPayloads converts values as the composite converter does, each
// through ToPayload.
func (c *dataConverter) ToPayloads(values ...any) (*commonpb.Payloads, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := &commonpb.Payloads{Payloads: make([]*commonpb.Payload, 0, len(values))}
	for i, v := range values {
		if raw, ok := v.(converter.RawValue); ok {
			out.Payloads = append(out.Payloads, raw.Payload())
			continue
		}
		p, err := c.ToPayload(v)
		if err != nil {
			return nil, fmt.Errorf("values[%d]: %w", i, err)
		}
		out.Payloads = append(out.Payloads, p)
	}
	return out, nil
}
