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
	if err != nil {
		t.Fatal(err)
	}
	keys := testinfra.Keys(t, "limits-verbs-secret-0123456789abcd")
	srv := httptest.NewServer(inproc.API(t, api.Deps{Store: st, Keys: keys, Temporal: tc, Starter: runs, Logger: logger}))
	t.Cleanup(srv.Close)
	env := []string{"WEFT_URL=" + srv.URL, "WEFT_TOKEN=" + testinfra.Token(t, keys, "acme", "ops", auth.AllScopes...)}
	reader := []string{"WEFT_URL=" + srv.URL, "WEFT_TOKEN=" + testinfra.Token(t, keys, "acme", "viewer", auth.ScopeWorkflowsRead)}

	dir := t.TempDir()
	echo := writeFile(t, dir, "echo.yaml", echoYAML)
	if r := weftCLI(t, env, "push", echo, "--key", "echo"); r.code != 0 {
		t.Fatalf("push:\n%s", r)
	}
	if r := weftCLI(t, env, "publish", "echo"); r.code != 0 {
		t.Fatalf("publish:\n%s", r)
	}

	r := weftCLI(t, reader, "limits")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "tenant: max concurrent runs none; 0 running, 0 throttled" {
		t.Fatalf("limits of none:\n%s", r)
	}
	if r = weftCLI(t, reader, "limits", "set", "--max-concurrent-runs", "3"); r.code != 1 || !strings.Contains(r.stderr, "MISSING_SCOPE") {
		t.Errorf("set without limits.manage:\n%s", r)
	}
	r = weftCLI(t, env, "limits", "set", "--workflow", "echo", "--max-concurrent-runs", "1", "--budget-tokens", "5000")
	if r.code != 0 || !strings.Contains(r.stdout, "workflow echo: max concurrent runs 1, max starts per minute none, budget 5000 tokens; 0 running, 0 throttled") {
		t.Fatalf("set workflow limits:\n%s", r)
	}
	if r = weftCLI(t, env, "limits", "set", "--workflow", "echo", "--max-concurrent-runs", "0"); r.code == 0 {
		t.Errorf("a cap of 0:\n%s", r)
	}
	if r = weftCLI(t, env, "limits", "set", "--max-starts-per-minute", "3"); r.code != 1 || !strings.Contains(r.stderr, "--workflow") {
		t.Errorf("a start rate for the tenant:\n%s", r)
	}
	if r = weftCLI(t, env, "limits", "set", "--workflow", "nope", "--max-concurrent-runs", "2"); r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Errorf("limits of no workflow:\n%s", r)
	}

	first := weftCLI(t, env, "run", "echo", "--input", `{"n":1}`)
	if first.code != 0 || !strings.Contains(first.stdout, " queued: workflow echo") || !strings.Contains(first.stdout, "budget: 5000 tokens") {
		t.Fatalf("first run:\n%s", first)
	}
	second := weftCLI(t, env, "run", "echo", "--input", `{"n":2}`, "--max-cost-usd", "0.5")
	if second.code != 0 || !strings.Contains(second.stdout, " throttled #1: workflow echo") ||
		!strings.Contains(second.stdout, "waiting for a slot") || !strings.Contains(second.stdout, "budget: 5000 tokens, $0.5") {
		t.Fatalf("second run:\n%s", second)
	}
	secondID := runIDOf(t, second)
	if r = weftCLI(t, env, "runs", "--status", "throttled"); r.code != 0 || !regexp.MustCompile(secondID+`\s+echo\s+1\s+live\s+throttled #1`).MatchString(r.stdout) {
		t.Errorf("runs --status throttled:\n%s", r)
	}
	r = weftCLI(t, reader, "limits")
	if r.code != 0 || !regexp.MustCompile(`(?m)^echo\s+1\s+none\s+5000 tokens\s+1\s+1\s+1\s*$`).MatchString(r.stdout) {
		t.Errorf("limits with one run waiting:\n%s", r)
	}

	// Raising the cap starts the waiting run at once.
	r = weftCLI(t, env, "limits", "set", "--workflow", "echo", "--max-concurrent-runs", "2")
	if r.code != 0 || !strings.Contains(r.stdout, "budget 5000 tokens; 2 running, 0 throttled") {
		t.Fatalf("raise the cap:\n%s", r)
	}
	got, err := st.GetRun(context.Background(), "acme", secondID)
	if err != nil || got.Status != "queued" || got.AdmittedAt == nil {
		t.Fatalf("after the raise the second run is %s (admitted %v, %v)", got.Status, got.AdmittedAt, err)
	}
	if _, err := tc.DescribeWorkflow(context.Background(), got.WorkflowID, ""); err != nil {
		t.Fatalf("the admitted run's workflow was not started: %v", err)
	}
	r = weftCLI(t, env, "limits", "set", "--workflow", "echo", "--max-concurrent-runs", "none", "--budget-tokens", "none")
	if r.code != 0 || !strings.Contains(r.stdout, "max concurrent runs none, max starts per minute none, budget none") {
		t.Errorf("remove the limits:\n%s", r)
	}
	r = weftCLI(t, env, "limits", "set", "--max-concurrent-runs", "4")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "tenant: max concurrent runs 4; 2 running, 0 throttled" {
		t.Errorf("tenant cap:\n%s", r)
	}
}
