package main_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/starter"
)

// TestLimitsVerbs drives `weft limits [set]`, `weft run` and `weft runs`
// against the API served in process (a dev server of its own; no worker
// polls the runs' queue, so started runs stay running): a run over the
// workflow's cap shows throttled with its place in the queue, and raising
// the cap starts it.
func TestLimitsVerbs(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	tc := testinfra.OwnTemporal(t).Client()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	runs, err := inproc.NewStarter(starter.Deps{Store: st, Temporal: tc, TaskQueue: "limits-verbs-" + uuid.NewString(), Logger: logger})
	require.NoError(t, err)
	keys := testinfra.Keys(t, "limits-verbs-secret-0123456789abcd")
	srv := httptest.NewServer(inproc.API(t, api.Deps{Store: st, Keys: keys, Temporal: tc, Starter: runs, Logger: logger}))
	t.Cleanup(srv.Close)
	env := []string{"WEFT_URL=" + srv.URL, "WEFT_TOKEN=" + testinfra.Token(t, keys, "acme", "ops", auth.AllScopes...)}
	reader := []string{"WEFT_URL=" + srv.URL, "WEFT_TOKEN=" + testinfra.Token(t, keys, "acme", "viewer", auth.ScopeWorkflowsRead)}

	dir := t.TempDir()
	echo := writeFile(t, dir, "echo.yaml", echoYAML)
	pushed := weftCLI(t, env, "push", echo, "--key", "echo")
	require.Equal(t, 0, pushed.code, "push:\n%s", pushed)
	published := weftCLI(t, env, "publish", "echo")
	require.Equal(t, 0, published.code, "publish:\n%s", published)

	r := weftCLI(t, reader, "limits")
	require.Equal(t, 0, r.code, "limits of none:\n%s", r)
	require.Equal(t, "tenant: max concurrent runs none; 0 running, 0 throttled", strings.TrimSpace(r.stdout), "limits of none:\n%s", r)
	r = weftCLI(t, reader, "limits", "set", "--max-concurrent-runs", "3")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "MISSING_SCOPE"), "set without limits.manage:\n%s", r)
	r = weftCLI(t, env, "limits", "set", "--workflow", "echo", "--max-concurrent-runs", "1", "--budget-tokens", "5000")
	require.Equal(t, 0, r.code, "set workflow limits:\n%s", r)
	require.Contains(t, r.stdout, "workflow echo: max concurrent runs 1, max starts per minute none, budget 5000 tokens; 0 running, 0 throttled", "set workflow limits:\n%s", r)
	r = weftCLI(t, env, "limits", "set", "--workflow", "echo", "--max-concurrent-runs", "0")
	assert.NotEqual(t, 0, r.code, "a cap of 0:\n%s", r)
	r = weftCLI(t, env, "limits", "set", "--max-starts-per-minute", "3")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "--workflow"), "a start rate for the tenant:\n%s", r)
	r = weftCLI(t, env, "limits", "set", "--workflow", "nope", "--max-concurrent-runs", "2")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND"), "limits of no workflow:\n%s", r)

	first := weftCLI(t, env, "run", "echo", "--input", `{"n":1}`)
	require.Equal(t, 0, first.code, "first run:\n%s", first)
	require.Contains(t, first.stdout, " queued: workflow echo", "first run:\n%s", first)
	require.Contains(t, first.stdout, "budget: 5000 tokens", "first run:\n%s", first)
	second := weftCLI(t, env, "run", "echo", "--input", `{"n":2}`, "--max-cost-usd", "0.5")
	require.Equal(t, 0, second.code, "second run:\n%s", second)
	require.Contains(t, second.stdout, " throttled #1: workflow echo", "second run:\n%s", second)
	require.Contains(t, second.stdout, "waiting for a slot", "second run:\n%s", second)
	require.Contains(t, second.stdout, "budget: 5000 tokens, $0.5", "second run:\n%s", second)
	secondID := runIDOf(t, second)
	r = weftCLI(t, env, "runs", "--status", "throttled")
	assert.False(t, r.code != 0 || !regexp.MustCompile(secondID+`\s+echo\s+1\s+live\s+throttled #1`).MatchString(r.stdout), "runs --status throttled:\n%s", r)
	r = weftCLI(t, reader, "limits")
	assert.False(t, r.code != 0 || !regexp.MustCompile(`(?m)^echo\s+1\s+none\s+5000 tokens\s+1\s+1\s+1\s*$`).MatchString(r.stdout), "limits with one run waiting:\n%s", r)

	// Raising the cap starts the waiting run at once.
	r = weftCLI(t, env, "limits", "set", "--workflow", "echo", "--max-concurrent-runs", "2")
	require.Equal(t, 0, r.code, "raise the cap:\n%s", r)
	require.Contains(t, r.stdout, "budget 5000 tokens; 2 running, 0 throttled", "raise the cap:\n%s", r)
	got, err := st.GetRun(context.Background(), "acme", secondID)
	require.NoError(t, err, "after the raise the second run is %s (admitted %v, %v)", got.Status, got.AdmittedAt, err)
	require.Equal(t, "queued", got.Status, "after the raise the second run is %s (admitted %v, %v)", got.Status, got.AdmittedAt, err)
	require.NotNil(t, got.AdmittedAt, "after the raise the second run is %s (admitted %v, %v)", got.Status, got.AdmittedAt, err)
	_, err = tc.DescribeWorkflow(context.Background(), got.WorkflowID, "")
	require.NoError(t, err, "the admitted run's workflow was not started")
	r = weftCLI(t, env, "limits", "set", "--workflow", "echo", "--max-concurrent-runs", "none", "--budget-tokens", "none")
	assert.False(t, r.code != 0 || !strings.Contains(r.stdout, "max concurrent runs none, max starts per minute none, budget none"), "remove the limits:\n%s", r)
	r = weftCLI(t, env, "limits", "set", "--max-concurrent-runs", "4")
	assert.False(t, r.code != 0 || strings.TrimSpace(r.stdout) != "tenant: max concurrent runs 4; 2 running, 0 throttled", "tenant cap:\n%s", r)
}
