package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// exampleGraph is the SPEC §2 example, kept in examples/ for the walkthrough.
func exampleGraph(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../examples/quickstart.json")
	require.NoError(t, err)
	return b
}

// compileExample compiles the example graph, with expression swapped in
// so tests can make distinct revisions.
func compileExample(t testing.TB, expression string) (*graph.Compiled, *graph.Plan, []byte) {
	t.Helper()
	raw := exampleGraph(t)
	if expression != "" {
		raw = []byte(strings.Replace(string(raw), `"input.id != ''"`, `"`+expression+`"`, 1))
	}
	doc, err := graph.Decode(raw)
	require.NoError(t, err)
	c, issues := graph.Compile(doc, graph.NewStaticCatalog(catalog.BuiltinContracts(), nil))
	require.Empty(t, issues)
	p := c.Plan()
	return c, &p, raw
}

func requireCode(t *testing.T, err error, code string) *failure.Error {
	t.Helper()
	var fe *failure.Error
	require.True(t, errors.As(err, &fe), "want a coded error %s, got %v", code, err)
	require.Equal(t, code, fe.Code, "error: %v", err)
	return fe
}

func TestCreateWorkflowAndDrafts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	_, _, raw := compileExample(t, "")

	w, err := st.CreateWorkflow(ctx, "t1", "orders", raw, "alice")
	require.NoError(t, err)
	require.Equal(t, "orders", w.Key)
	require.Equal(t, 1, w.LatestDraftRevision)
	require.Equal(t, 0, w.LatestPublishedRevision)
	require.Equal(t, "alice", w.CreatedBy)

	_, err = st.CreateWorkflow(ctx, "t1", "orders", raw, "bob")
	requireCode(t, err, failure.CodeAlreadyExists)
	// The same key in another tenant is another workflow.
	_, err = st.CreateWorkflow(ctx, "t2", "orders", raw, "carol")
	require.NoError(t, err)

	rev, err := st.SaveDraft(ctx, "t1", "orders", 1, raw, "bob")
	require.NoError(t, err)
	require.Equal(t, 2, rev)

	_, err = st.SaveDraft(ctx, "t1", "orders", 1, raw, "bob")
	fe := requireCode(t, err, failure.CodeRevisionConflict)
	require.Equal(t, map[string]any{"expectedRevision": 1, "currentRevision": 2}, fe.Details)

	_, err = st.SaveDraft(ctx, "t1", "missing", 1, raw, "bob")
	require.ErrorIs(t, err, failure.ErrNotFound)
	_, err = st.SaveDraft(ctx, "t3", "orders", 1, raw, "bob")
	require.ErrorIs(t, err, failure.ErrNotFound, "another tenant's workflow is not found")

	d, err := st.GetDraft(ctx, "t1", "orders", 2)
	require.NoError(t, err)
	require.Equal(t, "bob", d.SavedBy)
	require.JSONEq(t, string(raw), string(d.Document))
	_, err = st.GetDraft(ctx, "t1", "orders", 3)
	require.ErrorIs(t, err, failure.ErrNotFound)
	_, err = st.GetDraft(ctx, "t2", "orders", 2)
	require.ErrorIs(t, err, failure.ErrNotFound)

	w, err = st.GetWorkflow(ctx, "t1", "orders")
	require.NoError(t, err)
	require.Equal(t, 2, w.LatestDraftRevision)
	_, err = st.GetWorkflow(ctx, "t9", "orders")
	require.ErrorIs(t, err, failure.ErrNotFound)
}

func TestDraftPostgresCannotStoreIsInvalidDocument(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	// Valid JSON that jsonb refuses: a NUL escape, a lone surrogate, numbers
	// beyond numeric's range.
	for i, doc := range []string{
		`{"schemaVersion":1,"nodes":[],"edges":[],"schemas":{"A":{"description":"a\u0000b"}}}`,
		`{"schemaVersion":1,"nodes":[],"edges":[],"schemas":{"A":{"description":"\ud800"}}}`,
		`{"schemaVersion":1,"nodes":[],"edges":[],"schemas":{"A":{"maximum":1e999999}}}`,
		`{"schemaVersion":1,"nodes":[],"edges":[],"schemas":{"A":{"minimum":-1e-999999}}}`,
	} {
		_, err := st.CreateWorkflow(ctx, "t1", "k"+string(rune('a'+i)), json.RawMessage(doc), "alice")
		requireCode(t, err, failure.CodeInvalidDocument)
	}
	// Nothing half-created.
	items, _, err := st.ListWorkflows(ctx, "t1", "", 10)
	require.NoError(t, err)
	require.Empty(t, items)
}

func TestListWorkflowsPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	_, _, raw := compileExample(t, "")
	for _, k := range []string{"c", "a", "e", "b", "d"} {
		_, err := st.CreateWorkflow(ctx, "t1", k, raw, "alice")
		require.NoError(t, err)
	}
	_, err := st.CreateWorkflow(ctx, "t2", "aa", raw, "alice")
	require.NoError(t, err)

	var got []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		items, next, err := st.ListWorkflows(ctx, "t1", after, 2)
		require.NoError(t, err)
		for _, w := range items {
			got = append(got, w.Key)
		}
		if next == "" {
			break
		}
		after = next
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, got)
}

