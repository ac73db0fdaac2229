package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/variables"
)

// NodeActivities runs agent, agent-decision and action nodes as regular
// activities (leases, heartbeats, cancellation).
type NodeActivities struct {
	revisions *revisionCache
	values    valueCodec
	actions   *catalog.Registry
	variables *variables.Registry
	logger    *slog.Logger
	// fixtures holds simulated runs' fixtures (simulate.go).
	fixtures *fixtureCache
	// agents runs live agent and agent-decision nodes (agent.go); nil
	// refuses them with AGENT_UNAVAILABLE.
	agents *agents.Runtime
	// revocations re-authorizes every live attempt (revocations.go); nil
	// applies the snapshot as it is.
	revocations RevocationSource
	// authorities re-authorizes, through the agent harness, every tool
	// call from the run's authority as stored (agent.go); nil leaves the
	// snapshot to decide.
	authorities authoritySource
}

// RunNode (execution.ActivityRunNode) runs one attempt of an action node:
//
//  1. the pinned contract must have risk read or workspace-write and be
//     registered on this worker with the same content hash
//     (ACTION_UNAVAILABLE otherwise);
//  2. the run's permission snapshot minus the scopes revoked from its
//     principal since (the user, or a service actor's creator; read for
//     every attempt) must hold every permission the node needs
//     (PERMISSION_DENIED listing the missing ones);
//  3. the call input is built from the mapping (MAPPING_UNRESOLVED) and
//     validated against the contract's inputSchema (SCHEMA_VIOLATION);
//  4. the handler runs with a deadline of the node timeout, heartbeating
//     meanwhile so Temporal can deliver cancellation;
//  5. the output is validated against the outputSchema (INVALID_OUTPUT) and
//     returned on port out, inline or claim-checked.
//
// All of those refusals are non-retryable; handler errors are retryable
// unless the handler says otherwise. Live agent and agent-decision nodes
// run through the agent harness (agent.go). In simulation mode nothing is
// called: simulate (simulate.go) returns the run's fixture or a default.
func (a *NodeActivities) RunNode(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
	if in.Mode == execution.ModeSimulation {
		return a.simulate(ctx, in)
	}
	rev, n, err := a.revisions.node(ctx, in)
	if err != nil {
		return execution.NodeResult{}, err
	}
	// Action and agent nodes alike check, and pass on, what the run may still do.
	if in, err = withRevocations(ctx, a.revocations, in); err != nil {
		return execution.NodeResult{}, err
	}
	switch n.Kind {
	case graph.KindAction:
		return a.action(ctx, in, rev, n)
	case graph.KindAgent, graph.KindAgentDecision:
		return a.agent(ctx, in, rev, n) // agent.go
	}
	return execution.NodeResult{}, permanent(execution.ErrNodeNotFound, nil,
		"node %q is a %s, which does not run as an activity", n.ID, n.Kind)
}

func (a *NodeActivities) action(ctx context.Context, in execution.NodeInput, rev *revision, n graph.Node) (execution.NodeResult, error) {
	if n.Action == nil {
		return execution.NodeResult{}, permanent(execution.ErrActionUnavailable, nil, "node %q names no action", n.ID)
	}
	ref := *n.Action
	pinned, ok := rev.actions[ref]
	if !ok {
		return execution.NodeResult{}, permanent(execution.ErrActionUnavailable, nil, "node %q: action %s is not pinned in revision %s", n.ID, ref, in.Checksum)
	}
	if pinned.Risk != graph.RiskRead && pinned.Risk != graph.RiskWorkspaceWrite {
		// Publication refuses these; a revision that holds one anyway is
		// never executed (live runs call read and workspace-write only).
		return execution.NodeResult{}, permanent(execution.ErrActionUnavailable, nil,
			"node %q: action %s has risk %q, which runs never execute", n.ID, ref, pinned.Risk)
	}
	act, ok := a.actions.Lookup(ref.ID, ref.Version)
	if !ok {
		return execution.NodeResult{}, permanent(execution.ErrActionUnavailable, nil, "node %q: action %s is not registered on this worker", n.ID, ref)
	}
	if h, _ := a.actions.Hash(ref.ID, ref.Version); h != pinned.Hash {
		return execution.NodeResult{}, permanent(execution.ErrActionUnavailable, nil,
			"node %q: this worker's %s contract (hash %s) differs from the pinned one (hash %s)", n.ID, ref, h, pinned.Hash)
	}

	need := append(append([]string{}, rev.compiled.NodePermissions[n.ID]...), pinned.RequiredPermissions...)
	if missing := auth.Missing(in.Permissions, need); len(missing) > 0 {
		return execution.NodeResult{}, permanentWithDetails(execution.ErrPermissionDenied, map[string]any{"missing": missing},
			"node %q needs permissions the run does not hold: %v", n.ID, missing)
	}

	m := &mapper{ctx: ctx, in: in, node: n, values: a.values, variables: a.variables}
	input, err := m.callInput()
	if err != nil {
		return execution.NodeResult{}, err
	}
	inSchema, outSchema, err := rev.actionSchemas(pinned)
	if err != nil {
		return execution.NodeResult{}, err
	}
	if errs, err := validate(inSchema, input); err != nil || errs != nil {
		return execution.NodeResult{}, permanentWithDetails(execution.ErrSchemaViolation, map[string]any{"errors": errs},
			"node %q: call input does not match %s inputSchema: %s", n.ID, ref, summarizeOr(errs, err))
	}

	output, err := a.call(ctx, in, n, act, input)
	if err != nil {
		return execution.NodeResult{}, err
	}
	if errs, err := validate(outSchema, output); err != nil || errs != nil {
		return execution.NodeResult{}, permanentWithDetails(execution.ErrInvalidOutput, map[string]any{"errors": errs},
			"node %q: %s returned output that does not match its outputSchema: %s", n.ID, ref, summarizeOr(errs, err))
	}
	v, err := a.values.result(ctx, in, PortOut, output)
	if err != nil {
		return execution.NodeResult{}, err
	}
	return execution.NodeResult{Port: PortOut, Value: v}, nil
}

