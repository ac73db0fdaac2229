package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func TestSkillRevisionsAreImmutableAndTenantOwned(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	sk, rev, err := st.CreateSkill(ctx, "t1", store.NewSkill{Key: "tone", Name: "Tone", Text: "Be brief.", Hash: "h1", By: "ada"})
	require.NoError(t, err)
	require.Equal(t, 1, sk.LatestRevision, "created %+v %+v", sk, rev)
	require.Equal(t, 1, rev.Revision, "created %+v %+v", sk, rev)
	require.Equal(t, "Be brief.", rev.Text, "created %+v %+v", sk, rev)
	require.Equal(t, "h1", rev.Hash, "created %+v %+v", sk, rev)
	require.False(t, sk.Archived(), "created %+v %+v", sk, rev)
	_, _, err = st.CreateSkill(ctx, "t1", store.NewSkill{Key: "tone", Name: "x", Text: "x", Hash: "h", By: "ada"})
	require.Equal(t, failure.CodeAlreadyExists, failure.CodeOf(err), "duplicate key: %v", err)
	// Another tenant may use the same key; it never sees t1's.
	_, _, err = st.CreateSkill(ctx, "t2", store.NewSkill{Key: "tone", Name: "Other", Text: "Shout.", Hash: "o1", By: "eve"})
	require.NoError(t, err)

	sk, rev, err = st.AddSkillRevision(ctx, "t1", "tone", store.SkillUpdate{ExpectedRevision: 1, Name: "Tone 2", Text: "Be very brief.", Hash: "h2", By: "ada"})
	require.NoError(t, err, "revision 2: %+v %+v", sk, rev)
	require.Equal(t, 2, sk.LatestRevision, "revision 2: %+v %+v %v", sk, rev, err)
	require.Equal(t, 2, rev.Revision, "revision 2: %+v %+v %v", sk, rev, err)
	require.Equal(t, "Tone 2", sk.Name, "revision 2: %+v %+v %v", sk, rev, err)
	_, _, err = st.AddSkillRevision(ctx, "t1", "tone", store.SkillUpdate{ExpectedRevision: 1, Name: "x", Text: "x", Hash: "h", By: "ada"})
	require.Equal(t, failure.CodeRevisionConflict, failure.CodeOf(err), "stale expected revision: %v", err)
	_, _, err = st.AddSkillRevision(ctx, "t3", "tone", store.SkillUpdate{Name: "x", Text: "x", Hash: "h", By: "ada"})
	require.ErrorIs(t, err, failure.ErrNotFound, "another tenant's skill: %v", err)
	// Revision 1 is unchanged, and PostgreSQL refuses to change it.
	old, err := st.GetSkillRevision(ctx, "t1", "tone", 1)
	require.NoError(t, err, "revision 1: %+v", old)
	require.Equal(t, "Be brief.", old.Text, "revision 1: %+v %v", old, err)
	require.Equal(t, "Tone", old.Name, "revision 1: %+v %v", old, err)
	_, err = st.Pool.Exec(ctx, `UPDATE skill_revisions SET text = 'x' WHERE tenant_id = 't1' AND key = 'tone'`)
	require.Error(t, err, "a skill revision was updated")
	_, err = st.GetSkillRevision(ctx, "t2", "tone", 2)
	require.ErrorIs(t, err, failure.ErrNotFound, "t2 sees t1's revision 2: %v", err)

	history, err := st.ListSkillRevisions(ctx, "t1", "tone")
	require.NoError(t, err, "history %+v", history)
	require.Len(t, history, 2, "history %+v %v", history, err)
	require.Equal(t, 2, history[0].Revision, "history %+v %v", history, err)
	list, next, err := st.ListSkills(ctx, "t1", "", 10)
	require.NoError(t, err, "list %+v %q", list, next)
	require.Len(t, list, 1, "list %+v %q %v", list, next, err)
	require.Empty(t, next, "list %+v %q %v", list, next, err)
	require.Equal(t, "tone", list[0].Key, "list %+v %q %v", list, next, err)

	// The catalog source answers the revisions that exist in the tenant.
	refs := []graph.SkillRef{{Key: "tone", Revision: 1}, {Key: "tone", Revision: 2}, {Key: "tone", Revision: 9}, {Key: "nope", Revision: 1}}
	got, err := st.SkillContracts(ctx, "t1", refs)
	require.NoError(t, err, "contracts %+v", got)
	require.Len(t, got, 2, "contracts %+v %v", got, err)
	require.True(t, got[0] == (graph.SkillContract{Key: "tone", Revision: 1, Hash: "h1"}), "contracts %+v %v", got, err)
	require.Equal(t, "h2", got[1].Hash, "contracts %+v %v", got, err)
	got, err = st.SkillContracts(ctx, "t2", refs)
	require.NoError(t, err, "t2 contracts %+v", got)
	require.Len(t, got, 1, "t2 contracts %+v %v", got, err)
	require.Equal(t, "o1", got[0].Hash, "t2 contracts %+v %v", got, err)

	// Archiving: flagged for the catalog, no new revisions, revisions kept.
	_, err = st.ArchiveSkill(ctx, "t1", "tone", "ada")
	require.NoError(t, err)
	again, err := st.ArchiveSkill(ctx, "t1", "tone", "bob")
	require.NoError(t, err, "second archive: %+v", again)
	require.Equal(t, "ada", again.ArchivedBy, "second archive: %+v %v", again, err)
	got, err = st.SkillContracts(ctx, "t1", refs[:1])
	require.NoError(t, err, "archived contract %+v", got)
	require.Len(t, got, 1, "archived contract %+v %v", got, err)
	require.True(t, got[0].Archived, "archived contract %+v %v", got, err)
	_, _, err = st.AddSkillRevision(ctx, "t1", "tone", store.SkillUpdate{Name: "x", Text: "x", Hash: "h", By: "ada"})
	require.Equal(t, store.CodeSkillArchived, failure.CodeOf(err), "revision of an archived skill: %v", err)
	_, err = st.GetSkillRevision(ctx, "t1", "tone", 2)
	require.NoError(t, err, "archived skill's revision")
	_, err = st.ArchiveSkill(ctx, "t2", "nope", "eve")
	require.ErrorIs(t, err, failure.ErrNotFound, "archive missing: %v", err)
}
