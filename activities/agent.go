package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// agent runs one live attempt of an agent or agent-decision node through
// the agent harness (package agents):
//
//  1. the node's agent revision must be pinned in the compiled revision
//     (AGENT_UNAVAILABLE otherwise; the harness checks the stored revision
//     against the pinned hash);
//  2. the run's permission snapshot (minus current revocations) must hold
//     what the node needs (its templates' scopes); tools are authorized
//     inside the harness, when offered and again before every call, against
//     the run's authority as stored now (permissions minus revocations,
//     toolGrants, a service actor's tool policy): a withheld tool is
//     tool.denied, not a node failure;
//  3. the call input is built from the mapping (MAPPING_UNRESOLVED);
//  4. the harness runs or resumes the agent from its saved transcript,
//     heartbeating liveness only, appending tool.* and agent.turn events and
//     totalling usage on the run;
//  5. an agent's validated answer is returned on port out; an
//     agent-decision's outcome picks port pass or fail, carrying the node's
//     input (as a simulated decision does);
//  6. a call of a tool whose toolset requires approval ends the attempt
//     before anything about the call runs, with NodeResult.Approval (the
//     call, pending in the transcript); the interpreter waits for the
//     decision and dispatches the attempt again with it (in.Approval).
func (a *NodeActivities) agent(ctx context.Context, in execution.NodeInput, rev *revision, n graph.Node) (execution.NodeResult, error) {
	if a.agents == nil {
		return execution.NodeResult{}, permanent(execution.ErrAgentUnavailable, nil, "node %q: this worker has no agent runtime", n.ID)
	}
	if n.Agent == nil {
		return execution.NodeResult{}, permanent(execution.ErrAgentUnavailable, nil, "node %q names no agent", n.ID)
	}
	pinned, ok := pinnedAgent(rev, *n.Agent)
	if !ok {
		return execution.NodeResult{}, permanent(execution.ErrAgentUnavailable, nil,
			"node %q: agent %s is not pinned in revision %s", n.ID, n.Agent, in.Checksum)
	}
	if missing := auth.Missing(in.Permissions, rev.compiled.NodePermissions[n.ID]); len(missing) > 0 {
		return execution.NodeResult{}, permanentWithDetails(execution.ErrPermissionDenied, map[string]any{"missing": missing},
			"node %q needs permissions the run does not hold: %v", n.ID, missing)
	}
	m := &mapper{ctx: ctx, in: in, node: n, values: a.values, variables: a.variables}
	input, err := m.callInput()
	if err != nil {
		return execution.NodeResult{}, err
	}

	if err := awaitCarried(ctx); err != nil { // the log first, then the agent's tools
		return execution.NodeResult{}, err
	}
	hb := startHeartbeats(ctx)
	defer hb.stop()
	// The harness keeps the agent's deadline itself (AGENT_TIMEOUT);
	// bounded holds it even if a provider or tool ignored its context.
	timeout := nodeTimeout(n)
	actx, cancel := context.WithTimeout(ctx, timeout+handlerGrace)
	defer cancel()
	onPanic := func(p any) error {
		a.logger.Error("agent harness panicked", "node", n.ID, "agent", n.Agent.String(), "panic", p)
		return permanent(execution.ErrAgentUnavailable, nil, "node %q: the agent harness panicked", n.ID)
	}
	res, err := bounded(actx, onPanic, func() (agents.Result, error) {
		return a.agents.Run(actx, agents.Job{
			TenantID: in.TenantID, TenantName: in.TenantName, RunID: in.RunID, WorkflowKey: in.WorkflowKey,
			NodeID: n.ID, Attempt: in.Attempt, Dispatch: in.Redispatch, Decision: n.Kind == graph.KindAgentDecision,
			Agent: pinned, Actions: rev.actions, Toolset: toolsetOf(rev.compiled.Document, n),
			Input: input, Actor: in.Actor, Permissions: in.Permissions, Authority: a.authority(in), RunStartedAt: runDay(in),
			Approval: in.Approval, Timeout: timeout,
			Heartbeat: func() { hb.beat() }, // liveness only: no progress details
		})
	})
	if err != nil {
		if cancelled(ctx) {
			return execution.NodeResult{}, ctx.Err()
		}
		if actx.Err() != nil && !isApplicationError(err) {
			return execution.NodeResult{}, temporal.NewApplicationErrorWithCause(
				fmt.Sprintf("node %q: agent %s did not finish within %v", n.ID, n.Agent, timeout), agents.ErrAgentTimeout, err)
		}
		return execution.NodeResult{}, err
	}
	if res.Approval != nil {
		// Stopped before a call that needs a person's decision: the
		// interpreter waits for it, then dispatches this attempt again.
		return execution.NodeResult{Approval: res.Approval}, nil
	}
	if n.Kind == graph.KindAgentDecision {
		port := PortPass
		if res.Outcome == "fail" {
			port = PortFail
		}
		v, err := a.carriedInput(ctx, in, n)
		if err != nil {
			return execution.NodeResult{}, err
		}
		return execution.NodeResult{Port: port, Value: v}, nil
	}
	v, err := a.values.result(ctx, in, PortOut, res.Output)
	if err != nil {
		return execution.NodeResult{}, err
	}
	return execution.NodeResult{Port: PortOut, Value: v}, nil
}

// authority is what the harness re-authorizes with before the offer and
// every tool call: the run's authority as stored now (revocations.go); nil
// without a store, when the snapshot decides alone.
func (a *NodeActivities) authority(in execution.NodeInput) agents.Authority {
	if a.authorities == nil {
		return nil
	}
	return runAuthority{src: a.authorities, tenantID: in.TenantID, runID: in.RunID}
}

// pinnedAgent returns the agent contract the revision pinned for ref.
func pinnedAgent(rev *revision, ref graph.AgentRef) (graph.AgentContract, bool) {
	for _, c := range rev.compiled.Agents {
		if c.Key == ref.Key && c.Revision == ref.Revision {
			return c, true
		}
	}
	return graph.AgentContract{}, false
}

// toolsetOf is the node's effective toolset: its own tools override, else
// the document's default; nil when neither selects one (then the toolset
// term does not restrict the offer).
func toolsetOf(doc graph.Document, n graph.Node) *graph.Toolset {
	name := n.Tools
	if name == "" {
		name = doc.Tools
	}
	if name == "" {
		return nil
	}
	ts, ok := doc.Toolsets[name]
	if !ok {
		// Validation refuses an unknown toolset; an empty one offers nothing.
		return &graph.Toolset{}
	}
	return &ts
}

func isApplicationError(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr)
}
