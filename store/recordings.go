package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/graph"
)

// Reasons a run's recording is not replayable (RunRecording.Reason).
const (
	// RecordingNotLive: the run is a simulation; only live runs record.
	RecordingNotLive = "NOT_LIVE"
	// RecordingNotTerminal: the run has not finished yet.
	RecordingNotTerminal = "NOT_TERMINAL"
	// RecordingResultsDeleted: retention deleted the run's events
	// (WEFT_EVENT_RETENTION_DAYS), and with them its node results.
	RecordingResultsDeleted = "RESULTS_DELETED"
	// RecordingResultsMissing: a result a replay needs (an agent's or an
	// action's output) is neither in its event nor stored: a run from
	// before node results were recorded (migration 00018), or a
	// claim-checked value that is gone.
	RecordingResultsMissing = "RESULTS_MISSING"
	// RecordingTooLarge: the fixtures derived from the recording exceed
	// fixtures.MaxRecordedBytes (fixtures.ErrRecordingTooLarge); RunRecording
	// never answers it, a replay reports it.
	RecordingTooLarge = "RECORDING_TOO_LARGE"
)

// RunRecording is what a live run recorded: enough to replay it.
type RunRecording struct {
	RunID, WorkflowKey, Mode, Status string
	Revision                         int
	// Input is the run's input.
	Input json.RawMessage
	// Output is the run's output when it succeeded (nil otherwise).
	Output json.RawMessage
	// Error is the run's error when it failed or was cancelled (Type is
	// the run error's code).
	Error *execution.EventError
	// Nodes holds every node that has at least one event, by id.
	Nodes map[string]NodeRecording
	// Replayable is false when the run cannot be replayed: see Reason.
	Replayable bool
	// Reason is a stable code (Recording* constants) when not Replayable.
	Reason string
}

// NodeRecording is one node's recorded result (its last attempt).
type NodeRecording struct {
	NodeID, Kind string
	// Status is the node's execution status (execution.Node*) as the run's
	// events leave it.
	Status string
	// Port is the port that fired.
	Port string
	// Output is the full value of the port: the event's inline value, the
	// node_results row of the attempt that completed, or the claim-checked
	// value; nil when there is none. Values are redacted like event data
	// (sensitive keys' values read "[REDACTED]", RedactValue).
	Output json.RawMessage
	// Error is a failed node's error (its message as the event bounded it).
	Error *execution.EventError
	// Attempts is the number of the node's last attempt.
	Attempts int
	// DurationMs is the last attempt's duration: from its node.started to
	// its node.completed or node.failed.
	DurationMs int64
	// Decision is an approval node's outcome: approve, reject or timeout.
	Decision string
	// Recorded is false when the node's result is needed to replay it (an
	// agent's or an action's output) but is not recoverable.
	Recorded bool
}

// NodeResults returns the recorded nodes as package fixtures reads them
// (fixtures.FromRecording); nodes whose result is not recoverable are left
// out, so they count as unrecorded.
func (r RunRecording) NodeResults() map[string]fixtures.NodeResult {
	out := make(map[string]fixtures.NodeResult, len(r.Nodes))
	for id, n := range r.Nodes {
		if !n.Recorded {
			continue
		}
		res := fixtures.NodeResult{Kind: graph.Kind(n.Kind), Status: n.Status, Port: n.Port, Output: n.Output, Decision: n.Decision, DurationMs: n.DurationMs}
		if n.Error != nil {
			res.Error = &fixtures.NodeError{Type: n.Error.Type, Message: n.Error.Message}
		}
		out[id] = res
	}
	return out
}

