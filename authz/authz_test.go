package authz_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/authz"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/store"
)

const (
	echo  = "core.echo@1"
	notes = "workspace.notes.write@1"
)

var needNotes = []string{"notes.write"}

func TestParseTools(t *testing.T) {
	t.Parallel()
	got, err := authz.ParseTools("toolGrants", []string{notes, echo, notes})
	require.NoError(t, err, "normalized %v", got)
	require.True(t, slices.Equal(got, []string{echo, notes}), "normalized %v %v", got, err)
	got, err = authz.ParseTools("toolGrants", nil)
	require.Nil(t, got, "nil stays nil (not given): %#v %v", got, err)
	require.NoError(t, err, "nil stays nil (not given): %#v", got)
	got, err = authz.ParseTools("toolGrants", []string{})
	require.NotNil(t, got, "empty stays empty (nothing granted): %#v %v", got, err)
	require.Empty(t, got, "empty stays empty (nothing granted): %#v %v", got, err)
	require.NoError(t, err, "empty stays empty (nothing granted): %#v", got)
	for _, bad := range []string{"", "core.echo", "core.echo@0", "core.echo@01", "@1", " core.echo@1", "a@b@1", "core.echo@x"} {
		_, err := authz.ParseTools("toolGrants", []string{echo, bad})
		var fe *failure.Error
		assert.False(t, !asFailure(err, &fe) || fe.Code != failure.CodeInvalidRequest || fe.Details["index"] != 1 || fe.Details["field"] != "toolGrants", "%q: %v", bad, err)
	}
	many := make([]string, authz.MaxTools+1)
	for i := range many {
		many[i] = echo
	}
	_, err = authz.ParseTools("toolPolicy", many)
	require.Equal(t, failure.CodeInvalidRequest, failure.CodeOf(err), "too many: %v", err)
	require.True(t, authz.SameTools(nil, nil), "SameTools")
	require.False(t, authz.SameTools(nil, []string{}), "SameTools")
	require.True(t, authz.SameTools([]string{echo}, []string{echo}), "SameTools")
	require.False(t, authz.SameTools([]string{echo}, []string{notes}), "SameTools")
}

func asFailure(err error, fe **failure.Error) bool {
	f, ok := err.(*failure.Error)
	*fe = f
	return ok
}

func TestGrantOfAUserRun(t *testing.T) {
	t.Parallel()
	run := store.RunAuthority{Actor: execution.Actor{Kind: "user", Sub: "ada"}, Principal: "ada",
		Permissions: []string{"runs.execute", "notes.write", "notes.write"}}
	g := authz.FromRun(run)
	require.True(t, slices.Equal(g.Permissions, []string{"notes.write", "runs.execute"}), "permissions %v", g.Permissions)
	narrowed := g.Tool(notes, needNotes)
	require.True(t, narrowed.Allowed, "not narrowed: %+v", narrowed)

	// A scope revoked from ada since: denied, naming the revocation.
	run.Revoked = []string{"notes.write", "crm.write"}
	g = authz.FromRun(run)
	d := g.Tool(notes, needNotes)
	require.False(t, d.Allowed, "revoked: %+v", d)
	require.True(t, slices.Equal(d.Missing, needNotes), "revoked: %+v", d)
	require.Contains(t, d.Why, "notes.write revoked from ada", "revoked: %+v", d)
	require.True(t, slices.Equal(g.Permissions, []string{"runs.execute"}), "effective %v revoked %v", g.Permissions, g.Revoked)
	require.True(t, slices.Equal(g.Revoked, []string{"notes.write"}), "effective %v revoked %v", g.Permissions, g.Revoked)
	d = g.Tool(echo, nil)
	require.True(t, d.Allowed, "a tool needing nothing: %+v", d)

	// toolGrants narrow; an empty list grants nothing.
	run.Revoked = nil
	run.ToolGrants = []string{echo}
	g = authz.FromRun(run)
	d = g.Tool(notes, needNotes)
	require.False(t, d.Allowed, "not granted: %+v", d)
	require.Contains(t, d.Why, "toolGrants", "not granted: %+v", d)
	require.Nil(t, d.Missing, "not granted: %+v", d)
	d = g.Tool(echo, nil)
	require.True(t, d.Allowed, "granted: %+v", d)
	run.ToolGrants = []string{}
	require.False(t, authz.FromRun(run).Tool(echo, nil).Allowed, "an empty toolGrants granted a tool")
}

