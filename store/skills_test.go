package store_test

import (
	"context"
	"errors"
	"testing"

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
	if err != nil {
		t.Fatal(err)
	}
	if sk.LatestRevision != 1 || rev.Revision != 1 || rev.Text != "Be brief." || rev.Hash != "h1" || sk.Archived() {
		t.Fatalf("created %+v %+v", sk, rev)
	}
	if _, _, err := st.CreateSkill(ctx, "t1", store.NewSkill{Key: "tone", Name: "x", Text: "x", Hash: "h", By: "ada"}); failure.CodeOf(err) != failure.CodeAlreadyExists {
		t.Fatalf("duplicate key: %v", err)
	}
	// Another tenant may use the same key; it never sees t1's.
	if _, _, err := st.CreateSkill(ctx, "t2", store.NewSkill{Key: "tone", Name: "Other", Text: "Shout.", Hash: "o1", By: "eve"}); err != nil {
		t.Fatal(err)
	}

	sk, rev, err = st.AddSkillRevision(ctx, "t1", "tone", store.SkillUpdate{ExpectedRevision: 1, Name: "Tone 2", Text: "Be very brief.", Hash: "h2", By: "ada"})
	if err != nil || sk.LatestRevision != 2 || rev.Revision != 2 || sk.Name != "Tone 2" {
		t.Fatalf("revision 2: %+v %+v %v", sk, rev, err)
	}
	if _, _, err := st.AddSkillRevision(ctx, "t1", "tone", store.SkillUpdate{ExpectedRevision: 1, Name: "x", Text: "x", Hash: "h", By: "ada"}); failure.CodeOf(err) != failure.CodeRevisionConflict {
		t.Fatalf("stale expected revision: %v", err)
	}
	if _, _, err := st.AddSkillRevision(ctx, "t3", "tone", store.SkillUpdate{Name: "x", Text: "x", Hash: "h", By: "ada"}); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("another tenant's skill: %v", err)
	}
	// Revision 1 is unchanged, and PostgreSQL refuses to change it.
	old, err := st.GetSkillRevision(ctx, "t1", "tone", 1)
	if err != nil || old.Text != "Be brief." || old.Name != "Tone" {
		t.Fatalf("revision 1: %+v %v", old, err)
	}
	if _, err := st.Pool.Exec(ctx, `UPDATE skill_revisions SET text = 'x' WHERE tenant_id = 't1' AND key = 'tone'`); err == nil {
		t.Fatal("a skill revision was updated")
	}
	if _, err := st.GetSkillRevision(ctx, "t2", "tone", 2); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("t2 sees t1's revision 2: %v", err)
	}

	history, err := st.ListSkillRevisions(ctx, "t1", "tone")
	if err != nil || len(history) != 2 || history[0].Revision != 2 {
		t.Fatalf("history %+v %v", history, err)
	}
	list, next, err := st.ListSkills(ctx, "t1", "", 10)
	if err != nil || len(list) != 1 || next != "" || list[0].Key != "tone" {
		t.Fatalf("list %+v %q %v", list, next, err)
	}

	// The catalog source answers the revisions that exist in the tenant.
	refs := []graph.SkillRef{{Key: "tone", Revision: 1}, {Key: "tone", Revision: 2}, {Key: "tone", Revision: 9}, {Key: "nope", Revision: 1}}
	got, err := st.SkillContracts(ctx, "t1", refs)
	if err != nil || len(got) != 2 || got[0] != (graph.SkillContract{Key: "tone", Revision: 1, Hash: "h1"}) || got[1].Hash != "h2" {
		t.Fatalf("contracts %+v %v", got, err)
	}
	got, err = st.SkillContracts(ctx, "t2", refs)
	if err != nil || len(got) != 1 || got[0].Hash != "o1" {
		t.Fatalf("t2 contracts %+v %v", got, err)
	}

	// Archiving: flagged for the catalog, no new revisions, revisions kept.
	if _, err := st.ArchiveSkill(ctx, "t1", "tone", "ada"); err != nil {
		t.Fatal(err)
	}
	if again, err := st.ArchiveSkill(ctx, "t1", "tone", "bob"); err != nil || again.ArchivedBy != "ada" {
		t.Fatalf("second archive: %+v %v", again, err)
	}
	got, err = st.SkillContracts(ctx, "t1", refs[:1])
	if err != nil || len(got) != 1 || !got[0].Archived {
		t.Fatalf("archived contract %+v %v", got, err)
	}
	if _, _, err := st.AddSkillRevision(ctx, "t1", "tone", store.SkillUpdate{Name: "x", Text: "x", Hash: "h", By: "ada"}); failure.CodeOf(err) != store.CodeSkillArchived {
		t.Fatalf("revision of an archived skill: %v", err)
	}
	if _, err := st.GetSkillRevision(ctx, "t1", "tone", 2); err != nil {
		t.Fatalf("archived skill's revision: %v", err)
	}
	if _, err := st.ArchiveSkill(ctx, "t2", "nope", "eve"); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("archive missing: %v", err)
	}
}