// RunRecording folds the events of the tenant's run into what each node
// recorded and resolves every node's full output. A run that is not live,
// not terminal, whose events retention deleted, or that lacks a result a
// replay needs is answered with Replayable false and a Reason. An unknown
// run, or another tenant's, is failure.ErrNotFound (wrapped).
func (s *Store) RunRecording(ctx context.Context, tenantID, runID string) (RunRecording, error) {
	run, err := s.GetRun(ctx, tenantID, runID)
	if err != nil {
		return RunRecording{}, fmt.Errorf("store: recording of run %s: %w", runID, err)
	}
	rec := RunRecording{RunID: run.RunID, WorkflowKey: run.WorkflowKey, Mode: run.Mode, Status: run.Status,
		Revision: run.Revision, Input: run.Input, Nodes: map[string]NodeRecording{}}
	if run.Status == execution.StatusSucceeded {
		rec.Output = run.Output
	}
	if len(run.Error) > 0 && string(run.Error) != "null" {
		var re execution.RunError
		if err := json.Unmarshal(run.Error, &re); err != nil {
			return RunRecording{}, fmt.Errorf("store: recording of run %s: decode its error: %w", runID, err)
		}
		rec.Error = &execution.EventError{Type: re.Code, Message: re.Message}
	}
	var eventsDeleted bool
	if err := s.Pool.QueryRow(ctx, `SELECT events_deleted_at IS NOT NULL FROM runs WHERE run_id = $1 AND tenant_id = $2`,
		runID, tenantID).Scan(&eventsDeleted); err != nil {
		return RunRecording{}, fmt.Errorf("store: recording of run %s: %w", runID, notFound(err))
	}
	switch {
	case run.Mode != string(execution.ModeLive):
		rec.Reason = RecordingNotLive
	case !execution.Terminal(run.Status):
		rec.Reason = RecordingNotTerminal
	case eventsDeleted:
		rec.Reason = RecordingResultsDeleted
		return rec, nil
	}

	events, err := s.recordedEvents(ctx, tenantID, runID)
	if err != nil {
		return RunRecording{}, err
	}
	var doc *graph.Document
	if c, err := s.GetCompiled(ctx, tenantID, run.Checksum); err == nil {
		doc = &c.Document
	} else if !errors.Is(err, failure.ErrNotFound) {
		return RunRecording{}, fmt.Errorf("store: recording of run %s: %w", runID, err)
	}
	folded := foldNodes(doc, events, run.Status)
	rows, err := s.nodeResults(ctx, tenantID, runID)
	if err != nil {
		return RunRecording{}, err
	}
	missing := false
	for _, f := range folded {
		n, err := s.resolveNode(ctx, tenantID, runID, f, rows)
		if err != nil {
			return RunRecording{}, fmt.Errorf("store: recording of run %s: node %s: %w", runID, f.state.ID, err)
		}
		missing = missing || !n.Recorded
		rec.Nodes[n.NodeID] = n
	}
	if rec.Reason == "" && missing {
		rec.Reason = RecordingResultsMissing
	}
	rec.Replayable = rec.Reason == ""
	return rec, nil
}

