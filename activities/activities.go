// Package activities implements the Temporal activities the interpreter
// workflow calls by name (execution.Activity*): loading the execution plan,
// appending events, and running nodes — gates, validators and merges as
// local activities, actions (and later agents) as activities. Each concern is
// one small struct holding only what it needs; Register wires them.
//
// Activities fetch node bodies by (checksum, node id) from the compiled
// revision, which is immutable and so cached in memory, together with the
// CEL programs and JSON schemas compiled from it.
package activities

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

// Deps are what the activities need. Store, Actions, Variables and Agents
// are required; nothing is defaulted.
type Deps struct {
	Store   *store.Store
	Actions *catalog.Registry
	Logger  *slog.Logger
	// Variables resolves mapping templates after bound values: the
	// process's registry (variables.Builtin over the store: context.*,
	// run.id, workflow.key, agent.name).
	Variables *variables.Registry
	// Agents runs live agent and agent-decision nodes (agents.New over the
	// same Store, Actions and Variables, with the configured providers).
	Agents *agents.Runtime
	// RevisionCacheSize bounds the compiled revisions kept in memory
	// (DefaultRevisionCacheSize when 0).
	RevisionCacheSize int
	// Observer is told the duration and outcome of every node attempt
	// (observe.go); nil observes nothing. Attempts are logged either way.
	Observer NodeObserver
	// Revocations answers every live attempt's revocation read: the
	// process's revocation cache (revcache.Cache, running) or nil to read
	// each attempt's from Store. Tool calls read the run's authority from
	// Store either way.
	Revocations RevocationSource
	// PrefetchRunConstants reads a run's constants (lean inputs,
	// withRunConstants) while its workflow's first task loads the plan,
	// so its first attempt does not read them on its path. Worth it when
	// runs send lean inputs (WEFT_LEAN_INPUTS); otherwise it only adds a
	// read per workflow execution.
	PrefetchRunConstants bool
	// Drain is the worker's drain window on shutdown (WEFT_WORKER_DRAIN,
	// the SDK's WorkerStopTimeout): attempts still running shortly before
	// it ends are handed back as WORKER_DRAINED (durability.go).
	Drain time.Duration
}

// Register registers the activities under their execution names. Any
// worker.Registry (a worker.Worker) is accepted; it takes the narrower
// ActivityRegistry so TestActivityEnvironment can be passed too. A missing
// required dependency is an error naming it; nothing is registered then.
func Register(r worker.ActivityRegistry, d Deps) error {
	switch {
	case d.Store == nil:
		return errors.New("activities: Store is required")
	case d.Actions == nil:
		return errors.New("activities: Actions (the action registry) is required")
	case d.Variables == nil:
		return errors.New("activities: Variables (the variable registry) is required")
	case d.Agents == nil:
		return errors.New("activities: Agents (the agent runtime) is required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	revs := newRevisionCache(d.Store, d.RevisionCacheSize)
	vals := valueCodec{store: d.Store}

	var revocations RevocationSource = d.Store
	if d.Revocations != nil {
		revocations = d.Revocations
	}
	consts := newRunConstants(d.Store, DefaultRunConstantsCacheSize)
	plans := newPlanActivities(d.Store)
	if d.PrefetchRunConstants {
		plans.constants = consts
	}
	// A run's appends, carried and flushed, take turns in this process (runAppends).
	// Appends of different runs, carried and flushed, share commits (appendGroups).
	appends := newGroupedRunAppends(d.Store, newAppendedRuns(appendedRunsSize))
	events := &EventActivities{events: appends}
	local := &LocalNodeActivities{revisions: revs, values: vals}
	nodes := &NodeActivities{revisions: revs, values: vals, actions: d.Actions, variables: d.Variables, logger: d.Logger,
		fixtures: newFixtureCache(d.Store, DefaultFixtureCacheSize), agents: d.Agents,
		revocations: revocations, authorities: d.Store}

	r.RegisterActivityWithOptions(plans.LoadPlan, activity.RegisterOptions{Name: execution.ActivityLoadPlan})
	r.RegisterActivityWithOptions(loggedAppends(events.AppendEvents, d.Logger), activity.RegisterOptions{Name: execution.ActivityAppendEvents})
	// recorded (record.go) keeps the live results events leave out.
	// withRunConstants (constants.go) completes lean inputs from the run's record.
	runLocal := observed(durable(withRunConstants(recorded(local.RunLocalNode, d.Store), consts), d.Drain), d.Observer, d.Logger)
	run := observed(durable(withCarriedEvents(withRunConstants(recorded(nodes.RunNode, d.Store), consts), appends, d.Logger), d.Drain),
		d.Observer, d.Logger)
	r.RegisterActivityWithOptions(runLocal, activity.RegisterOptions{Name: execution.ActivityRunLocalNode})
	r.RegisterActivityWithOptions(run, activity.RegisterOptions{Name: execution.ActivityRunNode})
	// The same two handlers under each kind's name (execution.NodeActivity);
	// each dispatches on the node's kind in the pinned revision.
	for _, k := range []graph.Kind{graph.KindGate, graph.KindValidator, graph.KindMerge} {
		name, _ := execution.NodeActivity(k)
		r.RegisterActivityWithOptions(runLocal, activity.RegisterOptions{Name: name})
	}
	for _, k := range []graph.Kind{graph.KindAction, graph.KindAgent, graph.KindAgentDecision} {
		name, _ := execution.NodeActivity(k)
		r.RegisterActivityWithOptions(run, activity.RegisterOptions{Name: name})
	}
	stored := &ValueActivities{values: d.Store}
	r.RegisterActivityWithOptions(stored.StoreValues, activity.RegisterOptions{Name: execution.ActivityStoreValues})

	// Approvals (approvals.go): a simulated approval node's local attempt,
	// and what a decision's verification reads.
	name, _ := execution.NodeActivity(graph.KindApproval)
	r.RegisterActivityWithOptions(observed(durable(withRunConstants(nodes.approval, consts), d.Drain), d.Observer, d.Logger),
		activity.RegisterOptions{Name: name})
	approvals := &ApprovalActivities{decisions: d.Store}
	r.RegisterActivityWithOptions(approvals.LoadDecision, activity.RegisterOptions{Name: execution.ActivityLoadDecision})
	r.RegisterActivityWithOptions(approvals.UpdateIdentity, activity.RegisterOptions{Name: execution.ActivityUpdateIdentity})
	return nil
}

// permanent is a non-retryable application error of type errType: the same
// input would fail the same way, so the interpreter ends the node at once.
func permanent(errType string, cause error, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), errType, cause)
}

// permanentWithDetails is permanent with details the interpreter can record.
func permanentWithDetails(errType string, details any, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), errType, nil, details)
}

// storeError classifies a store error: a refusal with a stable code (bad
// input, missing row) is permanent; anything else (a connection blip) is
// returned as is, so the activity is retried.
func storeError(errType string, err error, what string) error {
	if errors.Is(err, failure.ErrNotFound) || failure.CodeOf(err) != failure.CodeInternal {
		return permanent(errType, err, "%s: %v", what, err)
	}
	return err
}

// cancelled reports whether the activity itself was cancelled (or timed out
// by Temporal), as opposed to a deadline of our own.
func cancelled(ctx context.Context) bool { return ctx.Err() != nil }
