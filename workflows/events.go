package workflows

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
)

// eventLog buffers the events of one workflow task until flush.
type eventLog struct {
	runID string
	// ordinal is the last ordinal used; it continues across continue-as-new
	// (Carry.EventOrdinal) so keys stay unique within one logical run.
	ordinal int
	// recorded counts events recorded by this execution (continue-as-new knob).
	recorded int
	pending  []execution.EventDraft
	// update is applied to the run row in the same transaction as pending.
	update *execution.RunUpdate
}

// eventKey is deterministic, so a re-executed AppendEvents never appends twice.
func (l *eventLog) eventKey(nodeID string, attempt int, typ string) string {
	if nodeID == "" {
		nodeID = "-"
	}
	return fmt.Sprintf("%s/%s/%d/%s/%d", l.runID, nodeID, attempt, typ, l.ordinal)
}

// record buffers one event. n is nil for run-level events.
func (i *interpreter) record(typ string, n *node, data execution.EventData) {
	nodeID, attempt := "", 0
	if n != nil {
		nodeID, attempt = n.plan.ID, n.state.Attempt
	}
	i.recordAt(typ, nodeID, attempt, data)
}

func (i *interpreter) recordAt(typ, nodeID string, attempt int, data execution.EventData) {
	if i.simulation {
		v := i.virtualNow()
		data.VirtualAt = &v
	}
	// json.Marshal of a struct is deterministic (fixed field order, sorted
	// map keys); workflowcheck flags it only for its type cache and the GC.
	raw, err := json.Marshal(data) //workflowcheck:ignore
	if err != nil {
		// EventData holds only JSON-safe fields and RawMessage values that
		// came out of a payload decoder; failing here is a programming error.
		panic(fmt.Sprintf("weft interpreter: encode %s event data: %v", typ, err))
	}
	l := &i.events
	l.ordinal++
	l.recorded++
	l.pending = append(l.pending, execution.EventDraft{
		Key:     l.eventKey(nodeID, attempt, typ),
		Type:    typ,
		NodeID:  nodeID,
		Attempt: attempt,
		At:      i.now(),
		Data:    raw,
	})
}

// flush appends the buffered events (and the run update) in one local
// activity. It runs on the disconnected context: a cancellation must not
// lose the events that record it.
func (i *interpreter) flush() error {
	l := &i.events
	if len(l.pending) == 0 && l.update == nil {
		return nil
	}
	in := execution.AppendEventsInput{TenantID: i.p.TenantID, RunID: i.p.RunID, Events: l.pending, Run: l.update}
	ctx := workflow.WithLocalActivityOptions(i.work, infraActivityOptions(fmt.Sprintf("append %d events", len(l.pending))))
	if err := workflow.ExecuteLocalActivity(ctx, execution.ActivityAppendEvents, in).Get(ctx, nil); err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	l.pending, l.update = nil, nil
	return nil
}

// infraActivityOptions are for LoadPlan and AppendEvents: unlike node
// attempts they retry until they succeed (a database blip delays the run, it
// does not fail it); a non-retryable error still stops them.
func infraActivityOptions(summary string) workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
		},
		Summary: summary,
	}
}

// valueData copies a value into event data, bounded by MaxEventValueBytes.
func valueData(d *execution.EventData, v execution.Value) {
	switch {
	case v.Ref != nil:
		ref := *v.Ref
		d.OutputRef = &ref
	case len(v.Inline) > execution.MaxEventValueBytes:
		d.Truncated = true
		d.OutputSize = len(v.Inline)
	case len(v.Inline) > 0:
		d.Output = v.Inline
	}
}

// errorData turns a classified failure into event data, bounded by MaxEventMessageBytes.
func errorData(d *execution.EventData, f failure) {
	msg := f.message
	if len(msg) > execution.MaxEventMessageBytes {
		cut := execution.MaxEventMessageBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
		d.Truncated = true
	}
	d.Error = &execution.EventError{Type: f.typ, Message: msg}
}

// portName is "node.port", the key of ports and the edge notation.
func portName(nodeID, port string) string { return nodeID + "." + port }
