package workflows

import (
	"io/fs"
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
	// testdata/ holds the current interpreter's histories; each folder below
	// it, the histories recorded before one change (named after it).
	var files []string
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(path) == ".json" {
			files = append(files, path)
		}
		return err
	})
	require.NoError(t, err)
	require.NotEmpty(t, files, "no histories in testdata/: record them with -run TestDevServer -record")
	for _, file := range files {
		name, _ := filepath.Rel("testdata", file)
		t.Run(name, func(t *testing.T) {
			replayer := worker.NewWorkflowReplayer()
			Register(replayer)
			require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, file))
		})
	}
}
