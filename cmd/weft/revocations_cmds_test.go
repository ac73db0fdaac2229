package main_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
)

// TestRevocationVerbs drives `weft revocations list|add|remove` as
// subprocesses against the API served in process over a fresh database (no
// Temporal needed: revocations live in PostgreSQL).
func TestRevocationVerbs(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	keys := testinfra.Keys(t, "revocation-verbs-secret-0123456789")
	srv := httptest.NewServer(inproc.API(t, api.Deps{Store: st, Keys: keys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	as := func(tenant, sub string, scopes ...string) []string {
		return []string{"WEFT_URL=" + srv.URL, "WEFT_TOKEN=" + testinfra.Token(t, keys, tenant, sub, scopes...)}
	}
	ops := as("acme", "ops", auth.ScopeRevocationsManage)
	revoked := func(sub string) []string {
		t.Helper()
		scopes, err := st.RevokedScopes(context.Background(), "acme", sub)
		require.NoError(t, err)
		return scopes
	}

	r := weftCLI(t, ops, "revocations", "list")
	require.Equal(t, 0, r.code, "list of none:\n%s", r)
	require.Equal(t, "no revocations", strings.TrimSpace(r.stdout), "list of none:\n%s", r)

	// add: new, then already there.
	r = weftCLI(t, ops, "revocations", "add", "--sub", "alice", "--scope", "notes.write")
	require.Equal(t, 0, r.code, "add:\n%s", r)
	require.Equal(t, "revoked notes.write from alice", strings.TrimSpace(r.stdout), "add:\n%s", r)
	got := revoked("alice")
	require.True(t, slices.Equal(got, []string{"notes.write"}), "after add, alice's revoked scopes = %v", got)
	r = weftCLI(t, ops, "revocations", "add", "--sub", "alice", "--scope", "notes.write")
	assert.False(t, r.code != 0 || !strings.Contains(r.stdout, "notes.write was already revoked from alice (since "), "add again:\n%s", r)
	for _, args := range [][]string{
		{"--sub", "team/ops", "--scope", "runs.execute"},
		{"--sub", "alice", "--scope", "runs.execute"},
		{"--sub", "bob", "--scope", "schedules.manage"},
	} {
		r = weftCLI(t, ops, append([]string{"revocations", "add"}, args...)...)
		require.Equal(t, 0, r.code, "add %v:\n%s", args, r)
	}

	// Refusals: a scope with a space (the API's code), missing flags.
	r = weftCLI(t, ops, "revocations", "add", "--sub", "alice", "--scope", "crm write")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "INVALID_REQUEST") || !strings.Contains(r.stderr, "crm write"), "add of a scope with a space:\n%s", r)
	r = weftCLI(t, ops, "revocations", "add", "--sub", "alice")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "scope"), "add without --scope:\n%s", r)
	r = weftCLI(t, ops, "revocations", "remove", "--sub", "", "--scope", "notes.write")
	assert.Equal(t, 1, r.code, "remove with an empty --sub:\n%s", r)

	// list: every page (--limit 1 is one row per request), by sub then
	// scope; --sub narrows it.
	r = weftCLI(t, ops, "revocations", "list", "--limit", "1")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Equal(t, 0, r.code, "list:\n%s", r)
	require.Len(t, lines, 5, "list:\n%s", r)
	var rows []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows = append(rows, f[0]+" "+f[1])
	}
	want := []string{"alice notes.write", "alice runs.execute", "bob schedules.manage", "team/ops runs.execute"}
	assert.True(t, slices.Equal(rows, want), "list rows = %v, want %v\n%s", rows, want, r)
	r = weftCLI(t, ops, "revocations", "list", "--sub", "team/ops")
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	assert.False(t, r.code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "team/ops  runs.execute  "), "list --sub team/ops:\n%s", r)

	// remove: a sub with '/' reaches the API escaped; a second remove is NOT_FOUND.
	r = weftCLI(t, ops, "revocations", "remove", "--sub", "team/ops", "--scope", "runs.execute")
	require.Equal(t, 0, r.code, "remove:\n%s", r)
	require.Equal(t, "removed the revocation of runs.execute from team/ops", strings.TrimSpace(r.stdout), "remove:\n%s", r)
	got = revoked("team/ops")
	require.Empty(t, got, "after remove, team/ops's revoked scopes = %v", got)
	r = weftCLI(t, ops, "revocations", "remove", "--sub", "team/ops", "--scope", "runs.execute")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND"), "remove again:\n%s", r)

	// Another tenant sees and removes nothing of acme's; a token without
	// revocations.manage is refused.
	other := as("globex", "mallory", auth.AllScopes...)
	r = weftCLI(t, other, "revocations", "list")
	assert.False(t, r.code != 0 || strings.Contains(r.stdout, "alice"), "another tenant's list:\n%s", r)
	r = weftCLI(t, other, "revocations", "remove", "--sub", "alice", "--scope", "notes.write")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND"), "another tenant's remove:\n%s", r)
	got = revoked("alice")
	assert.True(t, slices.Equal(got, []string{"notes.write", "runs.execute"}), "alice's revoked scopes after another tenant's remove = %v", got)
	r = weftCLI(t, as("acme", "alice", auth.ScopeSchedulesManage, auth.ScopeRunsExecute), "revocations", "list")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "MISSING_SCOPE"), "list without revocations.manage:\n%s", r)
}
