package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

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
		if id == "" || id != ids[0] {
			t.Fatalf("ids differ: %v", ids)
		}
	}
	_, err := st.WriteNoteOnce(ctx, "t1", "r1", "save", "t1/r1/save", "h2", "Item b", body, scheduleActor)
	if !errors.Is(err, store.ErrLedgerConflict) || failure.CodeOf(err) != failure.CodeIdempotencyConflict {
		t.Fatalf("other input: %v", err)
	}
	// The same key in another tenant is another note.
	other, err := st.WriteNoteOnce(ctx, "t2", "r9", "save", "t1/r1/save", "h1", "x", body, execution.Actor{Kind: "user", Sub: "mallory"})
	if err != nil || other == ids[0] {
		t.Fatalf("other tenant: %s %v", other, err)
	}
	notes, err := st.ListNotes(ctx, "t1", 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || notes[0].NoteID != ids[0] || notes[0].RunID != "r1" || notes[0].NodeID != "save" || notes[0].Title != "Item a" {
		t.Fatalf("notes: %+v", notes)
	}
	// The note names who acted: the schedule's service actor and the user
	// who configured it.
	if notes[0].Actor == nil || *notes[0].Actor != scheduleActor || notes[0].RequestedBy != "alice" {
		t.Fatalf("author: %+v %q", notes[0].Actor, notes[0].RequestedBy)
	}
}

var scheduleActor = execution.Actor{Kind: "service", Sub: "schedule:sch_a", ConfiguredBy: "alice"}

func TestListNotesPages(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	for i := range 5 {
		key := string(rune('a' + i))
		if _, err := st.WriteNoteOnce(ctx, "t1", "r", "n", key, "h", key, json.RawMessage(`1`), execution.Actor{Kind: "user", Sub: "ada"}); err != nil {
			t.Fatal(err)
		}
	}
	var titles []string
	var before *store.NoteCursor
	for {
		page, err := st.ListNotes(ctx, "t1", 2, before)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, n := range page {
			titles = append(titles, n.Title)
		}
		c := page[len(page)-1].Cursor()
		before = &c
	}
	if len(titles) != 5 || titles[0] != "e" || titles[4] != "a" {
		t.Fatalf("titles %v", titles)
	}
}