func summarizeOr(errs []SchemaError, err error) string {
	if err != nil {
		return err.Error()
	}
	return summarize(errs)
}

// nodeTimeout is the node's timeout as the plan normalises it.
func nodeTimeout(n graph.Node) time.Duration {
	ms := n.TimeoutMs
	if ms <= 0 {
		ms = graph.DefaultTimeoutMs(n.Kind)
	}
	return time.Duration(ms) * time.Millisecond
}

// call runs the handler under the node timeout while heartbeating, and
// classifies its error. The deadline holds even for a handler that ignores
// its context (bounded): the node's own timeout is ACTION_TIMEOUT, an
// attempt of the node; Temporal's timers only ever mean a lost worker.
func (a *NodeActivities) call(ctx context.Context, in execution.NodeInput, n graph.Node, act catalog.Action, input json.RawMessage) (json.RawMessage, error) {
	timeout := nodeTimeout(n)
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hb := startHeartbeats(ctx)
	defer hb.stop()

	nodeID, action := n.ID, n.Action // not n: the closure would move the whole node to the heap
	onPanic := func(p any) error {
		a.logger.Error("action handler panicked", "node", nodeID, "action", action.String(), "panic", p)
		return permanent(execution.ErrActionFailed, nil, "node %q: action %s panicked", nodeID, action)
	}
	// The log first, then the effect. A read action has none: its attempt
	// does not wait for the events it carries (withCarriedEvents).
	if act.Contract.Risk != graph.RiskRead {
		if err := awaitCarried(ctx); err != nil {
			return nil, err
		}
	}
	// The call is built here, not in the closure: a closure taking in
	// would move the whole input to the heap for every attempt.
	handler, call := act.Handler, catalog.Call{
		TenantID:       in.TenantID,
		RunID:          in.RunID,
		NodeID:         in.NodeID,
		Actor:          in.Actor,
		RequestedBy:    in.Actor.RequestedBy(),
		Attempt:        in.Attempt,
		IdempotencyKey: catalog.IdempotencyKey(in.TenantID, in.RunID, in.NodeID),
		Input:          input,
		Permissions:    in.Permissions,
		Heartbeat:      hb.beat,
	}
	out, err := bounded(hctx, onPanic, func() (json.RawMessage, error) {
		return handler(hctx, call)
	})
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		if !json.Valid(out) {
			return nil, permanent(execution.ErrInvalidOutput, nil, "node %q: %s returned invalid JSON", n.ID, n.Action)
		}
		return out, nil
	case cancelled(ctx):
		return nil, ctx.Err() // Temporal cancelled the attempt, or the worker is draining it
	case errors.As(err, &appErr):
		return nil, err
	case hctx.Err() != nil:
		return nil, temporal.NewApplicationErrorWithCause(
			fmt.Sprintf("node %q: %s did not finish within %v", n.ID, n.Action, timeout), execution.ErrActionTimeout, err)
	}
	return nil, temporal.NewApplicationErrorWithCause(fmt.Sprintf("node %q: %s: %v", n.ID, n.Action, err), execution.ErrActionFailed, err)
}

// heartbeats keeps an activity's lease alive while a handler runs and
// forwards the handler's own heartbeats. Temporal only delivers a
// cancellation in a heartbeat response, so a handler that never heartbeats
// would otherwise be uncancellable. The SDK throttles what reaches the server.
type heartbeats struct {
	ctx  context.Context
	mu   sync.Mutex
	last []any // the handler's latest details, repeated so ticks never erase them
	done chan struct{}
	wg   sync.WaitGroup
}

func startHeartbeats(ctx context.Context) *heartbeats {
	h := &heartbeats{ctx: ctx, done: make(chan struct{})}
	if !activity.IsActivity(ctx) {
		return h
	}
	// No heartbeat right away: the SDK sends the first one synchronously,
	// which would add a server round trip to every attempt, and a lease is
	// only at risk after a third of its timeout, when the ticker first beats.
	interval := heartbeatInterval(activity.GetInfo(ctx).HeartbeatTimeout)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				h.mu.Lock()
				last := h.last
				h.mu.Unlock()
				activity.RecordHeartbeat(ctx, last...)
			}
		}
	}()
	return h
}

// beat records a heartbeat with the handler's details. After stop (a
// handler abandoned past its deadline may still call it) it does nothing.
func (h *heartbeats) beat(details ...any) {
	if !activity.IsActivity(h.ctx) {
		return
	}
	select {
	case <-h.done:
		return
	default:
	}
	h.mu.Lock()
	if len(details) > 0 {
		h.last = details
	}
	last := h.last
	h.mu.Unlock()
	activity.RecordHeartbeat(h.ctx, last...)
}

func (h *heartbeats) stop() {
	close(h.done)
	h.wg.Wait()
}

// heartbeatInterval beats three times per heartbeat timeout, at most every
// 5 s (and every 5 s when there is no heartbeat timeout).
func heartbeatInterval(timeout time.Duration) time.Duration {
	const maxInterval = 5 * time.Second
	if timeout <= 0 {
		return maxInterval
	}
	return max(min(timeout/3, maxInterval), 50*time.Millisecond)
}
