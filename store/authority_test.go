package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// newActedRun stores a queued run of tenant t1 with actor, origin and tool lists.
func newActedRun(t testing.TB, st *store.Store, actor execution.Actor, origin execution.Origin, grants, policy []string) string {
	t.Helper()
	id := uuid.NewString()
	_, created, err := st.CreateRun(context.Background(), store.Run{RunID: id, TenantID: "t1", WorkflowKey: "wf", Checksum: "c",
		Mode: "live", Input: json.RawMessage(`{}`), InputHash: "h", WorkflowID: "weft-" + id, Actor: actor, Origin: origin,
		Permissions: []string{"notes.write", "runs.execute"}, ToolGrants: grants, ToolPolicy: policy}, id)
	require.NoError(t, err, "create run: %v", created)
	require.True(t, created, "create run: %v %v", created, err)
	return id
}

// TestRunToolListsKeepNilApartFromEmpty: toolGrants not given (nil) is
// stored as NULL and reads back nil; an empty list reads back empty.
func TestRunToolListsKeepNilApartFromEmpty(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	user := execution.Actor{Kind: "user", Sub: "ada"}
	for _, tc := range []struct {
		grants, policy []string
	}{{nil, nil}, {[]string{}, []string{}}, {[]string{"core.echo@1", "workspace.notes.write@1"}, []string{"core.echo@1"}}} {
		id := newActedRun(t, st, user, execution.Origin{Kind: "api"}, tc.grants, tc.policy)
		r, err := st.GetRun(ctx, "t1", id)
		require.NoError(t, err)
		require.Equal(t, tc.grants == nil, r.ToolGrants == nil, "stored grants %#v policy %#v, read %#v %#v", tc.grants, tc.policy, r.ToolGrants, r.ToolPolicy)
		require.True(t, slices.Equal(r.ToolGrants, tc.grants), "stored grants %#v policy %#v, read %#v %#v", tc.grants, tc.policy, r.ToolGrants, r.ToolPolicy)
		require.Equal(t, tc.policy == nil, r.ToolPolicy == nil, "stored grants %#v policy %#v, read %#v %#v", tc.grants, tc.policy, r.ToolGrants, r.ToolPolicy)
		require.True(t, slices.Equal(r.ToolPolicy, tc.policy), "stored grants %#v policy %#v, read %#v %#v", tc.grants, tc.policy, r.ToolGrants, r.ToolPolicy)
	}
}

