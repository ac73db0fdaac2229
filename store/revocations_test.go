package store_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func revocationKeys(rs []store.Revocation) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.TenantID+"/"+r.Sub+"/"+r.Scope)
	}
	return out
}

// TestAddRevocationReportsCreation: the first add creates the row, a
// repeat (sequential or concurrent) returns the same row, not created.
func TestAddRevocationReportsCreation(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()

	first, created, err := st.AddRevocation(ctx, "t1", "alice", "notes.write")
	require.NoError(t, err, "first add: created=%v err", created)
	require.True(t, created, "first add: created=%v err=%v", created, err)
	require.Equal(t, "t1", first.TenantID, "first add returned %+v", first)
	require.Equal(t, "alice", first.Sub, "first add returned %+v", first)
	require.Equal(t, "notes.write", first.Scope, "first add returned %+v", first)
	require.False(t, first.CreatedAt.IsZero(), "first add returned %+v", first)
	again, created, err := st.AddRevocation(ctx, "t1", "alice", "notes.write")
	require.NoError(t, err, "second add: %+v created=%v err=%v, want the first row, not created", again, created, err)
	require.False(t, created, "second add: %+v created=%v err=%v, want the first row, not created", again, created, err)
	require.True(t, again.CreatedAt.Equal(first.CreatedAt), "second add: %+v created=%v err=%v, want the first row, not created", again, created, err)
	require.NoError(t, st.Revoke(ctx, "t1", "alice", "notes.write"), "Revoke of an existing revocation")

	// Concurrent adds of a new revocation: exactly one creates it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	creations := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, created, err := st.AddRevocation(ctx, "t1", "bob", "runs.execute")
			if err != nil {
				t.Error(err)
			}
			if created {
				mu.Lock()
				creations++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, creations, "%d concurrent adds created the revocation, want exactly 1", creations)

	for _, args := range [][3]string{{"", "a", "s"}, {"t", "", "s"}, {"t", "a", ""}} {
		_, _, err = st.AddRevocation(ctx, args[0], args[1], args[2])
		assert.Equal(t, failure.CodeInvalidRequest, failure.CodeOf(err), "AddRevocation%q: err = %v, want INVALID_REQUEST", args, err)
	}
}

// TestListRevocationsPagesByTenantAndSub: a tenant's revocations in (sub,
// scope) order, filtered by sub, paged with a keyset cursor, and never
// another tenant's.
func TestListRevocationsPagesByTenantAndSub(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	for _, r := range [][3]string{
		{"t1", "carol", "notes.write"}, {"t1", "alice", "runs.execute"}, {"t1", "bob", "runs.execute"},
		{"t1", "alice", "notes.write"}, {"t2", "alice", "notes.write"}, {"t2", "dave", "runs.read"},
	} {
		require.NoError(t, st.Revoke(ctx, r[0], r[1], r[2]))
	}
	want := []string{"t1/alice/notes.write", "t1/alice/runs.execute", "t1/bob/runs.execute", "t1/carol/notes.write"}

	all, err := st.ListRevocations(ctx, "t1", "", nil, 0)
	require.NoError(t, err)
	got := revocationKeys(all)
	require.True(t, slices.Equal(got, want), "t1 revocations = %v, want %v", got, want)

	// Pages of 3 then the rest, from the last row of each page.
	var paged []store.Revocation
	var after *store.RevocationCursor
	for pages := 0; ; pages++ {
		require.LessOrEqual(t, pages, 3, "paging does not end")
		page, err := st.ListRevocations(ctx, "t1", "", after, 3)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		last := page[len(page)-1]
		after = &store.RevocationCursor{Sub: last.Sub, Scope: last.Scope}
	}
	got = revocationKeys(paged)
	require.True(t, slices.Equal(got, want), "paged = %v, want %v", got, want)

	alice, err := st.ListRevocations(ctx, "t1", "alice", nil, 0)
	require.NoError(t, err)
	got = revocationKeys(alice)
	require.True(t, slices.Equal(got, want[:2]), "alice's = %v, want %v", got, want[:2])
	rest, err := st.ListRevocations(ctx, "t1", "alice", &store.RevocationCursor{Sub: "alice", Scope: "notes.write"}, 0)
	require.NoError(t, err)
	got = revocationKeys(rest)
	require.True(t, slices.Equal(got, want[1:2]), "alice's after notes.write = %v, want %v", got, want[1:2])
	none, err := st.ListRevocations(ctx, "t3", "", nil, 0)
	require.NoError(t, err, "a tenant without revocations: %v (nil %v)", none, none == nil)
	require.NotNil(t, none, "a tenant without revocations: %v (nil %v) %v", none, none == nil, err)
	require.Empty(t, none, "a tenant without revocations: %v (nil %v) %v", none, none == nil, err)
	other, err := st.ListRevocations(ctx, "t2", "", nil, 0)
	require.NoError(t, err)
	got = revocationKeys(other)
	require.True(t, slices.Equal(got, []string{"t2/alice/notes.write", "t2/dave/runs.read"}), "t2 revocations = %v", got)
}

// TestDeleteRevocationIsTenantScoped: deleting reports a missing (or
// another tenant's) revocation as not found; Unrevoke stays harmless.
func TestDeleteRevocationIsTenantScoped(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	require.NoError(t, st.Revoke(ctx, "t1", "alice", "notes.write"))
	err := st.DeleteRevocation(ctx, "t2", "alice", "notes.write")
	require.ErrorIs(t, err, failure.ErrNotFound, "another tenant's delete: %v, want not found", err)
	scopes, err := st.RevokedScopes(ctx, "t1", "alice")
	require.NoError(t, err, "after a foreign delete: %v", scopes)
	require.True(t, slices.Equal(scopes, []string{"notes.write"}), "after a foreign delete: %v %v", scopes, err)
	require.NoError(t, st.DeleteRevocation(ctx, "t1", "alice", "notes.write"), "delete")
	scopes, err = st.RevokedScopes(ctx, "t1", "alice")
	require.NoError(t, err, "after delete: %v", scopes)
	require.Empty(t, scopes, "after delete: %v %v", scopes, err)
	err = st.DeleteRevocation(ctx, "t1", "alice", "notes.write")
	require.ErrorIs(t, err, failure.ErrNotFound, "second delete: %v, want not found", err)
	require.NoError(t, st.Unrevoke(ctx, "t1", "alice", "notes.write"), "Unrevoke of a missing revocation")
}