func TestPublishRevisions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	c1, p1, raw := compileExample(t, "")
	_, err := st.CreateWorkflow(ctx, "t1", "orders", raw, "alice")
	require.NoError(t, err)

	_, err = st.LatestRevision(ctx, "t1", "orders")
	require.ErrorIs(t, err, failure.ErrNotFound, "never published")

	// Publishing a draft that is not the latest is a conflict.
	_, err = st.SaveDraft(ctx, "t1", "orders", 1, raw, "alice")
	require.NoError(t, err)
	_, _, err = st.Publish(ctx, "t1", "orders", 1, c1, p1, "pub")
	requireCode(t, err, failure.CodeRevisionConflict)

	r1, created, err := st.Publish(ctx, "t1", "orders", 2, c1, p1, "pub")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, store.Revision{Key: "orders", Revision: 1, Checksum: c1.Checksum, DraftRevision: 2,
		PublishedBy: "pub", PublishedAt: r1.PublishedAt}, r1)

	// The same content again: the same revision, nothing new.
	again, created, err := st.Publish(ctx, "t1", "orders", 2, c1, p1, "someone-else")
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, r1, again)

	// New content: revision 2.
	c2, p2, raw2 := compileExample(t, "size(input.id) > 0")
	require.NotEqual(t, c1.Checksum, c2.Checksum)
	_, err = st.SaveDraft(ctx, "t1", "orders", 2, raw2, "alice")
	require.NoError(t, err)
	r2, created, err := st.Publish(ctx, "t1", "orders", 3, c2, p2, "pub")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 2, r2.Revision)

	// Going back to revision 1's content is a new revision (only the latest dedupes).
	_, err = st.SaveDraft(ctx, "t1", "orders", 3, raw, "alice")
	require.NoError(t, err)
	r3, created, err := st.Publish(ctx, "t1", "orders", 4, c1, p1, "pub")
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, 3, r3.Revision)
	require.Equal(t, c1.Checksum, r3.Checksum)

	latest, err := st.LatestRevision(ctx, "t1", "orders")
	require.NoError(t, err)
	require.Equal(t, r3, latest)
	got1, err := st.GetRevision(ctx, "t1", "orders", 1)
	require.NoError(t, err)
	require.Equal(t, r1, got1)
	_, err = st.GetRevision(ctx, "t1", "orders", 4)
	require.ErrorIs(t, err, failure.ErrNotFound)
	_, err = st.GetRevision(ctx, "t2", "orders", 1)
	require.ErrorIs(t, err, failure.ErrNotFound)

	w, err := st.GetWorkflow(ctx, "t1", "orders")
	require.NoError(t, err)
	require.Equal(t, 3, w.LatestPublishedRevision)
	require.Equal(t, c1.Checksum, w.LatestChecksum)

	gc, err := st.GetCompiled(ctx, "t1", c1.Checksum)
	require.NoError(t, err)
	require.Equal(t, c1.Checksum, gc.Checksum)
	require.Equal(t, c1.Order, gc.Order)
	require.Equal(t, c1.Document.Nodes[1].Expression, gc.Document.Nodes[1].Expression)
	gp, err := st.GetPlan(ctx, "t1", c1.Checksum)
	require.NoError(t, err)
	require.Equal(t, p1, gp)

	_, err = st.GetCompiled(ctx, "t2", c1.Checksum)
	require.ErrorIs(t, err, failure.ErrNotFound, "compiled revisions are per tenant")
	_, err = st.GetPlan(ctx, "t2", c1.Checksum)
	require.ErrorIs(t, err, failure.ErrNotFound)
}

func TestPutCompiledIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	c, p, _ := compileExample(t, "")
	require.NoError(t, st.PutCompiled(ctx, "t1", c, p))
	require.NoError(t, st.PutCompiled(ctx, "t1", c, p))
	var n int
	require.NoError(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM compiled_revisions`).Scan(&n))
	require.Equal(t, 1, n)

	bad := *p
	bad.Checksum = "other"
	require.Error(t, st.PutCompiled(ctx, "t1", c, &bad), "a plan of another revision is refused")
}

func TestPublishedRowsAreImmutable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := testinfra.NewStore(t)
	c, p, raw := compileExample(t, "")
	_, err := st.CreateWorkflow(ctx, "t1", "orders", raw, "alice")
	require.NoError(t, err)
	_, _, err = st.Publish(ctx, "t1", "orders", 1, c, p, "pub")
	require.NoError(t, err)

	for _, stmt := range []string{
		`UPDATE workflow_revisions SET published_by = 'mallory'`,
		`UPDATE workflow_revisions SET checksum = 'x'`,
		`DELETE FROM workflow_revisions`,
		`TRUNCATE workflow_revisions`,
		`UPDATE compiled_revisions SET compiled = '{}'::jsonb`,
		`DELETE FROM compiled_revisions`,
		`TRUNCATE compiled_revisions CASCADE`,
		`UPDATE workflow_drafts SET document = '{}'::jsonb`,
		`DELETE FROM workflow_drafts`,
	} {
		_, err := st.Pool.Exec(ctx, stmt)
		require.Error(t, err, stmt)
		require.Contains(t, err.Error(), "immutable", stmt)
	}
	r, err := st.GetRevision(ctx, "t1", "orders", 1)
	require.NoError(t, err)
	require.Equal(t, "pub", r.PublishedBy)
	require.Equal(t, c.Checksum, r.Checksum)
}
