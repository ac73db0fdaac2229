package store_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

func TestWriteNoteOnceIsExactlyOncePerKey(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	body := json.RawMessage(`{"id":"a"}`)
	var ids [10]string
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := st.WriteNoteOnce(ctx, "t1", "r1", "save", "t1/r1/save", "h1", "Item a", body, scheduleActor)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}()
	}
	wg.Wait()
	for _, id := range ids {
		require.NotEmpty(t, id, "ids differ: %v", ids)
		require.Equal(t, ids[0], id, "ids differ: %v", ids)
	}
	_, err := st.WriteNoteOnce(ctx, "t1", "r1", "save", "t1/r1/save", "h2", "Item b", body, scheduleActor)
	require.ErrorIs(t, err, store.ErrLedgerConflict, "other input: %v", err)
	require.Equal(t, failure.CodeIdempotencyConflict, failure.CodeOf(err), "other input: %v", err)
	// The same key in another tenant is another note.
	other, err := st.WriteNoteOnce(ctx, "t2", "r9", "save", "t1/r1/save", "h1", "x", body, execution.Actor{Kind: "user", Sub: "mallory"})
	require.NoError(t, err, "other tenant: %s", other)
	require.NotEqual(t, ids[0], other, "other tenant: %s %v", other, err)
	notes, err := st.ListNotes(ctx, "t1", 10, nil)
	require.NoError(t, err)
	require.Len(t, notes, 1, "notes: %+v", notes)
	require.Equal(t, ids[0], notes[0].NoteID, "notes: %+v", notes)
	require.Equal(t, "r1", notes[0].RunID, "notes: %+v", notes)
	require.Equal(t, "save", notes[0].NodeID, "notes: %+v", notes)
	require.Equal(t, "Item a", notes[0].Title, "notes: %+v", notes)
	// The note names who acted: the schedule's service actor and the user
	// who configured it.
	require.NotNil(t, notes[0].Actor, "author: %+v %q", notes[0].Actor, notes[0].RequestedBy)
	require.True(t, *notes[0].Actor == scheduleActor, "author: %+v %q", notes[0].Actor, notes[0].RequestedBy)
	require.Equal(t, "alice", notes[0].RequestedBy, "author: %+v %q", notes[0].Actor, notes[0].RequestedBy)
}

var scheduleActor = execution.Actor{Kind: "service", Sub: "schedule:sch_a", ConfiguredBy: "alice"}

func TestListNotesPages(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	for i := range 5 {
		key := string(rune('a' + i))
		_, err := st.WriteNoteOnce(ctx, "t1", "r", "n", key, "h", key, json.RawMessage(`1`), execution.Actor{Kind: "user", Sub: "ada"})
		require.NoError(t, err)
	}
	var titles []string
	var before *store.NoteCursor
	for {
		page, err := st.ListNotes(ctx, "t1", 2, before)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		for _, n := range page {
			titles = append(titles, n.Title)
		}
		c := page[len(page)-1].Cursor()
		before = &c
	}
	require.Len(t, titles, 5, "titles %v", titles)
	require.Equal(t, "e", titles[0], "titles %v", titles)
	require.Equal(t, "a", titles[4], "titles %v", titles)
}
