package main_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cliResult is one finished `weft` invocation.
type cliResult struct {
	args   []string
	stdout string
	stderr string
	code   int
}

func (r cliResult) String() string {
	return fmt.Sprintf("weft %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// weftCLI runs the weft binary with env added to the test's environment and
// returns its output and exit status (a non-zero status is not a failure).
func weftCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	return weftCLIWithin(t, 2*time.Minute, env, args...)
}

// weftCLIWithin is weftCLI for a command that may take longer than two
// minutes: it fails the test only after limit.
func weftCLIWithin(t *testing.T, limit time.Duration, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(weftBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("weft %v did not finish within %s:\n%s%s", args, limit, stdout.String(), stderr.String())
	}
	r := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("weft %v: %v", args, err)
	}
	return r
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

const echoYAML = `# input -> core.echo -> output
schemaVersion: 1
nodes:
  - {id: in, kind: input, outputs: {out: any}}
  - id: echo
    kind: action
    action: {id: core.echo, version: 1}
    inputs: {in: any}
    outputs: {out: any}
  - {id: out, kind: output, inputs: {in: any}}
edges:
  - {from: in.out, to: echo.in}
  - {from: echo.out, to: out.in}
`

const sleepJSON = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "nap", "kind": "action", "action": {"id": "core.sleep", "version": 1},
     "inputs": {"in": "any"}, "outputs": {"out": "any"}, "mapping": {"ms": {"pointer": "/in/ms"}}, "timeoutMs": 600000},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "nap.in"}, {"from": "nap.out", "to": "out.in"}]
}`

// failYAML fails its only attempt.
const failYAML = `schemaVersion: 1
nodes:
  - {id: in, kind: input, outputs: {out: any}}
  - id: boom
    kind: action
    action: {id: core.fail, version: 1}
    inputs: {in: any}
    outputs: {out: any}
    mapping: {untilAttempt: {literal: 5}}
    retry: {maxAttempts: 1}
  - {id: out, kind: output, inputs: {in: any}}
edges:
  - {from: in.out, to: boom.in}
  - {from: boom.out, to: out.in}
`

// badYAML is well-formed but has graph issues.
const badYAML = `schemaVersion: 1
nodes:
  - {id: in, kind: input, outputs: {out: any}}
  - id: echo
    kind: action
    action: {id: core.echo, version: 7}
    inputs: {in: any}
    outputs: {out: any}
  - {id: out, kind: output, inputs: {in: any}}
edges:
  - {from: in.out, to: echo.in}
  - {from: echo.out, to: ghost.in}
