package store

import (
	"context"
	"time"

	"github.com/weftworks/weft/execution"
)

// ChainDrafts is chainDrafts for the benchmarks of package store_test.
var ChainDrafts = chainDrafts

// AppendAnswer makes the weft_append_events call AppendEvents makes (or
// the reconciler's, with onlyIfActive) and returns the function's answer.
// With repeatFirst the call also carries the batch's first key again, at
// its end and with other data, as a caller that does not drop repeated
// keys itself (prepareEvents does) would send it.
func AppendAnswer(ctx context.Context, s *Store, tenantID, runID string, events []execution.EventDraft, upd *execution.RunUpdate,
	onlyIfActive, repeatFirst bool) (found bool, status string, appended int, closed bool, err error) {
	call, err := s.prepareAppend(ctx, AppendRequest{TenantID: tenantID, RunID: runID, Events: events, Update: upd}, onlyIfActive)
	if err != nil {
		return false, "", 0, false, err
	}
	args := call.args()
	if repeatFirst && len(call.events) > 0 {
		for k := 4; k <= 11; k++ {
			switch a := args[k].(type) {
			case []string:
				args[k] = append(a, a[0])
			case []int32:
				args[k] = append(a, a[0])
			case []time.Time:
				args[k] = append(a, a[0])
			case [][]byte:
				if k == 9 { // data
					args[k] = append(a, []byte(`{"repeated":true}`))
				} else {
					args[k] = append(a, a[0])
				}
			}
		}
	}
	// A database migrated before 00026 has only the second signature:
	// call it with its twenty arguments, as the previous releases did.
	var third bool
	if err := s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_proc WHERE proname = 'weft_append_events' AND pronargs = 22)`).Scan(&third); err != nil {
		return false, "", 0, false, err
	}
	if !third {
		err = s.Pool.QueryRow(ctx, appendEventsSQL00023, args[:20]...).Scan(&found, &status, &appended, &closed)
		return found, status, appended, closed, err
	}
	err = s.Pool.QueryRow(ctx, appendEventsSQL, args...).Scan(&found, &status, &appended, &closed, new(bool))
	return found, status, appended, closed, err
}

// appendEventsSQL00023 is the call of weft_append_events' second
// signature (migration 00023), as releases before 00026 made it.
const appendEventsSQL00023 = `SELECT run_found, run_status, appended, was_terminal FROM weft_append_events($1, $2, $3, $4,
	$5::text[], $6::text[], $7::text[], $8::integer[], $9::timestamptz[], $10::bytea[], $11::bytea[], $12::bytea[],
	$13::bytea, $14::timestamptz, $15, $16, $17, $18::text::jsonb, $19::text::jsonb, $20::timestamptz)`

// AppendEventsSQL is the statement every append prepares on its connection.
const AppendEventsSQL = appendEventsSQL

// PurgeLapsedWatches is purgeLapsedWatches for package store_test.
func PurgeLapsedWatches(ctx context.Context, s *Store) error { return s.purgeLapsedWatches(ctx) }

// Watching reports whether runID's watch is committed, i.e. whether every
// append to the run from now on notifies this feed.
func (f *EventFeed) Watching(runID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watched[runID]
}

// EnqueueCheckedCall makes the weft_enqueue_run_checked call
// EnqueueRunExpecting makes, in q, with p_exclusive as given (true: the
// capped path's call inside its transaction), and returns the function's
// answer without the admission pass.
func EnqueueCheckedCall(ctx context.Context, q querier, r Run, idempotencyKey string, exp *EnqueueExpect, exclusive bool) (Enqueued, error) {
	args, err := enqueueArgs(r, idempotencyKey)
	if err != nil {
		return Enqueued{}, err
	}
	return enqueueCall{args: args, expect: expectArgs(exp)}.run(ctx, q, exclusive)
}
