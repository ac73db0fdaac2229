//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/execution"
)

// noterAgent writes a note, then sleeps in a tool: the drill kills the
// worker during the sleep, after the note's call has settled.
const noterAgent = `{
  "instructions": "Take a note, then wait.",
  "allowedTools": ["workspace.notes.write@1", "core.sleep@1"],
  "timeoutMs": 30000,
  "sim": {
    "toolCalls": [
      {"tool": "workspace.notes.write@1", "input": {"title": "drill", "body": {"n": 1}}},
      {"tool": "core.sleep@1", "input": {"ms": 1500}}
    ],
    "output": {"done": true}
  }
}`

// noterGraph: one attempt (no retry block). The dead worker's lease lapses
// after the run's lease timeout and the same attempt resumes on the next
// worker from the saved transcript.
const noterGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "noter", "kind": "agent", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "agent": {"key": "noter", "revision": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "noter.in"}, {"from": "noter.out", "to": "out.in"}]
}`

// toolCallStarted reports whether the run's log holds tool.started for
// call ordinal of node.
func (e *env) toolCallStarted(id, node string, ordinal int) bool {
	for _, ev := range e.events(id) {
		if ev.Type != execution.EventToolStarted || ev.NodeID != node {
			continue
		}
		var d struct{ Ordinal int }
		if json.Unmarshal(ev.Data, &d) == nil && d.Ordinal == ordinal {
			return true
		}
	}
	return false
}

func TestWorkerKilledMidAgentWritesExactlyOneNote(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	e.addAgent("noter", noterAgent)
	e.publish("noter", noterGraph)
	w := e.spawnWorker()

	const runs = 3
	ids := make([]string, runs)
	for i := range runs {
		ids[i] = e.run("noter", map[string]any{"i": i})
	}
	// Kill the worker once every run is inside its second tool call: the
	// note's call has completed and been saved.
	for _, id := range ids {
		require.Eventually(t, func() bool { return e.toolCallStarted(id, "noter", 2) }, 30*time.Second, 30*time.Millisecond,
			"run %s never started its sleep call: %v", id, e.eventTypes(id))
	}
	w.kill(syscall.SIGKILL, 10*time.Second)

	e.startWorker()
	for _, id := range ids {
		v := e.wait(id, 60*time.Second)
		require.Equal(t, execution.StatusSucceeded, v.Status, "run %s: %v", id, e.eventTypes(id))
		require.JSONEq(t, `{"done":true}`, string(v.Output))
		e.checkChain(id)
		_, attempt, _, _ := v.node(t, "noter")
		require.Equal(t, 1, attempt, "the lost lease spent no attempt")
		lost := 0
		for _, ev := range e.events(id) {
			require.NotEqual(t, execution.EventNodeAttemptFailed, ev.Type, "run %s: %s", id, ev.Data)
			if ev.Type == execution.EventNodeAttemptLeaseLost {
				lost++
			}
		}
		require.Equal(t, 1, lost, "run %s: the killed dispatch is recorded as a lost lease", id)

		// The note's call ran once; the interrupted sleep ran again within
		// the same attempt (its tool.started, keyed by attempt and call,
		// is recorded once); the model was asked for each turn once.
		require.Equal(t, []string{
			"tool.started noter 1 workspace.notes.write@1", "tool.completed noter 1 workspace.notes.write@1",
			"tool.started noter 2 core.sleep@1", "tool.completed noter 2 core.sleep@1",
		}, e.toolEvents(id))
		var turns []string
		for _, ev := range e.events(id) {
			if ev.Type == agents.EventAgentTurn {
				turns = append(turns, fmt.Sprintf("%s@%d", ev.NodeID, ev.Attempt))
			}
		}
		require.Len(t, turns, 2, "one agent.turn per model turn, never asked again: %v", turns)
		require.Equal(t, "noter@1", turns[0])
		require.Equal(t, 1, e.notesOf(id), "exactly one note for run %s", id)
	}
}