// TestRunAuthorityReadsTheLiveTerms: the principal's revocations and the
// bridge's policy are read as they are now, for each kind of run.
func TestRunAuthorityReadsTheLiveTerms(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	_, err := st.CreateWorkflow(ctx, "t1", "wf", json.RawMessage(`{}`), "alice")
	require.NoError(t, err)

	// A user's run: her own revocations, no bridge.
	userRun := newActedRun(t, st, execution.Actor{Kind: "user", Sub: "ada"}, execution.Origin{Kind: "api"}, []string{"core.echo@1"}, nil)
	a, err := st.RunAuthority(ctx, "t1", userRun)
	require.NoError(t, err)
	require.Equal(t, "ada", a.Principal, "user run authority %+v", a)
	require.Empty(t, a.Revoked, "user run authority %+v", a)
	require.Nil(t, a.Bridge, "user run authority %+v", a)
	require.True(t, slices.Equal(a.ToolGrants, []string{"core.echo@1"}), "user run authority %+v", a)
	require.Nil(t, a.RunToolPolicy, "user run authority %+v", a)
	require.True(t, slices.Equal(a.Permissions, []string{"notes.write", "runs.execute"}), "user run authority %+v", a)
	for _, r := range [][2]string{{"ada", "notes.write"}, {"ada", "crm.write"}, {"alice", "runs.execute"}} {
		require.NoError(t, st.Revoke(ctx, "t1", r[0], r[1]))
	}
	require.NoError(t, st.Revoke(ctx, "t2", "ada", "runs.execute")) // another tenant's
	a, _ = st.RunAuthority(ctx, "t1", userRun)
	require.True(t, slices.Equal(a.Revoked, []string{"crm.write", "notes.write"}), "revoked from ada now: %v", a.Revoked)

	// A schedule's run: its creator's revocations and the schedule's policy now.
	sc, err := st.CreateSchedule(ctx, store.Schedule{TenantID: "t1", ScheduleID: "sch_1", WorkflowKey: "wf",
		Spec: store.ScheduleSpec{Every: "1h"}, CreatedBy: "alice", Scopes: []string{"runs.execute"},
		TemporalScheduleID: "ts1", ToolPolicy: []string{"core.echo@1", "workspace.notes.write@1"}})
	require.NoError(t, err)
	require.Equal(t, "alice", sc.ToolPolicyUpdatedBy, "policy set by %q at %v", sc.ToolPolicyUpdatedBy, sc.ToolPolicyUpdatedAt)
	require.False(t, sc.ToolPolicyUpdatedAt.IsZero(), "policy set by %q at %v", sc.ToolPolicyUpdatedBy, sc.ToolPolicyUpdatedAt)
	svc := execution.Actor{Kind: "service", Sub: "schedule:sch_1", ConfiguredBy: "alice"}
	schedRun := newActedRun(t, st, svc, execution.Origin{Kind: "schedule", ID: "sch_1"}, nil, sc.ToolPolicy)
	a, err = st.RunAuthority(ctx, "t1", schedRun)
	require.NoError(t, err)
	want := store.BridgeAuthority{Kind: "schedule", ID: "sch_1", Found: true, ToolPolicy: []string{"core.echo@1", "workspace.notes.write@1"}}
	require.Equal(t, svc.RequestedBy(), a.Principal, "schedule run authority %+v bridge %+v", a, a.Bridge)
	require.True(t, slices.Equal(a.Revoked, []string{"runs.execute"}), "schedule run authority %+v bridge %+v", a, a.Bridge)
	require.NotNil(t, a.Bridge, "schedule run authority %+v bridge %+v", a, a.Bridge)
	require.Equal(t, want.Kind, a.Bridge.Kind, "schedule run authority %+v bridge %+v", a, a.Bridge)
	require.Equal(t, want.ID, a.Bridge.ID, "schedule run authority %+v bridge %+v", a, a.Bridge)
	require.True(t, a.Bridge.Found, "schedule run authority %+v bridge %+v", a, a.Bridge)
	require.False(t, a.Bridge.Deleted, "schedule run authority %+v bridge %+v", a, a.Bridge)
	require.True(t, slices.Equal(a.Bridge.ToolPolicy, want.ToolPolicy), "schedule run authority %+v bridge %+v", a, a.Bridge)
	require.True(t, slices.Equal(a.RunToolPolicy, want.ToolPolicy), "schedule run authority %+v bridge %+v", a, a.Bridge)
	require.Nil(t, a.ToolGrants, "schedule run authority %+v bridge %+v", a, a.Bridge)
	_, err = st.SetScheduleToolPolicy(ctx, "t1", "wf", "sch_1", []string{}, "bob")
	require.NoError(t, err)
	a, _ = st.RunAuthority(ctx, "t1", schedRun)
	require.Empty(t, a.Bridge.ToolPolicy, "narrowed policy read %#v", a.Bridge.ToolPolicy)
	require.NotNil(t, a.Bridge.ToolPolicy, "narrowed policy read %#v", a.Bridge.ToolPolicy)
	_, err = st.DeleteSchedule(ctx, "t1", "wf", "sch_1")
	require.NoError(t, err)
	a, _ = st.RunAuthority(ctx, "t1", schedRun)
	require.True(t, a.Bridge.Found, "deleted schedule read %+v", a.Bridge)
	require.True(t, a.Bridge.Deleted, "deleted schedule read %+v", a.Bridge)
	_, err = st.SetScheduleToolPolicy(ctx, "t1", "wf", "sch_1", []string{"core.echo@1"}, "bob")
	require.ErrorIs(t, err, failure.ErrNotFound, "a deleted schedule's policy was set: %v", err)

	// A webhook's run whose webhook does not exist: found false.
	hook := execution.Actor{Kind: "service", Sub: "webhook:whk_gone", ConfiguredBy: "bob"}
	hookRun := newActedRun(t, st, hook, execution.Origin{Kind: "webhook", ID: "whk_gone"}, nil, []string{})
	a, _ = st.RunAuthority(ctx, "t1", hookRun)
	require.NotNil(t, a.Bridge, "missing webhook read %+v %+v", a, a.Bridge)
	require.False(t, a.Bridge.Found, "missing webhook read %+v %+v", a, a.Bridge)
	require.Equal(t, "webhook", a.Bridge.Kind, "missing webhook read %+v %+v", a, a.Bridge)
	require.Equal(t, "bob", a.Principal, "missing webhook read %+v %+v", a, a.Bridge)

	// Another tenant's run, or none, is not found.
	_, err = st.RunAuthority(ctx, "t2", userRun)
	require.ErrorIs(t, err, failure.ErrNotFound, "another tenant's run: %v", err)
}
