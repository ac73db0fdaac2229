package store_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

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
	if err != nil || !created {
		t.Fatalf("first add: created=%v err=%v", created, err)
	}
	if first.TenantID != "t1" || first.Sub != "alice" || first.Scope != "notes.write" || first.CreatedAt.IsZero() {
		t.Fatalf("first add returned %+v", first)
	}
	again, created, err := st.AddRevocation(ctx, "t1", "alice", "notes.write")
	if err != nil || created || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("second add: %+v created=%v err=%v, want the first row, not created", again, created, err)
	}
	if err := st.Revoke(ctx, "t1", "alice", "notes.write"); err != nil {
		t.Fatalf("Revoke of an existing revocation: %v", err)
	}

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
	if creations != 1 {
		t.Fatalf("%d concurrent adds created the revocation, want exactly 1", creations)
	}

	for _, args := range [][3]string{{"", "a", "s"}, {"t", "", "s"}, {"t", "a", ""}} {
		if _, _, err := st.AddRevocation(ctx, args[0], args[1], args[2]); failure.CodeOf(err) != failure.CodeInvalidRequest {
			t.Errorf("AddRevocation%q: err = %v, want INVALID_REQUEST", args, err)
		}
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
		if err := st.Revoke(ctx, r[0], r[1], r[2]); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"t1/alice/notes.write", "t1/alice/runs.execute", "t1/bob/runs.execute", "t1/carol/notes.write"}

	all, err := st.ListRevocations(ctx, "t1", "", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := revocationKeys(all); !slices.Equal(got, want) {
		t.Fatalf("t1 revocations = %v, want %v", got, want)
	}

	// Pages of 3 then the rest, from the last row of each page.
	var paged []store.Revocation
	var after *store.RevocationCursor
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("paging does not end")
		}
		page, err := st.ListRevocations(ctx, "t1", "", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		last := page[len(page)-1]
		after = &store.RevocationCursor{Sub: last.Sub, Scope: last.Scope}
	}
	if got := revocationKeys(paged); !slices.Equal(got, want) {
		t.Fatalf("paged = %v, want %v", got, want)
	}

	alice, err := st.ListRevocations(ctx, "t1", "alice", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := revocationKeys(alice); !slices.Equal(got, want[:2]) {
		t.Fatalf("alice's = %v, want %v", got, want[:2])
	}
	rest, err := st.ListRevocations(ctx, "t1", "alice", &store.RevocationCursor{Sub: "alice", Scope: "notes.write"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := revocationKeys(rest); !slices.Equal(got, want[1:2]) {
		t.Fatalf("alice's after notes.write = %v, want %v", got, want[1:2])
	}
	none, err := st.ListRevocations(ctx, "t3", "", nil, 0)
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("a tenant without revocations: %v (nil %v) %v", none, none == nil, err)
	}
	other, err := st.ListRevocations(ctx, "t2", "", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := revocationKeys(other); !slices.Equal(got, []string{"t2/alice/notes.write", "t2/dave/runs.read"}) {
		t.Fatalf("t2 revocations = %v", got)
	}
}

// TestDeleteRevocationIsTenantScoped: deleting reports a missing (or
// another tenant's) revocation as not found; Unrevoke stays harmless.
func TestDeleteRevocationIsTenantScoped(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	if err := st.Revoke(ctx, "t1", "alice", "notes.write"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteRevocation(ctx, "t2", "alice", "notes.write"); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("another tenant's delete: %v, want not found", err)
	}
	if scopes, err := st.RevokedScopes(ctx, "t1", "alice"); err != nil || !slices.Equal(scopes, []string{"notes.write"}) {
		t.Fatalf("after a foreign delete: %v %v", scopes, err)
	}
	if err := st.DeleteRevocation(ctx, "t1", "alice", "notes.write"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if scopes, err := st.RevokedScopes(ctx, "t1", "alice"); err != nil || len(scopes) != 0 {
		t.Fatalf("after delete: %v %v", scopes, err)
	}
	if err := st.DeleteRevocation(ctx, "t1", "alice", "notes.write"); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("second delete: %v, want not found", err)
	}
	if err := st.Unrevoke(ctx, "t1", "alice", "notes.write"); err != nil {
		t.Fatalf("Unrevoke of a missing revocation: %v", err)
	}
}
