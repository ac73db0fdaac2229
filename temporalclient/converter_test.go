package temporalclient_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/temporalclient"
)

// chain10Input is the largest attempt input of a weftbench chain10 run
// (node e4, carrying 14 events), from its recorded history.
func chain10Input(t testing.TB) execution.NodeInput {
	raw, err := os.ReadFile("testdata/chain10-input.json")
	require.NoError(t, err)
	var in execution.NodeInput
	require.NoError(t, json.Unmarshal(raw, &in))
	require.Len(t, in.Events.Events, 14)
	return in
}

func chain10Result() execution.NodeResult {
	return execution.NodeResult{Port: "out", Value: execution.Value{Inline: json.RawMessage(`{"n":42,"text":"hello from weftbench"}`)}, EventsThrough: 11}
}

// Weft's payload types take the shortcut, and come out exactly as the
// SDK's default converter writes them, so a worker of any release decodes
// them; every other value is the default converter's.
func TestDataConverterWritesWhatTheDefaultWrites(t *testing.T) {
	in := chain10Input(t)
	res := chain10Result()
	values := []any{
		in, &in, res, &res,
		execution.AppendEventsInput{TenantID: "t", RunID: "r", Events: in.Events.Events, Through: 14},
		execution.RunParams{TenantID: "t", RunID: "r", Mode: execution.ModeLive},
		// Not weft's: the default converter's own choices.
		nil, []byte("raw"), &commonpb.WorkflowType{Name: "weft.Run"}, "text", 42, json.RawMessage(`{"a":1}`),
		(*execution.NodeInput)(nil), converter.NewRawValue(&commonpb.Payload{Data: []byte(`"x"`)}),
	}
	def := converter.GetDefaultDataConverter()
	dc := temporalclient.DataConverter()
	for i, v := range values {
		want, err := def.ToPayload(v)
		require.NoError(t, err, "value %d", i)
		got, err := dc.ToPayload(v)
		require.NoError(t, err, "value %d", i)
		assert.True(t, proto.Equal(want, got), "value %d (%T): %v, want %v", i, v, got, want)
	}
	want, err := def.ToPayloads(values...)
	require.NoError(t, err)
	got, err := dc.ToPayloads(values...)
	require.NoError(t, err)
	assert.True(t, proto.Equal(want, got))
	none, err := dc.ToPayloads()
	require.NoError(t, err)
	assert.Nil(t, none)

	// Decoding is the default converter's, both ways.
	p, err := dc.ToPayload(in)
	require.NoError(t, err)
	var back execution.NodeInput
	require.NoError(t, def.FromPayload(p, &back))
	assert.Equal(t, in, back)
	p, err = def.ToPayload(res)
	require.NoError(t, err)
	var backRes execution.NodeResult
	require.NoError(t, dc.FromPayload(p, &backRes))
	assert.Equal(t, res, backRes)
}

// The shortcut's worth, in B/op: a chain10 attempt's input as a workflow
// task schedules it, its result as the attempt answers.
//
//	go test ./temporalclient -run '^$' -bench Payload -benchmem
func BenchmarkNodeInputPayload(b *testing.B) {
	in := chain10Input(b)
	for _, c := range []struct {
		name string
		dc   converter.DataConverter
	}{{"default", converter.GetDefaultDataConverter()}, {"weft", temporalclient.DataConverter()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.dc.ToPayloads(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNodeResultPayload(b *testing.B) {
	res := chain10Result()
	for _, c := range []struct {
		name string
		dc   converter.DataConverter
	}{{"default", converter.GetDefaultDataConverter()}, {"weft", temporalclient.DataConverter()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.dc.ToPayloads(res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