`

var runIDPattern = regexp.MustCompile(`(?m)^run ([0-9a-f-]{36}) `)

func runIDOf(t *testing.T, r cliResult) string {
	t.Helper()
	m := runIDPattern.FindStringSubmatch(r.stdout)
	require.NotNil(t, m, "no run id printed\n%s", r)
	return m[1]
}

// TestClientVerbs drives the CLI's client verbs as subprocesses against a
// running `weft dev` (its own ports, data dir and fresh database):
// validate, push (create, then a new draft), publish, run --wait (success
// and failure), runs, events and cancel.
func TestClientVerbs(t *testing.T) {
	d := startDev(t)
	d.waitReady()
	env := []string{"WEFT_URL=" + d.apiURL, "WEFT_TOKEN=" + d.token}
	dir := t.TempDir()
	echo := writeFile(t, dir, "echo.yaml", echoYAML)
	bad := writeFile(t, dir, "flows/bad.yaml", badYAML)
	sleep := writeFile(t, dir, "sleep.json", sleepJSON)
	fail := writeFile(t, dir, "fail.yaml", failYAML)

	// validate: local, the same validator; issues with codes and positions.
	r := weftCLI(t, nil, "validate", bad)
	require.Equal(t, 1, r.code, "validate bad: want exit 1\n%s", r)
	for _, want := range []string{
		bad + ":6:5 MISSING_DEPENDENCY /nodes/1/action action core.echo@7 is not in the catalog",
		bad + ":12:22 DANGLING_EDGE /edges/1/to",
	} {
		assert.Contains(t, r.stdout, want, "validate bad: output lacks %q\n%s", want, r)
	}
	malformed := writeFile(t, dir, "malformed.yaml", "schemaVersion: 1\nnodes:\n  - id: a\n    kind: input\n    shell: rm -rf /\n")
	r = weftCLI(t, nil, "validate", malformed)
	assert.False(t, r.code != 1 || !strings.Contains(r.stdout, malformed+":5:5 INVALID_DOCUMENT /nodes/0/shell unknown field \"shell\""), "validate malformed:\n%s", r)
	r = weftCLI(t, nil, "validate", echo)
	require.Equal(t, 0, r.code, "validate echo:\n%s", r)
	require.Contains(t, r.stdout, "valid (3 nodes, 2 edges)", "validate echo:\n%s", r)
	r = weftCLI(t, nil, "validate", sleep)
	require.Equal(t, 0, r.code, "validate sleep:\n%s", r)

	// Server verbs need a token.
	r = weftCLI(t, []string{"WEFT_URL=" + d.apiURL, "WEFT_TOKEN="}, "runs")
	assert.False(t, r.code == 0 || !strings.Contains(r.stderr, "WEFT_TOKEN"), "runs without a token:\n%s", r)

	// push creates the workflow, then saves new drafts.
	r = weftCLI(t, env, "push", echo, "--key", "echo")
	require.Equal(t, 0, r.code, "push echo:\n%s", r)
	require.Contains(t, r.stdout, "pushed echo: draft revision 1", "push echo:\n%s", r)
	r = weftCLI(t, env, "push", echo, "--key", "echo")
	require.Equal(t, 0, r.code, "push echo again:\n%s", r)
	require.Contains(t, r.stdout, "pushed echo: draft revision 2", "push echo again:\n%s", r)

	// publish: the latest draft.
	r = weftCLI(t, env, "publish", "echo")
	require.Equal(t, 0, r.code, "publish echo:\n%s", r)
	require.Contains(t, r.stdout, "published echo revision 1 from draft 2", "publish echo:\n%s", r)
	r = weftCLI(t, env, "publish", "echo", "--draft", "2")
	assert.False(t, r.code != 0 || !strings.Contains(r.stdout, "already holds this content"), "publish echo again:\n%s", r)
	// --draft names the latest draft or says what it can do instead.
	r = weftCLI(t, env, "publish", "echo", "--draft", "1")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "only the latest draft (2) can be published"), "publish an older draft:\n%s", r)
	r = weftCLI(t, env, "publish", "echo", "--draft", "9")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "echo has no draft 9; its latest draft is 2"), "publish a draft that does not exist:\n%s", r)
	// An empty list says so.
	r = weftCLI(t, env, "runs", "--key", "nothing-here")
	assert.False(t, r.code != 0 || strings.TrimSpace(r.stdout) != "no runs match", "runs of no workflow:\n%s", r)
	// An API that does not answer is named, with the variable that sets it.
	r = weftCLI(t, []string{"WEFT_URL=http://127.0.0.1:1", "WEFT_TOKEN=" + d.token}, "runs")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "cannot reach the weft API at http://127.0.0.1:1") || !strings.Contains(r.stderr, "WEFT_URL"), "unreachable API:\n%s", r)

	// A draft may hold issues; publishing it fails with every issue.
	r = weftCLI(t, env, "push", bad, "--key", "bad")
	require.Equal(t, 0, r.code, "push bad:\n%s", r)
	r = weftCLI(t, env, "publish", "bad")
	assert.False(t, r.code != 1 || !strings.Contains(r.stdout, "MISSING_DEPENDENCY /nodes/1/action") ||
		!strings.Contains(r.stdout, "DANGLING_EDGE /edges/1/to") || !strings.Contains(r.stderr, "INVALID_GRAPH"), "publish bad:\n%s", r)

	// run --wait: the run id, the Web UI link, a line per event, exit 0.
	r = weftCLI(t, env, "run", "echo", "--input", `{"msg":"hi"}`, "--wait")
	require.Equal(t, 0, r.code, "run echo --wait:\n%s", r)
	echoRun := runIDOf(t, r)
	t.Logf("weft run echo --wait:\n%s", r.stdout)
	for _, want := range []string{
		fmt.Sprintf("web ui: http://localhost:%d/namespaces/default/workflows/weft-", d.uiPort),
		"run.started", "node.started", "echo", "node.completed", "edge.taken", "[3/3]", "run.succeeded",
		"run " + echoRun + ` succeeded in `, `output {"msg":"hi"}`,
	} {
		assert.Contains(t, r.stdout, want, "run echo --wait: output lacks %q\n%s", want, r)
	}

	// The same idempotency key starts the same run.
	r1 := weftCLI(t, env, "run", "echo", "--input", `{"n":1}`, "--idempotency-key", "k-1", "-q")
	r2 := weftCLI(t, env, "run", "echo", "--input", `{"n":1}`, "--idempotency-key", "k-1", "-q")
	assert.False(t, r1.code != 0 || r2.code != 0 || strings.TrimSpace(r1.stdout) != strings.TrimSpace(r2.stdout) || len(strings.TrimSpace(r1.stdout)) != 36, "idempotent run:\n%s\n%s", r1, r2)
	r = weftCLI(t, env, "run", "echo", "--input", `{"n":2}`, "--idempotency-key", "k-1")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "IDEMPOTENCY_CONFLICT") || !strings.Contains(r.stderr, `details: {`) ||
		!strings.Contains(r.stderr, `"runId": "`), "same key, other input (the refusal's details printed):\n%s", r)
	r = weftCLI(t, env, "run", "echo", "--input", `{nope`)
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "--input is not valid JSON"), "bad input:\n%s", r)
	// Tool grants are shown and bound with the key: --no-tools is another request.
	r = weftCLI(t, env, "run", "echo", "--input", `{"n":3}`, "--idempotency-key", "k-g", "--tool-grant", "core.echo@1", "--tool-grant", "core.sleep@1")
	assert.False(t, r.code != 0 || !strings.Contains(r.stdout, "tool grants: core.echo@1, core.sleep@1"), "run --tool-grant:\n%s", r)
	r = weftCLI(t, env, "run", "echo", "--input", `{"n":3}`, "--idempotency-key", "k-g", "--no-tools")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "IDEMPOTENCY_CONFLICT") || !strings.Contains(r.stderr, "toolGrants"), "same key, no tools:\n%s", r)
	r = weftCLI(t, env, "run", "echo", "--tool-grant", "core.echo")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "INVALID_REQUEST"), "malformed grant:\n%s", r)

	// A failing run: --wait exits 1.
	weftCLI(t, env, "push", fail, "--key", "fail")
	r = weftCLI(t, env, "publish", "fail")
	require.Equal(t, 0, r.code, "publish fail:\n%s", r)
	r = weftCLI(t, env, "run", "fail", "--wait")
	assert.False(t, r.code != 1 || !strings.Contains(r.stdout, "node.attempt.failed") || !strings.Contains(r.stdout, " failed in ") ||
		!strings.Contains(r.stdout, "NODE_FAILED"), "run fail --wait: want exit 1 and the failure\n%s", r)

	// runs: filtered by key and status.
	r = weftCLI(t, env, "runs", "--key", "echo", "--status", "succeeded")
	assert.False(t, r.code != 0 || !strings.Contains(r.stdout, echoRun) || !strings.Contains(r.stdout, "RUN ID"), "runs --key echo:\n%s", r)
	r = weftCLI(t, env, "runs", "--key", "fail")
	assert.False(t, r.code != 0 || strings.Contains(r.stdout, echoRun) || !strings.Contains(r.stdout, "failed"), "runs --key fail:\n%s", r)
	r = weftCLI(t, env, "runs", "--status", "sideways")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "INVALID_REQUEST"), "runs bad status:\n%s", r)

	// events: the whole log in order.
	r = weftCLI(t, env, "events", echoRun)
	require.Equal(t, 0, r.code, "events:\n%s", r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	assert.False(t, len(lines) < 5 || !strings.Contains(lines[0], "run.started") || !strings.Contains(lines[len(lines)-1], "run.succeeded") ||
		!strings.HasPrefix(strings.TrimSpace(lines[0]), "1 "), "events:\n%s", r)
	r = weftCLI(t, env, "events", "--json", echoRun)
	assert.False(t, r.code != 0 || !strings.Contains(r.stdout, `"type":"run.started"`), "events --json:\n%s", r)
	r = weftCLI(t, env, "events", "00000000-0000-0000-0000-000000000000")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND"), "events of no run:\n%s", r)

	// verify: the chain is intact; an edited event breaks it at its seq.
	r = weftCLI(t, env, "verify", echoRun)
	require.Equal(t, 0, r.code, "verify:\n%s", r)
	require.Contains(t, r.stdout, "run "+echoRun+": event chain intact (", "verify:\n%s", r)
	conn, err := pgx.Connect(context.Background(), d.dbURL)
	require.NoError(t, err)
	_, err = conn.Exec(context.Background(), `UPDATE run_events SET data = '{"edited": true}' WHERE run_id = $1 AND seq = 2`, echoRun)
	require.NoError(t, err)
	_ = conn.Close(context.Background())
	r = weftCLI(t, env, "verify", echoRun)
	assert.False(t, r.code != 1 || !strings.Contains(r.stdout, "event chain BROKEN at seq 2 of ") || !strings.Contains(r.stdout, "does not match its hash"), "verify an edited chain:\n%s", r)
	r = weftCLI(t, env, "verify", "00000000-0000-0000-0000-000000000000")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND"), "verify no run:\n%s", r)

	// cancel: a long core.sleep run ends cancelled.
	r = weftCLI(t, env, "push", sleep, "--key", "sleepy")
	require.Equal(t, 0, r.code, "push sleep:\n%s", r)
	weftCLI(t, env, "publish", "sleepy")
	r = weftCLI(t, env, "run", "sleepy", "--input", `{"ms":120000}`)
	require.Equal(t, 0, r.code, "run sleepy:\n%s", r)
	sleepRun := runIDOf(t, r)
	waitFor(t, "the sleep node to start", 30*time.Second, func() bool {
		return strings.Contains(weftCLI(t, env, "events", sleepRun).stdout, "node.started")
	})
	// events --follow reads the live stream: it is running before the
	// cancel and ends by itself with the run's terminal event.
	followed := make(chan cliResult, 1)
	go func() { followed <- weftCLI(t, env, "events", "--follow", sleepRun) }()
	r = weftCLI(t, env, "cancel", sleepRun, "--wait")
	require.Equal(t, 0, r.code, "cancel --wait:\n%s", r)
	require.Contains(t, r.stdout, "cancel requested: run "+sleepRun, "cancel --wait:\n%s", r)
	require.Contains(t, r.stdout, "run "+sleepRun+" cancelled", "cancel --wait:\n%s", r)
	f := <-followed
	assert.False(t, f.code != 0 || !strings.Contains(f.stdout, "run.cancel.requested") || !strings.Contains(lastLine(f.stdout), "run.cancelled"), "events --follow of the cancelled run:\n%s", f)
	r = weftCLI(t, env, "events", sleepRun)
	assert.False(t, !strings.Contains(r.stdout, "run.cancel.requested") || !strings.Contains(r.stdout, "run.cancelled"), "events of the cancelled run:\n%s", r)
	r = weftCLI(t, env, "cancel", sleepRun)
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "RUN_NOT_ACTIVE"), "cancel again:\n%s", r)
	r = weftCLI(t, env, "runs", "--status", "cancelled")
	assert.Contains(t, r.stdout, sleepRun, "runs --status cancelled:\n%s", r)

	// approve, reject, approvals: a run waiting for a decision.
	gated := writeFile(t, dir, "gated.yaml", gatedYAML)
	r = weftCLI(t, env, "push", gated, "--key", "gated")
	require.Equal(t, 0, r.code, "push gated:\n%s", r)
	weftCLI(t, env, "publish", "gated")
	var gatedRuns []string
	for range 2 {
		r = weftCLI(t, env, "run", "gated", "--input", `{"n":1}`)
		require.Equal(t, 0, r.code, "run gated:\n%s", r)
		gatedRuns = append(gatedRuns, runIDOf(t, r))
	}
	waitFor(t, "both runs to wait for a decision", 30*time.Second, func() bool {
		r := weftCLI(t, env, "approvals", "--status", "pending")
		return strings.Contains(r.stdout, gatedRuns[0]) && strings.Contains(r.stdout, gatedRuns[1])
	})
	r = weftCLI(t, env, "approvals", "--status", "pending")
	assert.Contains(t, r.stdout, "approval node", "approvals --status pending:\n%s", r)
	r = weftCLI(t, env, "approve", gatedRuns[0], "ok", "--comment", "looks right")
	require.Equal(t, 0, r.code, "approve:\n%s", r)
	require.Contains(t, r.stdout, "run "+gatedRuns[0]+" node ok: request 1 approved", "approve:\n%s", r)
	r = weftCLI(t, env, "reject", gatedRuns[0], "ok")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "APPROVAL_ALREADY_DECIDED"), "reject after approve:\n%s", r)
	r = weftCLI(t, env, "reject", gatedRuns[1], "ok")
	assert.False(t, r.code != 0 || !strings.Contains(r.stdout, "request 1 rejected"), "reject:\n%s", r)
	r = weftCLI(t, env, "approve", gatedRuns[1], "in")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "APPROVAL_NOT_WAITING"), "approve a node that never waits:\n%s", r)
	r = weftCLI(t, env, "approvals", "--run", gatedRuns[0])
	assert.False(t, !strings.Contains(r.stdout, "approved") || !strings.Contains(r.stdout, "dev-user"), "approvals --run:\n%s", r)
}

// gatedYAML waits up to an hour for a decision.
const gatedYAML = `schemaVersion: 1
nodes:
  - {id: in, kind: input, outputs: {out: any}}
  - id: ok
    kind: approval
    inputs: {in: any}
    outputs: {approved: any, rejected: any, timedOut: any}
    timeoutMs: 3600000
  - {id: yes, kind: output, inputs: {in: any}}
  - {id: no, kind: output, inputs: {in: any}}
edges:
  - {from: in.out, to: ok.in}
  - {from: ok.approved, to: yes.in}
  - {from: ok.rejected, to: no.in}
`

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
