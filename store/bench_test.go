package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
)

// BenchmarkAppendEvents2 is the interpreter's flush for one node of a chain:
// two events (the node's end, the next node's start) appended to one run in
// one transaction, hash-chained under the run row lock.
func BenchmarkAppendEvents2(b *testing.B) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	run := newRunTB(b, st, "bench")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		evs := []execution.EventDraft{
			draft(fmt.Sprintf("%d/a", i), "node.succeeded", `{"port":"out"}`),
			draft(fmt.Sprintf("%d/b", i), "node.started", `{}`),
		}
		if err := st.AppendEvents(ctx, "bench", run, evs, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommitBaseline is the floor under any durable write on this
// machine: one single-row INSERT committed in its own transaction.
func BenchmarkCommitBaseline(b *testing.B) {
	st := testinfra.NewStore(b)
	ctx := context.Background()
	if _, err := st.Pool.Exec(ctx, `CREATE TABLE bench_rows (k bigint PRIMARY KEY, v text)`); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := st.Pool.Exec(ctx, `INSERT INTO bench_rows VALUES ($1, 'x')`, i); err != nil {
			b.Fatal(err)
		}
	}
}