// recordedEvents reads the run's node events (node.*) in seq order: the
// rest (run.*, edge.*, an agent's tool.* and budget events) says nothing
// a recording keeps.
func (s *Store) recordedEvents(ctx context.Context, tenantID, runID string) ([]execution.RecordedEvent, error) {
	rows, err := s.Pool.Query(ctx, `SELECT type, COALESCE(node_id, ''), COALESCE(attempt, 0), at, data
		FROM run_events WHERE run_id = $1 AND tenant_id = $2 AND type LIKE 'node.%' ORDER BY seq`, runID, tenantID)
	if err != nil {
		return nil, fmt.Errorf("store: recording of run %s: events: %w", runID, err)
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (execution.RecordedEvent, error) {
		var e execution.RecordedEvent
		err := r.Scan(&e.Type, &e.NodeID, &e.Attempt, &e.At, &e.Data)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: recording of run %s: events: %w", runID, err)
	}
	return events, nil
}

// nodeFold is what the events say about one node beyond its projected state.
type nodeFold struct {
	state execution.NodeState
	// started holds the latest node.started time of each attempt.
	started map[int]time.Time
	// completed is the node's last node.completed (attempt, time, data).
	completed *foldedEvent
	// failed is the node's last node.failed.
	failed *foldedEvent
	// decision is the last approval outcome of an approval node's requests.
	decision string
}

type foldedEvent struct {
	attempt int
	at      time.Time
	data    execution.EventData
}

// foldNodes folds the run's events into the nodes that have any, in the
// order of their first event. Kinds come from the compiled document (nil
// when it is gone) or the node.started events.
func foldNodes(doc *graph.Document, events []execution.RecordedEvent, runStatus string) []*nodeFold {
	kinds := map[string]graph.Kind{}
	if doc != nil {
		for _, n := range doc.Nodes {
			kinds[n.ID] = n.Kind
		}
	}
	var order []string
	folds := map[string]*nodeFold{}
	for _, ev := range events {
		if ev.NodeID == "" {
			continue
		}
		f, ok := folds[ev.NodeID]
		if !ok {
			f = &nodeFold{started: map[int]time.Time{}}
			folds[ev.NodeID] = f
			order = append(order, ev.NodeID)
		}
		var d execution.EventData
		_ = json.Unmarshal(ev.Data, &d) // tolerated like the projection does: an odd event folds as empty data
		switch ev.Type {
		case execution.EventNodeStarted:
			f.started[ev.Attempt] = ev.At
			if _, known := kinds[ev.NodeID]; !known && d.Kind != "" {
				kinds[ev.NodeID] = d.Kind
			}
		case execution.EventNodeCompleted:
			f.completed = &foldedEvent{attempt: ev.Attempt, at: ev.At, data: d}
		case execution.EventNodeFailed:
			f.failed = &foldedEvent{attempt: ev.Attempt, at: ev.At, data: d}
		case execution.EventNodeApprovalDecided:
			f.decision = d.Decision
		case execution.EventNodeApprovalTimedOut:
			f.decision = fixtures.DecisionTimeout
		}
	}
	nodes := make([]graph.Node, 0, len(order))
	for _, id := range order {
		nodes = append(nodes, graph.Node{ID: id, Kind: kinds[id]})
	}
	p := execution.NewNodeProjection(nodes)
	for _, ev := range events {
		p.Apply(ev)
	}
	out := make([]*nodeFold, 0, len(order))
	for _, st := range p.States(runStatus) {
		f := folds[st.ID]
		f.state = st
		out = append(out, f)
	}
	return out
}

// nodeResultKey addresses a node_results row of one run.
type nodeResultKey struct {
	nodeID  string
	attempt int
}

type nodeResultRow struct {
	port  string
	value json.RawMessage
}

// nodeResults reads the run's node_results rows.
func (s *Store) nodeResults(ctx context.Context, tenantID, runID string) (map[nodeResultKey]nodeResultRow, error) {
	rows, err := s.Pool.Query(ctx, `SELECT node_id, attempt, port, value FROM node_results
		WHERE tenant_id = $1 AND run_id = $2`, tenantID, runID)
	if err != nil {
		return nil, fmt.Errorf("store: node results of run %s: %w", runID, err)
	}
	defer rows.Close()
	out := map[nodeResultKey]nodeResultRow{}
	for rows.Next() {
		var k nodeResultKey
		var r nodeResultRow
		if err := rows.Scan(&k.nodeID, &k.attempt, &r.port, &r.value); err != nil {
			return nil, fmt.Errorf("store: node results of run %s: %w", runID, err)
		}
		out[k] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: node results of run %s: %w", runID, err)
	}
	return out, nil
}

// resolveNode turns a node's fold into its recording, loading the value
// its completion left out of the event.
func (s *Store) resolveNode(ctx context.Context, tenantID, runID string, f *nodeFold, rows map[nodeResultKey]nodeResultRow) (NodeRecording, error) {
	st := f.state
	n := NodeRecording{NodeID: st.ID, Kind: st.Kind, Status: st.Status, Port: st.Port, Attempts: st.Attempt, Recorded: true}
	switch {
	case st.Status == execution.NodeSucceeded && f.completed != nil:
		c := f.completed
		n.DurationMs = f.duration(c)
		d := c.data
		switch {
		case d.OutputRef != nil:
			v, err := getValue(ctx, s.Pool, tenantID, runID, *d.OutputRef)
			if errors.Is(err, failure.ErrNotFound) {
				n.Recorded = !needsOutput(st.Kind)
				break
			}
			if err != nil {
				return NodeRecording{}, err
			}
			// Claim-checked values are the run's working values, stored as
			// produced: redact them like the event would have.
			if n.Output, err = RedactValue(v); err != nil {
				return NodeRecording{}, err
			}
		case len(d.Output) > 0:
			n.Output = d.Output // event data: already redacted
		case d.Truncated:
			// Left out of the event (over MaxEventValueBytes, or the
			// whole data over MaxEventDataBytes): the attempt's row.
			row, ok := rows[nodeResultKey{st.ID, c.attempt}]
			if !ok {
				n.Recorded = !needsOutput(st.Kind)
				break
			}
			n.Output = row.value
			if n.Port == "" {
				n.Port = row.port
			}
		}
		if st.Kind == string(graph.KindApproval) {
			n.Decision = approvalDecision(n.Port, f.decision)
		}
	case st.Status == execution.NodeFailed && f.failed != nil:
		n.DurationMs = f.duration(f.failed)
		if e := f.failed.data.Error; e != nil {
			cp := *e
			n.Error = &cp
		} else if st.Reason != "" {
			n.Error = &execution.EventError{Type: st.Reason, Message: st.Error}
		}
	}
	return n, nil
}

// duration is the time from the attempt's node.started to ev (0 when the
// start is not in the log, or the clock went backwards).
func (f *nodeFold) duration(ev *foldedEvent) int64 {
	start, ok := f.started[ev.attempt]
	if !ok || ev.at.Before(start) {
		return 0
	}
	return ev.at.Sub(start).Milliseconds()
}

// needsOutput reports whether replaying a node of kind needs its output:
// agents and actions return their recorded output as a fixture; the other
// kinds recompute it (gates, validators, merges), carry their input
// (agent-decisions, approvals) or need only the port. A node whose kind is
// unknown (no compiled revision, no node.started) is assumed to need it.
func needsOutput(kind string) bool {
	return kind == "" || kind == string(graph.KindAgent) || kind == string(graph.KindAction)
}

// approvalDecision is an approval node's outcome from the port it fired,
// or from its decision events when the port says nothing.
func approvalDecision(port, fromEvents string) string {
	switch port {
	case graph.PortApproved:
		return fixtures.DecisionApprove
	case graph.PortRejected:
		return fixtures.DecisionReject
	case graph.PortTimedOut:
		return fixtures.DecisionTimeout
	}
	return fromEvents
}

// PutNodeResult records the value one attempt of a live run's node produced
// when its event cannot carry it inline and it is not claim-checked (see
// migration 00018). The value is redacted like event data (RedactValue).
// Recording the same attempt again is idempotent; a later re-dispatch of
// the attempt (a higher redispatch) replaces the row, an earlier one never
// does. size is the value's size as the event reports it (outputSize).
func (s *Store) PutNodeResult(ctx context.Context, tenantID, runID, nodeID string, attempt, redispatch int, port string, value json.RawMessage, size int) error {
	redacted, err := RedactValue(value)
	if err != nil {
		return failure.Wrap(err, failure.CodeInvalidRequest, "result of %s attempt %d cannot be recorded", nodeID, attempt)
	}
	_, err = s.Pool.Exec(ctx, `
		INSERT INTO node_results (tenant_id, run_id, node_id, attempt, redispatch, port, value, size)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (tenant_id, run_id, node_id, attempt) DO UPDATE
		SET redispatch = EXCLUDED.redispatch, port = EXCLUDED.port, value = EXCLUDED.value,
		    size = EXCLUDED.size, created_at = now()
		WHERE node_results.redispatch < EXCLUDED.redispatch`,
		tenantID, runID, nodeID, attempt, redispatch, port, redacted, size)
	if isUnstorableJSON(err) {
		return failure.Wrap(err, failure.CodeInvalidRequest, "result of %s attempt %d cannot be stored: %s", nodeID, attempt, pgMessage(err))
	}
	if err != nil {
		return fmt.Errorf("store: put node result %s/%d: %w", nodeID, attempt, err)
	}
	return nil
}

// RedactValue is a value as evidence keeps it: every sensitive key's value
// replaced by "[REDACTED]" at any depth and NUL characters replaced, like
// EvidenceData, but never truncated, and with numbers kept as written (no
// canonical form, which would round integers beyond 2^53). Recordings hold
// values this way, whichever of the event, node_results or run_values
// they come from.
func RedactValue(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("value is not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("value holds more than one JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(sanitize(v)); err != nil {
		return nil, fmt.Errorf("value: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
