package worker

import (
	"fmt"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/variables"
	"github.com/weftworks/weft/workflows"
)

// Register registers everything a weft worker runs: the interpreter workflow
// and ScheduledEnqueue, the node activities (package activities registers one
// small struct per concern, each holding only what it needs) backed by the
// built-in and Deps.Actions actions, and the schedule-firing activity.
// Tests that build their own worker call it too, so they run exactly what
// production runs.
func Register(r sdkworker.Registry, d Deps) error {
	actions, err := Actions(d)
	if err != nil {
		return err
	}
	vars, err := variables.Builtin(d.Store)
	if err != nil {
		return fmt.Errorf("worker: variables: %w", err)
	}
	providers, err := agents.ProvidersFromConfig(d.Config)
	if err != nil {
		return fmt.Errorf("worker: agent providers: %w", err)
	}
	readiness := provider.NewReadiness(providers, provider.ReadinessOptions{TTL: d.Config.ProviderProbeTTL, Logger: d.Logger})
	rt, err := agents.New(agents.Deps{Store: d.Store, Actions: actions, Providers: providers, Variables: vars,
		Readiness: readiness, Logger: d.Logger})
	if err != nil {
		return fmt.Errorf("worker: agents: %w", err)
	}
	// Schedule firings enqueue through the one execution capability, as a
	// service actor, like every other run.
	runs, err := newStarter(d, vars)
	if err != nil {
		return err
	}
	workflows.Register(r)
	activities.Register(r, activities.Deps{Store: d.Store, Actions: actions, Logger: d.Logger, Observer: d.Metrics,
		Variables: vars, Agents: rt, Drain: d.Config.WorkerDrain})
	if err := activities.RegisterBridges(r, activities.BridgeDeps{Store: d.Store, Starter: runs, Logger: d.Logger}); err != nil {
		return fmt.Errorf("worker: bridges: %w", err)
	}
	return nil
}

// Actions is the worker's action registry: the built-ins and Deps.Actions
// (README "Adding an action in Go"). Serve publishes its contracts.
func Actions(d Deps) (*catalog.Registry, error) {
	actions, err := catalog.NewRegistry(append(catalog.Builtins(catalog.BuiltinDeps{Notes: d.Store}), d.Actions...)...)
	if err != nil {
		return nil, fmt.Errorf("worker: actions: %w", err)
	}
	return actions, nil
}

// newStarter is the worker's execution capability: schedule firings
// enqueue through it, and its dispatcher starts throttled runs when runs
// this worker settles free their slots.
func newStarter(d Deps, vars *variables.Registry) (*starter.Starter, error) {
	resolver, err := publication.NewResolver(d.Store, vars)
	if err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	resolver.HistoryBudget = &d.Config.History
	runs, err := starter.New(starter.Deps{
		Store: d.Store, Temporal: d.Temporal, TaskQueue: d.Config.TaskQueue,
		UIURL: d.Config.TemporalUIURL, Namespace: d.Config.TemporalNamespace, Logger: d.Logger,
		Resolver: resolver, Durability: d.Config.Durability,
	})
	if err != nil {
		return nil, fmt.Errorf("worker: starter: %w", err)
	}
	return runs, nil
}
