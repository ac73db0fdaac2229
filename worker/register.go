package worker

import (
	"fmt"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/activities"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/workflows"
)

// Register registers everything a weft worker runs: the interpreter workflow
// and the node activities (package activities registers one small struct per
// concern, each holding only what it needs), backed by the built-in actions.
// Tests that build their own worker call it too, so they run exactly what
// production runs.
func Register(r sdkworker.Registry, d Deps) error {
	actions, err := catalog.NewRegistry(catalog.Builtins(catalog.BuiltinDeps{Notes: d.Store})...)
	if err != nil {
		return fmt.Errorf("worker: actions: %w", err)
	}
	workflows.Register(r)
	activities.Register(r, activities.Deps{Store: d.Store, Actions: actions, Logger: d.Logger, Observer: d.Metrics})
	return nil
}
