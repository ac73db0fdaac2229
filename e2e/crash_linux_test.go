//go:build linux

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
)

// crashGraph: a slow node, then a business write. Short timeouts make the
// dead worker's attempt time out quickly (the heartbeat timeout is the
// node timeout when below 30 s) and retries pick the work up. The nap is
// long enough that a loaded machine still kills the worker mid-nap: the
// test polls four runs' event logs between the first nap's start and the
// kill, and a 1.5 s nap once ended before the kill in CI.
const crashGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "nap", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1},
     "mapping": {"ms": {"literal": 4000}}, "timeoutMs": 5000,
     "retry": {"maxAttempts": 4, "initialIntervalMs": 200, "backoff": 1}},
    {"id": "save", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "workspace.notes.write", "version": 1},
     "mapping": {"title": {"literal": "drill"}, "body": {"pointer": "/in"}}, "timeoutMs": 3000,
     "retry": {"maxAttempts": 4, "initialIntervalMs": 200, "backoff": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "nap.in"}, {"from": "nap.out", "to": "save.in"}, {"from": "save.out", "to": "out.in"}]
}`

// spawnWorker runs a worker in another process (this test binary,
// re-executed into runHelperWorker) so that SIGKILL is a real crash: no
// deferred cleanup, no graceful shutdown, sticky caches lost.
func (e *env) spawnWorker() (*exec.Cmd, *bytes.Buffer) {
	e.t.Helper()
	exe, err := os.Executable()
	require.NoError(e.t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(),
		helperWorkerEnv+"=1",
		"DATABASE_URL="+e.dbURL,
		"TEMPORAL_ADDRESS="+e.temporal.HostPort,
		"TEMPORAL_NAMESPACE=default",
		"WEFT_TASK_QUEUE="+e.queue,
		"WEFT_JWT_SECRET="+jwtSecret,
	)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	// Never outlive the test process, even if it panics.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(e.t, cmd.Start())
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("helper worker output:\n%s", logs.String())
		}
	})
	return cmd, &logs
}

func TestWorkerKilledMidRunRecovers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("crash", crashGraph)
	cmd, _ := e.spawnWorker()

	const runs = 4
	ids := make([]string, runs)
	for i := range runs {
		ids[i] = e.run("crash", map[string]any{"title": "drill", "i": i})
	}
	for _, id := range ids {
		e.waitForEvent(id, "node.started nap", 30*time.Second)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	e.startWorker()
	var wg sync.WaitGroup
	views := make([]runView, runs)
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			views[i] = e.wait(id, 60*time.Second)
		}()
	}
	wg.Wait()
	interrupted := 0
	for i, id := range ids {
		require.Equal(t, execution.StatusSucceeded, views[i].Status, "run %s: %v", id, e.eventTypes(id))
		e.checkChain(id)
		// The event log has no duplicate: each attempt starts once.
		seen := map[string]bool{}
		for _, ev := range e.events(id) {
			switch ev.Type {
			case execution.EventNodeStarted:
				key := fmt.Sprintf("%s/%d", ev.NodeID, ev.Attempt)
				require.False(t, seen[key], "run %s: node %s attempt %d started twice", id, ev.NodeID, ev.Attempt)
				seen[key] = true
			case execution.EventNodeAttemptFailed:
				var d execution.EventData
				require.NoError(t, json.Unmarshal(ev.Data, &d))
				if ev.NodeID == "nap" && d.Error != nil && d.Error.Type == "TIMEOUT" {
					interrupted++
				}
			}
		}
	}
	// The kill really cut attempts short: the dead worker's leases expired.
	require.Positive(t, interrupted, "no attempt was interrupted by the kill")

	// Each business write happened exactly once, attributed to its run and node.
	res := e.do(http.MethodGet, "/v1/notes?limit=200", e.token, nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	perRun := map[string]int{}
	for _, n := range res.JSON(t)["notes"].([]any) {
		note := n.(map[string]any)
		require.Equal(t, "save", note["nodeId"])
		require.Equal(t, "drill", note["title"])
		perRun[note["runId"].(string)]++
	}
	for _, id := range ids {
		require.Equal(t, 1, perRun[id], "notes written by run %s", id)
	}
	require.Len(t, perRun, runs)
}
