package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/sampledata"
	"github.com/weftworks/weft/store"
)

// Simulation error types (ApplicationError.Type), all non-retryable.
const (
	// ErrInvalidFixtures: the run's stored fixtures do not parse (the
	// starter validates them at enqueue, so this means a corrupt row).
	ErrInvalidFixtures = "INVALID_FIXTURES"
	// ErrNoDefault: no fixture for the node and no schema-valid default can
	// be generated from its output schema; the message says to add one.
	ErrNoDefault = "NO_DEFAULT_OUTPUT"
	// ErrNotSimulation: the node input says simulation but the run row
	// does not (or the reverse): refuse rather than guess.
	ErrNotSimulation = "NOT_A_SIMULATION"
)

// DefaultFixtureCacheSize is how many runs' parsed fixtures a worker keeps.
// A run's fixtures are at most fixtures.MaxBytes (fixtures.MaxRecordedBytes
// for a replay's) and never change.
const DefaultFixtureCacheSize = 64

// fixtureSource reads a run's mode and fixtures (store.Store).
type fixtureSource interface {
	RunFixtures(ctx context.Context, tenantID, runID string) (mode string, fixtures json.RawMessage, err error)
}

var _ fixtureSource = (*store.Store)(nil)

// simulate runs one attempt of an agent, agent-decision or action node in
// simulation mode (SPEC §4). It never calls an action handler, a provider
// or a business write. Like a live attempt it builds the call input from
// the mapping (MAPPING_UNRESOLVED) and, for actions, validates it against
// the pinned inputSchema (SCHEMA_VIOLATION), so a simulation catches wiring
// mistakes; then it returns the run's fixture for (node, attempt), or a
// deterministic schema-valid default:
//
//   - error fixture: an ApplicationError of the fixture's type (default
//     SIMULATED_ERROR), retryable unless the fixture says otherwise;
//   - agent and action: port out with the fixture's output, validated
//     against the action's outputSchema or the agent's output schema
//     (INVALID_OUTPUT), or the default generated from that schema and the
//     out port's schema;
//   - agent-decision: port pass (the default) or the fixture's outcome,
//     carrying the node's input like a live decision.
//
// The fixture's durationMs travels back as NodeResult.DurationMs, or as
// FailureDetails for an error, so the interpreter advances the virtual
// clock; nothing sleeps. Permissions are not rechecked: nothing is called.
func (a *NodeActivities) simulate(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
	rev, n, err := a.revisions.node(ctx, in)
	if err != nil {
		return execution.NodeResult{}, err
	}
	if !fixtures.Simulated(n.Kind) {
		return execution.NodeResult{}, permanent(execution.ErrNodeNotFound, nil,
			"node %q is a %s, which does not run as an activity", n.ID, n.Kind)
	}
	set, err := a.fixtures.get(ctx, in.TenantID, in.RunID)
	if err != nil {
		return execution.NodeResult{}, err
	}
	fx, _ := set.For(n.ID, in.Attempt)

	m := &mapper{ctx: ctx, in: in, node: n, values: a.values, variables: a.variables}
	input, err := m.callInput()
	if err != nil {
		return execution.NodeResult{}, err
	}
	var pinned graph.PinnedAction
	if n.Kind == graph.KindAction {
		if pinned, err = pinnedAction(in, rev, n); err != nil {
			return execution.NodeResult{}, err
		}
		inSchema, _, err := rev.actionSchemas(pinned)
		if err != nil {
			return execution.NodeResult{}, err
		}
		if errs, err := validate(inSchema, input); err != nil || errs != nil {
			return execution.NodeResult{}, permanentWithDetails(execution.ErrSchemaViolation, map[string]any{"errors": errs},
				"node %q: call input does not match %s inputSchema: %s", n.ID, n.Action, summarizeOr(errs, err))
		}
	}

	if fx.Error != nil {
		return execution.NodeResult{}, simulatedError(n, *fx.Error, fx.DurationMs)
	}
	res := execution.NodeResult{Port: PortOut, DurationMs: fx.DurationMs}
	switch n.Kind {
	case graph.KindAgentDecision:
		res.Port = PortPass
		if fx.Outcome == fixtures.OutcomeFail {
			res.Port = PortFail
		}
		res.Value, err = a.carriedInput(ctx, in, n)
	default:
		var output json.RawMessage
		output, err = a.simulatedOutput(in, rev, n, pinned, fx)
		if err == nil {
			res.Value, err = a.values.result(ctx, in, PortOut, output)
		}
	}
	if err != nil {
		return execution.NodeResult{}, err
	}
	return res, nil
}

