package worker

import (
	"fmt"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/replay"
	"github.com/weftworks/weft/workflows"
)

// Register registers everything a weft worker runs: the interpreter workflow
// and ScheduledEnqueue, the node activities (package activities registers one
// small struct per concern, each holding only what it needs) backed by the
// built-in and Deps.Actions actions, the schedule-firing activity, which
// enqueues through Deps.Starter, and the replay workflow with its
// activities (package replay), which enqueue simulations through it too.
// Tests that build their own worker call it too, so they run exactly what
// production runs.
func Register(r sdkworker.Registry, d Deps) error {
	if err := d.check(); err != nil {
		return err
	}
	actions, err := Actions(d)
	if err != nil {
		return err
	}
	return register(r, d, actions)
}

// register is Register with the action registry already built (Serve
// publishes its contracts first).
func register(r sdkworker.Registry, d Deps, actions *catalog.Registry) error {
	providers, err := agents.ProvidersFromConfig(d.Config)
	if err != nil {
		return fmt.Errorf("worker: agent providers: %w", err)
	}
	readiness := provider.NewReadiness(providers, provider.ReadinessOptions{TTL: d.Config.ProviderProbeTTL, Logger: d.Logger})
	rt, err := agents.New(agents.Deps{Store: d.Store, Actions: actions, Providers: providers, Variables: d.Variables,
		Readiness: readiness, Logger: d.Logger})
	if err != nil {
		return fmt.Errorf("worker: agents: %w", err)
	}
	workflows.Register(r)
	if err := activities.Register(r, activities.Deps{Store: d.Store, Actions: actions, Logger: d.Logger, Observer: d.Metrics,
		Variables: d.Variables, Agents: rt, Drain: d.Config.WorkerDrain, Revocations: d.Revocations,
		PrefetchRunConstants: d.Config.LeanInputs}); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	// Schedule firings enqueue through the one execution capability, as a
	// service actor, like every other run.
	if err := activities.RegisterBridges(r, activities.BridgeDeps{Store: d.Store, Starter: d.Starter,
		Variables: d.Variables, Logger: d.Logger}); err != nil {
		return fmt.Errorf("worker: bridges: %w", err)
	}
	// Replays (issue 21) enqueue their simulations through the same
	// starter; the workflow only schedules.
	replays, err := replay.NewActivities(replay.ActivityDeps{Store: d.Store, Starter: d.Starter,
		Deriver: replay.Recordings{Store: d.Store}, Logger: d.Logger})
	if err != nil {
		return fmt.Errorf("worker: replays: %w", err)
	}
	replay.Register(r, replays)
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