func TestGrantOfAServiceActorRun(t *testing.T) {
	t.Parallel()
	svc := execution.Actor{Kind: "service", Sub: "schedule:sch_1", ConfiguredBy: "alice"}
	live := &store.BridgeAuthority{Kind: "schedule", ID: "sch_1", Found: true, ToolPolicy: []string{echo, notes}}
	run := store.RunAuthority{Actor: svc, Principal: "alice", Permissions: []string{"notes.write"},
		RunToolPolicy: []string{echo, notes}, Bridge: live}
	for _, tool := range []string{echo, notes} {
		d := authz.FromRun(run).Tool(tool, nil)
		require.True(t, d.Allowed, "%s in the policy: %+v", tool, d)
	}
	d := authz.FromRun(run).Tool("crm.write@1", nil)
	require.False(t, d.Allowed, "outside the policy: %+v", d)
	require.Contains(t, d.Why, "schedule sch_1's tool policy", "outside the policy: %+v", d)

	// Narrowed since the run started: the current policy decides.
	live.ToolPolicy = []string{echo}
	d = authz.FromRun(run).Tool(notes, nil)
	require.False(t, d.Allowed, "narrowed: %+v", d)
	require.Equal(t, "it is not in schedule sch_1's tool policy", d.Why, "narrowed: %+v", d)
	// Widened since: the policy when the run started still bounds it.
	live.ToolPolicy = []string{echo, notes, "crm.write@1"}
	d = authz.FromRun(run).Tool("crm.write@1", nil)
	require.False(t, d.Allowed, "widened: %+v", d)
	require.Contains(t, d.Why, "when it started the run", "widened: %+v", d)
	// Deleted, or never there: no tool at all.
	live.Deleted = true
	d = authz.FromRun(run).Tool(echo, nil)
	require.False(t, d.Allowed, "deleted: %+v", d)
	require.Contains(t, d.Why, "was deleted", "deleted: %+v", d)
	run.Bridge = &store.BridgeAuthority{Kind: "webhook", ID: "whk_x"}
	d = authz.FromRun(run).Tool(echo, nil)
	require.False(t, d.Allowed, "missing bridge: %+v", d)
	require.Contains(t, d.Why, "has none", "missing bridge: %+v", d)
	run.Bridge, run.RunToolPolicy = nil, nil
	require.False(t, authz.FromRun(run).Tool(echo, nil).Allowed, "a service actor without any policy was granted a tool")
}

func TestStaticAndEffective(t *testing.T) {
	t.Parallel()
	got := authz.Effective([]string{"b", "a", "b", "c"}, []string{"c"})
	require.True(t, slices.Equal(got, []string{"a", "b"}), "effective %v", got)
	g := authz.Static([]string{"notes.write"})
	require.True(t, g.Tool(notes, needNotes).Allowed, "static grant")
	require.False(t, g.Tool("x@1", []string{"crm.write"}).Allowed, "static grant")
}

// TestPrincipalIsRequestedBy: revocations apply to the user behind the actor.
func TestPrincipalIsRequestedBy(t *testing.T) {
	t.Parallel()
	p := (execution.Actor{Kind: "user", Sub: "ada"}).RequestedBy()
	require.Equal(t, "ada", p, p)
	p = (execution.Actor{Kind: "service", Sub: "webhook:whk_1", ConfiguredBy: "bob"}).RequestedBy()
	require.Equal(t, "bob", p, p)
}