// pinnedAction returns the action contract the revision pinned for n,
// refusing risks runs never execute (as a live attempt does). The worker
// need not register the action: simulation never calls its handler.
func pinnedAction(in execution.NodeInput, rev *revision, n graph.Node) (graph.PinnedAction, error) {
	if n.Action == nil {
		return graph.PinnedAction{}, permanent(execution.ErrActionUnavailable, nil, "node %q names no action", n.ID)
	}
	pinned, ok := rev.actions[*n.Action]
	if !ok {
		return graph.PinnedAction{}, permanent(execution.ErrActionUnavailable, nil,
			"node %q: action %s is not pinned in revision %s", n.ID, n.Action, in.Checksum)
	}
	if pinned.Risk != graph.RiskRead && pinned.Risk != graph.RiskWorkspaceWrite {
		return graph.PinnedAction{}, permanent(execution.ErrActionUnavailable, nil,
			"node %q: action %s has risk %q, which runs never execute", n.ID, n.Action, pinned.Risk)
	}
	return pinned, nil
}

// simulatedOutput is the fixture's output, validated like a live output,
// or the node's default.
func (a *NodeActivities) simulatedOutput(in execution.NodeInput, rev *revision, n graph.Node, pinned graph.PinnedAction, fx fixtures.Fixture) (json.RawMessage, error) {
	contract, what, err := outputContract(in, rev, n, pinned)
	if err != nil {
		return nil, err
	}
	if fx.Output == nil {
		return rev.defaultOutput(n, contract, what)
	}
	if len(contract) > 0 {
		s, err := rev.schema("out:"+what, func() (json.RawMessage, error) { return contract, nil })
		if err != nil {
			return nil, permanent(execution.ErrInvalidOutput, err, "node %q: %s does not compile: %v", n.ID, what, err)
		}
		if errs, err := validate(s, fx.Output); err != nil || errs != nil {
			return nil, permanentWithDetails(execution.ErrInvalidOutput, map[string]any{"errors": errs},
				"node %q: the fixture output does not match %s: %s", n.ID, what, summarizeOr(errs, err))
		}
	}
	return fx.Output, nil
}

// outputContract is the schema a live output of n is validated against:
// the action's outputSchema or the pinned agent's output schema (nil when
// the agent declares none), and a name for messages.
func outputContract(in execution.NodeInput, rev *revision, n graph.Node, pinned graph.PinnedAction) (json.RawMessage, string, error) {
	if n.Kind == graph.KindAction {
		return pinned.OutputSchema, n.Action.String() + " outputSchema", nil
	}
	if n.Agent == nil {
		return nil, "", permanent(execution.ErrAgentUnavailable, nil, "node %q names no agent", n.ID)
	}
	agent, ok := rev.agents[*n.Agent]
	if !ok {
		return nil, "", permanent(execution.ErrAgentUnavailable, nil,
			"node %q: agent %s is not pinned in revision %s", n.ID, n.Agent, in.Checksum)
	}
	return agent.OutputSchema, "agent " + n.Agent.String() + " output schema", nil
}

