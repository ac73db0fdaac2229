package worker

import (
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/weftworks/weft/workflows"
)

// Register registers everything a weft worker runs: the interpreter workflow
// and the node activities, one small activities struct per concern holding
// only what it needs. Tests that build their own worker call it too, so they
// run exactly what production runs.
func Register(r sdkworker.Registry, d Deps) error {
	workflows.Register(r)
	return nil
}
