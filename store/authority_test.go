package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"

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
	if err != nil || !created {
		t.Fatalf("create run: %v %v", created, err)
	}
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
		if err != nil {
			t.Fatal(err)
		}
		if (r.ToolGrants == nil) != (tc.grants == nil) || !slices.Equal(r.ToolGrants, tc.grants) ||
			(r.ToolPolicy == nil) != (tc.policy == nil) || !slices.Equal(r.ToolPolicy, tc.policy) {
			t.Fatalf("stored grants %#v policy %#v, read %#v %#v", tc.grants, tc.policy, r.ToolGrants, r.ToolPolicy)
		}
	}
}

// TestRunAuthorityReadsTheLiveTerms: the principal's revocations and the
// bridge's policy are read as they are now, for each kind of run.
func TestRunAuthorityReadsTheLiveTerms(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	if _, err := st.CreateWorkflow(ctx, "t1", "wf", json.RawMessage(`{}`), "alice"); err != nil {
		t.Fatal(err)
	}

	// A user's run: her own revocations, no bridge.
	userRun := newActedRun(t, st, execution.Actor{Kind: "user", Sub: "ada"}, execution.Origin{Kind: "api"}, []string{"core.echo@1"}, nil)
	a, err := st.RunAuthority(ctx, "t1", userRun)
	if err != nil {
		t.Fatal(err)
	}
	if a.Principal != "ada" || len(a.Revoked) != 0 || a.Bridge != nil || !slices.Equal(a.ToolGrants, []string{"core.echo@1"}) ||
		a.RunToolPolicy != nil || !slices.Equal(a.Permissions, []string{"notes.write", "runs.execute"}) {
		t.Fatalf("user run authority %+v", a)
	}
	for _, r := range [][2]string{{"ada", "notes.write"}, {"ada", "crm.write"}, {"alice", "runs.execute"}} {
		if err := st.Revoke(ctx, "t1", r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Revoke(ctx, "t2", "ada", "runs.execute"); err != nil { // another tenant's
		t.Fatal(err)
	}
	if a, _ = st.RunAuthority(ctx, "t1", userRun); !slices.Equal(a.Revoked, []string{"crm.write", "notes.write"}) {
		t.Fatalf("revoked from ada now: %v", a.Revoked)
	}

	// A schedule's run: its creator's revocations and the schedule's policy now.
	sc, err := st.CreateSchedule(ctx, store.Schedule{TenantID: "t1", ScheduleID: "sch_1", WorkflowKey: "wf",
		Spec: store.ScheduleSpec{Every: "1h"}, CreatedBy: "alice", Scopes: []string{"runs.execute"},
		TemporalScheduleID: "ts1", ToolPolicy: []string{"core.echo@1", "workspace.notes.write@1"}})
	if err != nil {
		t.Fatal(err)
	}
	if sc.ToolPolicyUpdatedBy != "alice" || sc.ToolPolicyUpdatedAt.IsZero() {
		t.Fatalf("policy set by %q at %v", sc.ToolPolicyUpdatedBy, sc.ToolPolicyUpdatedAt)
	}
	svc := execution.Actor{Kind: "service", Sub: "schedule:sch_1", ConfiguredBy: "alice"}
	schedRun := newActedRun(t, st, svc, execution.Origin{Kind: "schedule", ID: "sch_1"}, nil, sc.ToolPolicy)
	a, err = st.RunAuthority(ctx, "t1", schedRun)
	if err != nil {
		t.Fatal(err)
	}
	want := store.BridgeAuthority{Kind: "schedule", ID: "sch_1", Found: true, ToolPolicy: []string{"core.echo@1", "workspace.notes.write@1"}}
	if a.Principal != svc.RequestedBy() || !slices.Equal(a.Revoked, []string{"runs.execute"}) || a.Bridge == nil ||
		a.Bridge.Kind != want.Kind || a.Bridge.ID != want.ID || !a.Bridge.Found || a.Bridge.Deleted ||
		!slices.Equal(a.Bridge.ToolPolicy, want.ToolPolicy) || !slices.Equal(a.RunToolPolicy, want.ToolPolicy) || a.ToolGrants != nil {
		t.Fatalf("schedule run authority %+v bridge %+v", a, a.Bridge)
	}
	if _, err := st.SetScheduleToolPolicy(ctx, "t1", "wf", "sch_1", []string{}, "bob"); err != nil {
		t.Fatal(err)
	}
	if a, _ = st.RunAuthority(ctx, "t1", schedRun); len(a.Bridge.ToolPolicy) != 0 || a.Bridge.ToolPolicy == nil {
		t.Fatalf("narrowed policy read %#v", a.Bridge.ToolPolicy)
	}
	if _, err := st.DeleteSchedule(ctx, "t1", "wf", "sch_1"); err != nil {
		t.Fatal(err)
	}
	if a, _ = st.RunAuthority(ctx, "t1", schedRun); !a.Bridge.Found || !a.Bridge.Deleted {
		t.Fatalf("deleted schedule read %+v", a.Bridge)
	}
	if _, err := st.SetScheduleToolPolicy(ctx, "t1", "wf", "sch_1", []string{"core.echo@1"}, "bob"); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("a deleted schedule's policy was set: %v", err)
	}

	// A webhook's run whose webhook does not exist: found false.
	hook := execution.Actor{Kind: "service", Sub: "webhook:whk_gone", ConfiguredBy: "bob"}
	hookRun := newActedRun(t, st, hook, execution.Origin{Kind: "webhook", ID: "whk_gone"}, nil, []string{})
	if a, _ = st.RunAuthority(ctx, "t1", hookRun); a.Bridge == nil || a.Bridge.Found || a.Bridge.Kind != "webhook" || a.Principal != "bob" {
		t.Fatalf("missing webhook read %+v %+v", a, a.Bridge)
	}

	// Another tenant's run, or none, is not found.
	if _, err := st.RunAuthority(ctx, "t2", userRun); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("another tenant's run: %v", err)
	}
}