// defaultOutput generates (once per revision and node) the deterministic
// schema-valid default of a simulated node: valid against its contract's
// output schema and its out port's schema.
func (r *revision) defaultOutput(n graph.Node, contract json.RawMessage, what string) (json.RawMessage, error) {
	r.mu.Lock()
	v, ok := r.defaults[n.ID]
	r.mu.Unlock()
	if ok {
		return v, nil
	}
	schemas := []json.RawMessage{contract}
	if port, ok := r.compiled.Document.SchemaByName(n.Outputs[PortOut]); ok {
		schemas = append(schemas, port)
	}
	v, err := sampledata.Generate(schemas...)
	if err != nil {
		return nil, permanent(ErrNoDefault, err,
			"node %q: no fixture, and no schema-valid default can be generated from %s and port out (%q): %v; give the node a fixture",
			n.ID, what, n.Outputs[PortOut], err)
	}
	r.mu.Lock()
	r.defaults[n.ID] = v
	r.mu.Unlock()
	return v, nil
}

// carriedInput is what an agent-decision's pass/fail carry: its one input
// port's value unchanged (a reference stays a reference), or with several
// ports an object keyed by port.
func (a *NodeActivities) carriedInput(ctx context.Context, in execution.NodeInput, n graph.Node) (execution.Value, error) {
	ports := slices.Sorted(maps.Keys(n.Inputs))
	if len(ports) == 1 {
		v, ok := in.Inputs[ports[0]]
		if !ok {
			return execution.Value{}, permanent(execution.ErrMappingUnresolved, nil, "node %q: input port %q has no value", n.ID, ports[0])
		}
		return v, nil
	}
	obj := make(map[string]json.RawMessage, len(ports))
	for _, p := range ports {
		raw, err := a.values.port(ctx, in, p)
		if err != nil {
			return execution.Value{}, err
		}
		obj[p] = raw
	}
	raw, err := graph.EncodeValue(obj)
	if err != nil {
		return execution.Value{}, permanent(execution.ErrSchemaViolation, err, "node %q: %v", n.ID, err)
	}
	return a.values.result(ctx, in, PortPass, raw)
}

// simulatedError is the failure an error fixture asks for.
func simulatedError(n graph.Node, e fixtures.Error, durationMs int64) error {
	details := execution.FailureDetails{DurationMs: durationMs}
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("node %q (simulated): %s", n.ID, e.Message), e.TypeOrDefault(),
		temporal.ApplicationErrorOptions{NonRetryable: !e.IsRetryable(), Details: []any{details}})
}

// fixtureCache reads runs' parsed fixtures, once per worker per run
// (runMemo): a run's fixtures are written once, at enqueue, so entries
// never go stale.
type fixtureCache struct {
	src  fixtureSource
	memo *runMemo[fixtures.Set]
}

func newFixtureCache(src fixtureSource, size int) *fixtureCache {
	return &fixtureCache{src: src, memo: newRunMemo[fixtures.Set](size, DefaultFixtureCacheSize)}
}

// get returns the run's fixtures, loading them on a miss. A run that is
// not a simulation is refused: its nodes must never be simulated.
func (c *fixtureCache) get(ctx context.Context, tenantID, runID string) (fixtures.Set, error) {
	return c.memo.get(ctx, tenantID, runID, func(ctx context.Context) (fixtures.Set, error) {
		mode, raw, err := c.src.RunFixtures(ctx, tenantID, runID)
		if err != nil {
			return nil, storeError(ErrInvalidFixtures, err, "load the fixtures of run "+runID)
		}
		if mode != string(execution.ModeSimulation) {
			return nil, permanent(ErrNotSimulation, nil, "run %s is a %s run; its nodes are never simulated", runID, mode)
		}
		// Stored fixtures passed the starter's checks at enqueue, under
		// fixtures.MaxRecordedBytes at most (a replay's derived fixtures).
		set, problems := fixtures.ParseWithin(raw, fixtures.MaxRecordedBytes)
		if len(problems) > 0 {
			return nil, permanentWithDetails(ErrInvalidFixtures, map[string]any{"errors": problems},
				"run %s: stored fixtures are invalid at %q: %s", runID, problems[0].Path, problems[0].Message)
		}
		return set, nil
	})
}
