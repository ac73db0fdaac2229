package temporalclient_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commandpb "go.temporal.io/api/command/v1"
	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/weftworks/weft/config"
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

// compactInput is in as interpreter version 6 sends it: the carried
// events in the compact form (NodeInput.Carried) instead of the plain one.
func compactInput(t testing.TB, in execution.NodeInput) execution.NodeInput {
	b := in.Events
	c, ok := execution.CompactBatchOf(in.RunID, b.Events, b.Run, b.Through)
	require.True(t, ok)
	in.Events, in.Carried = nil, c
	return in
}

// leanInput is in as interpreter version 6 sends it for a run started with
// lean inputs (RunParams.LeanInputs): the run's constants left to its record.
func leanInput(in execution.NodeInput) execution.NodeInput {
	in = in.WithConstants(execution.RunConstants{})
	in.Lean = true
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
		in, &in, res, &res, compactInput(t, in), leanInput(compactInput(t, in)),
		execution.AppendEventsInput{TenantID: "t", RunID: "r", Events: in.Events.Events, Through: 14},
		execution.RunParams{TenantID: "t", RunID: "r", Mode: execution.ModeLive},
		// Not weft's: the default converter's own choices.
		nil, []byte("raw"), &commonpb.WorkflowType{Name: "weft.Run"}, "text", 42, json.RawMessage(`{"a":1}`),
		(*execution.NodeInput)(nil), converter.NewRawValue(&commonpb.Payload{Data: []byte(`"x"`)}),
	}
	def := converter.GetDefaultDataConverter()
	opts, err := temporalclient.Options(config.Config{TemporalAddress: "localhost:7233", TemporalNamespace: "default"}, nil)
	require.NoError(t, err)
	dc := opts.DataConverter // what every weft process dials with
	require.NotNil(t, dc)
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
//
// "weft-compact" is the same input as interpreter version 6 sends it
// (the carried events in the compact form), "weft-compact-lean" as it
// sends it for a run started with lean inputs (the run's constants left out).
func BenchmarkNodeInputPayload(b *testing.B) {
	in := chain10Input(b)
	for _, c := range []struct {
		name string
		dc   converter.DataConverter
		in   execution.NodeInput
	}{
		{"default", converter.GetDefaultDataConverter(), in},
		{"weft", temporalclient.DataConverter(), in},
		{"weft-compact", temporalclient.DataConverter(), compactInput(b, in)},
		{"weft-compact-lean", temporalclient.DataConverter(), leanInput(compactInput(b, in))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.dc.ToPayloads(c.in); err != nil {
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

// BenchmarkAttemptInputTrip prices an attempt input's bytes on the SDK's
// side of this process: what one input costs from the interpreter's
// ExecuteActivity to the activity's decoded argument, the gRPC transport
// left out. The input is encoded (the workflow task), marshalled in the
// task's ScheduleActivityTask command, unmarshalled from both of the
// server's answers that carry it back (the next workflow task's
// ActivityTaskScheduled event, the activity task) and decoded. "events=N"
// carries N of the recorded input's 14 events, so the difference between
// the cases over the difference in payload bytes is what one carried byte
// costs in allocations. "compact-events=N" is the same input as
// interpreter version 6 sends it, the carried events in the compact form,
// which the activity expands (NodeInput.CarriedEvents) as part of its
// decoding. "lean-compact-events=N" leaves out the run's constants too
// (NodeInput.Lean), which the activity then takes from its per-process
// cache of the run's record (one read per run and worker, not measured
// here).
//
//	go test ./temporalclient -run '^$' -bench AttemptInputTrip -benchmem
func BenchmarkAttemptInputTrip(b *testing.B) {
	full := chain10Input(b)
	dc := temporalclient.DataConverter()
	for _, c := range []struct {
		n       int
		compact bool
		lean    bool
	}{{0, false, false}, {3, false, false}, {14, false, false}, {3, true, false}, {14, true, false}, {3, true, true}, {14, true, true}} {
		n := c.n
		in := full
		batch := *full.Events
		batch.Events = batch.Events[len(batch.Events)-n:]
		in.Events = &batch
		name := fmt.Sprintf("events=%d", n)
		if c.compact {
			in, name = compactInput(b, in), "compact-"+name
		}
		if c.lean {
			in, name = leanInput(in), "lean-"+name
		}
		p, err := dc.ToPayloads(in)
		require.NoError(b, err)
		// What the server sends back (its marshalling is not this process's).
		ev, err := proto.Marshal(&historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
			ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{ActivityId: "5", Input: p}}})
		require.NoError(b, err)
		task, err := proto.Marshal(&workflowservice.PollActivityTaskQueueResponse{ActivityId: "5", Input: p})
		require.NoError(b, err)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := dc.ToPayloads(in)
				if err != nil {
					b.Fatal(err)
				}
				attrs := &commandpb.ScheduleActivityTaskCommandAttributes{ActivityId: "5", Input: p}
				cmd := &commandpb.Command{Attributes: &commandpb.Command_ScheduleActivityTaskCommandAttributes{ScheduleActivityTaskCommandAttributes: attrs}}
				if _, err := proto.Marshal(&workflowservice.RespondWorkflowTaskCompletedRequest{Commands: []*commandpb.Command{cmd}}); err != nil {
					b.Fatal(err)
				}
				var h historypb.HistoryEvent
				var t workflowservice.PollActivityTaskQueueResponse
				if err := proto.Unmarshal(ev, &h); err != nil {
					b.Fatal(err)
				}
				if err := proto.Unmarshal(task, &t); err != nil {
					b.Fatal(err)
				}
				var got execution.NodeInput
				if err := dc.FromPayloads(t.Input, &got); err != nil {
					b.Fatal(err)
				}
				if _, err := got.CarriedEvents(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(proto.Size(p)), "payload-B")
		})
	}
}
