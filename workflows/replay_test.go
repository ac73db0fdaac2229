package workflows

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
)

// TestReplay replays every committed history (recorded from the dev server
// by `go test ./workflows -run TestDevServer -record`) against the current
// interpreter. A failure means a change altered the commands existing runs
// recorded: guard it with workflow.GetVersion (see changeInterpreterV1).
// It needs no server.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no histories in testdata/: record them with -run TestDevServer -record")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			replayer := worker.NewWorkflowReplayer()
			Register(replayer)
			require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, file))
		})
	}
}
