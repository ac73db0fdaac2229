package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.FixedZone("X", 3600))

func draft(key, typ string, data string) execution.EventDraft {
	d := execution.EventDraft{Key: key, Type: typ, At: t0, NodeID: "n", Attempt: 1}
	if data != "" {
		d.Data = json.RawMessage(data)
	}
	return d
}

func listAll(t *testing.T, st *store.Store, tenant, runID string) []store.Event {
	t.Helper()
	ev, err := st.ListEvents(context.Background(), tenant, runID, 0, 1000)
	require.NoError(t, err)
	return ev
}

func TestAppendEventsIsIdempotentByKey(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	batch := []execution.EventDraft{
		draft("k1", execution.EventRunStarted, `{"a":1}`),
		draft("k2", execution.EventNodeStarted, ""),
		draft("k2", execution.EventNodeStarted, `{"dup":true}`), // same key in one batch
	}
	for range 2 {
		require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, batch, nil))
	}
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("k2", execution.EventNodeStarted, ""), draft("k3", execution.EventNodeCompleted, ""),
	}, nil))
	ev := listAll(t, st, "t1", run.RunID)
	require.Len(t, ev, 3, "%d events, want 3", len(ev))
	for i, e := range ev {
		require.Equal(t, int64(i+1), e.Seq, "seq %d at %d", e.Seq, i)
	}
	require.Equal(t, "{}", string(ev[1].Data), "empty data stored as %s", ev[1].Data)
	require.True(t, ev[0].At.Equal(t0.Truncate(time.Microsecond)), "at = %v", ev[0].At)
	require.Same(t, time.UTC, ev[0].At.Location(), "at = %v", ev[0].At)
	require.Empty(t, ev[0].PrevHash, "chain not linked")
	require.Equal(t, ev[0].Hash, ev[1].PrevHash, "chain not linked")
	require.NoError(t, st.VerifyChain(ctx, "t1", run.RunID))
	// Other tenant sees nothing.
	_, err := st.ListEvents(ctx, "t2", run.RunID, 0, 10)
	require.ErrorIs(t, err, failure.ErrNotFound, "other tenant list: %v", err)
	err = st.AppendEvents(ctx, "t2", run.RunID, batch, nil)
	require.ErrorIs(t, err, failure.ErrNotFound, "other tenant append: %v", err)
	// Paging.
	page, err := st.ListEvents(ctx, "t1", run.RunID, 1, 1)
	require.NoError(t, err, "page %+v", page)
	require.Len(t, page, 1, "page %+v %v", page, err)
	require.Equal(t, int64(2), page[0].Seq, "page %+v %v", page, err)
}

// A worker of the previous release, still running during a rolling
// deploy, calls weft_append_events' first signature (00012: the data sent
// twice, inside the canonical head it hashes); it still works beside the
// second (00023) on one run, and the chain they write together verifies.
func TestAppendEventsFirstSignatureStillChains(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{draft("k1", execution.EventNodeStarted, `{"b":1,"a":[2]}`)}, nil))

	// The call as the previous release made it, the canonical form written
	// out by hand around the seq.
	at := t0.Add(time.Second).UTC().Truncate(time.Microsecond)
	data := `{"text":"é \n"}`
	head := fmt.Sprintf(`{"at":%q,"attempt":2,"data":%s,"nodeId":"n2","runId":%q,"schemaVersion":%d,"seq":`,
		at.Format("2006-01-02T15:04:05.000000Z07:00"), data, run.RunID, execution.EventSchemaVersion)
	tail := `,"type":"node.completed"}`
	var found, closed bool
	var status string
	var appended int
	err := st.Pool.QueryRow(ctx, `SELECT run_found, run_status, appended, was_terminal FROM weft_append_events($1, $2, $3, $4,
		$5::text[], $6::text[], $7::text[], $8::integer[], $9::timestamptz[], $10::text[]::jsonb[], $11::bytea[], $12::bytea[],
		$13::timestamptz, $14, $15, $16, $17::text::jsonb, $18::text::jsonb, $19::timestamptz)`,
		run.RunID, "t1", false, execution.EventSchemaVersion,
		[]string{"k2"}, []string{execution.EventNodeCompleted}, []string{"n2"}, []int32{2}, []time.Time{at}, []string{data},
		[][]byte{[]byte(head)}, [][]byte{[]byte(tail)}, nil, "", store.EventsChannel, "", nil, nil, nil).
		Scan(&found, &status, &appended, &closed)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, 1, appended)

	odd := draft("k3", execution.EventNodeAttemptLeaseLost, `{"z":null}`)
	odd.NodeID = "q\" \\ é \u2028 \x01 😀" // escaped in the canonical form the function hashes
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("k2", execution.EventNodeCompleted, `{"again":true}`), // the key the first signature appended
		odd,
	}, nil))
	ev := listAll(t, st, "t1", run.RunID)
	require.Len(t, ev, 3)
	for i, want := range []string{`{"a": [2], "b": 1}`, `{"text": "é \n"}`, `{"z": null}`} {
		require.Equal(t, int64(i+1), ev[i].Seq)
		require.JSONEq(t, want, string(ev[i].Data), "seq %d", i+1)
	}
	require.NoError(t, st.VerifyChain(ctx, "t1", run.RunID))
}

func TestAppendEventsConcurrentWritersKeepSeqGapless(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	const writers, each = 20, 3
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch []execution.EventDraft
			for i := range each {
				batch = append(batch, draft(fmt.Sprintf("w%d-%d", w, i), execution.EventToolCompleted, fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)))
			}
			// Every writer also re-sends writer 0's first key: it must land once.
			batch = append(batch, draft("w0-0", execution.EventToolCompleted, `{"w":0,"i":0}`))
			errs <- st.AppendEvents(ctx, "t1", run.RunID, batch, nil)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	ev := listAll(t, st, "t1", run.RunID)
	require.Len(t, ev, writers*each, "%d events, want %d", len(ev), writers*each)
	for i, e := range ev {
		require.Equal(t, int64(i+1), e.Seq, "seq %d at index %d", e.Seq, i)
	}
	require.NoError(t, st.VerifyChain(ctx, "t1", run.RunID))
}

func TestVerifyChainDetectsEditedEvent(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	var batch []execution.EventDraft
	for i := range 5 {
		batch = append(batch, draft(fmt.Sprint(i), execution.EventNodeCompleted, fmt.Sprintf(`{"i":%d,"x":1.50,"s":"é\u00e9"}`, i)))
	}
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, batch, nil))
	require.NoError(t, st.VerifyChain(ctx, "t1", run.RunID), "untouched chain")
	_, err := st.Pool.Exec(ctx, `UPDATE run_events SET data = '{"i":99}' WHERE run_id = $1 AND seq = 3`, run.RunID)
	require.NoError(t, err)
	err = st.VerifyChain(ctx, "t1", run.RunID)
	var ce *store.ChainError
	require.ErrorAs(t, err, &ce, "err = %v, want a ChainError at seq 3", err)
	require.Equal(t, int64(3), ce.Seq, "err = %v, want a ChainError at seq 3", err)
	require.Contains(t, err.Error(), "seq 3", "message does not name the seq: %v", err)
}

func TestVerifyChainDetectsDeletedEvent(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("a", "x.y", ""), draft("b", "x.y", ""), draft("c", "x.y", ""),
	}, nil))
	_, err := st.Pool.Exec(ctx, `DELETE FROM run_events WHERE run_id = $1 AND seq = 3`, run.RunID)
	require.NoError(t, err)
	var ce *store.ChainError
	err = st.VerifyChain(ctx, "t1", run.RunID)
	require.ErrorAs(t, err, &ce, "err = %v", err)
	require.Equal(t, int64(3), ce.Seq, "err = %v", err)
}

func TestAppendEventsRedactsNestedSecrets(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	data := `{"request":{"headers":{"Authorization":"Bearer abc","X-Api-Key":"k"},"items":[{"password":"p","ok":1},{"nested":{"accessToken":"t","Client_Secret":{"deep":1}}}]},
		"apiKey":"a","api_key":"b","privateKeyId":"keep","private_key":"pk","sessionCookie":"c","credentials":["x"],"reasoning":"hidden","keep":"visible","nul":"a\u0000b"}`
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{draft("a", "tool.completed", data)}, nil))
	ev := listAll(t, st, "t1", run.RunID)
	var got map[string]any
	require.NoError(t, json.Unmarshal(ev[0].Data, &got))
	req := got["request"].(map[string]any)
	h := req["headers"].(map[string]any)
	items := req["items"].([]any)
	nested := items[1].(map[string]any)["nested"].(map[string]any)
	checks := map[string]any{
		"Authorization": h["Authorization"], "X-Api-Key": h["X-Api-Key"],
		"password": items[0].(map[string]any)["password"], "accessToken": nested["accessToken"],
		"Client_Secret": nested["Client_Secret"], "apiKey": got["apiKey"], "api_key": got["api_key"],
		"private_key": got["private_key"], "sessionCookie": got["sessionCookie"], "credentials": got["credentials"],
		"reasoning": got["reasoning"],
	}
	for k, v := range checks {
		assert.True(t, v == store.Redacted, "%s = %v, want redacted", k, v)
	}
	assert.False(t, got["keep"] != "visible" || got["privateKeyId"] != "keep" || items[0].(map[string]any)["ok"] != 1.0, "non-sensitive values changed: %v", got)
	assert.True(t, got["nul"] == "a\uFFFDb", "NUL not replaced: %q", got["nul"])
	require.NoError(t, st.VerifyChain(ctx, "t1", run.RunID))
}

func TestAppendEventsBoundsDataTo8KiB(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	bigText, _ := json.Marshal(map[string]string{"text": strings.Repeat("ab\"", 5000)})
	big := string(bigText) // escaping inflates the preview
	small := `{"text":"` + strings.Repeat("a", 100) + `"}`
	require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("big", "tool.completed", big), draft("small", "tool.completed", small),
	}, nil))
	ev := listAll(t, st, "t1", run.RunID)
	var env struct {
		Truncated bool   `json:"truncated"`
		Size      int    `json:"size"`
		Preview   string `json:"preview"`
	}
	require.NoError(t, json.Unmarshal(ev[0].Data, &env))
	require.True(t, env.Truncated, "envelope: truncated=%v size=%d preview=%.40q", env.Truncated, env.Size, env.Preview)
	require.Greater(t, env.Size, store.MaxEventDataBytes, "envelope: truncated=%v size=%d preview=%.40q", env.Truncated, env.Size, env.Preview)
	require.True(t, strings.HasPrefix(env.Preview, `{"text":"ab\"ab`), "envelope: truncated=%v size=%d preview=%.40q", env.Truncated, env.Size, env.Preview)
	c, _ := store.EvidenceData(ev[0].Data)
	require.LessOrEqual(t, len(c), store.MaxEventDataBytes, "envelope is %d bytes with a %d-byte preview", len(c), len(env.Preview))
	require.GreaterOrEqual(t, len(env.Preview), 3<<10, "envelope is %d bytes with a %d-byte preview", len(c), len(env.Preview))
	require.NotContains(t, string(ev[1].Data), "truncated", "small data truncated")
	require.NoError(t, st.VerifyChain(ctx, "t1", run.RunID))
}

func TestAppendEventsRefusesMalformedDrafts(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	bad := []execution.EventDraft{
		{Key: "", Type: "a.b", At: t0},
		{Key: "k", Type: "Bad Type", At: t0},
		{Key: "k", Type: "a.b"},
		{Key: "k", Type: "a.b", At: t0, Data: json.RawMessage(`{"a":`)},
	}
	for i, d := range bad {
		// A valid event first: nothing of the batch may be appended.
		err := st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{draft("ok", "a.b", ""), d}, nil)
		assert.Equal(t, failure.CodeInvalidRequest, failure.CodeOf(err), "draft %d: err = %v", i, err)
	}
	ev := listAll(t, st, "t1", run.RunID)
	require.Empty(t, ev, "%d events appended from refused batches", len(ev))
	err := st.AppendEvents(ctx, "t1", run.RunID, nil, &execution.RunUpdate{Status: "paused"})
	require.Equal(t, failure.CodeInvalidRequest, failure.CodeOf(err), "unknown status: %v", err)
}

func TestRunUpdateOnlyMovesForward(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	get := func() store.Run {
		r, err := st.GetRun(ctx, "t1", run.RunID)
		require.NoError(t, err)
		return r
	}
	up := func(key string, u execution.RunUpdate) {
		t.Helper()
		require.NoError(t, st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{draft(key, "run.x", "")}, &u))
	}
	up("1", execution.RunUpdate{Status: execution.StatusRunning})
	r := get()
	require.Equal(t, execution.StatusRunning, r.Status, "after running: %s %v", r.Status, r.StartedAt)
	require.NotNil(t, r.StartedAt, "after running: %s %v", r.Status, r.StartedAt)
	require.True(t, r.StartedAt.Equal(t0.Truncate(time.Microsecond)), "after running: %s %v", r.Status, r.StartedAt)
	up("2", execution.RunUpdate{Status: execution.StatusQueued})
	require.Equal(t, execution.StatusRunning, get().Status, "moved back to queued")
	up("3", execution.RunUpdate{Status: execution.StatusSucceeded, Output: &execution.Value{Inline: json.RawMessage(`{"ok":true}`)}})
	r = get()
	require.Equal(t, execution.StatusSucceeded, r.Status, "after success: %s %v %s %s", r.Status, r.FinishedAt, r.Output, r.Error)
	require.NotNil(t, r.FinishedAt, "after success: %s %v %s %s", r.Status, r.FinishedAt, r.Output, r.Error)
	require.Equal(t, `{"ok": true}`, string(r.Output), "after success: %s %v %s %s", r.Status, r.FinishedAt, r.Output, r.Error)
	require.Nil(t, r.Error, "after success: %s %v %s %s", r.Status, r.FinishedAt, r.Output, r.Error)
	up("4", execution.RunUpdate{Status: execution.StatusFailed, Error: &execution.RunError{Code: "X", Message: "m"}})
	up("5", execution.RunUpdate{Status: execution.StatusRunning})
	r = get()
	require.Equal(t, execution.StatusSucceeded, r.Status, "terminal status changed: %s %s", r.Status, r.Error)
	require.Nil(t, r.Error, "terminal status changed: %s %s", r.Status, r.Error)
	require.Equal(t, `{"ok": true}`, string(r.Output), "terminal status changed: %s %s", r.Status, r.Error)
}

func TestRunUpdateFailsFromQueuedAndResolvesRefOutput(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	failed := createRun(t, st, "t1")
	require.NoError(t, st.AppendEvents(ctx, "t1", failed.RunID, nil, &execution.RunUpdate{
		Status: execution.StatusFailed, Error: &execution.RunError{Code: "NODE_FAILED", Message: "boom", NodeID: "n"}}))
	r, _ := st.GetRun(ctx, "t1", failed.RunID)
	var re execution.RunError
	require.NoError(t, json.Unmarshal(r.Error, &re), "failed run: %+v %s", r, r.Error)
	require.Equal(t, "NODE_FAILED", re.Code, "failed run: %+v %s", r, r.Error)
	require.Equal(t, "n", re.NodeID, "failed run: %+v %s", r, r.Error)
	require.NotNil(t, r.FinishedAt, "failed run: %+v %s", r, r.Error)
	require.Nil(t, r.StartedAt, "failed run: %+v %s", r, r.Error)

	ok := createRun(t, st, "t1")
	ref, err := st.PutValue(ctx, "t1", ok.RunID, "out", "in", json.RawMessage(`{"big":[1,2,3]}`))
	require.NoError(t, err)
	require.NoError(t, st.AppendEvents(ctx, "t1", ok.RunID, nil, &execution.RunUpdate{
		Status: execution.StatusSucceeded, Output: &execution.Value{Ref: &ref}}))
	r, _ = st.GetRun(ctx, "t1", ok.RunID)
	require.Equal(t, `{"big": [1, 2, 3]}`, string(r.Output), "output %s", r.Output)
	_, err = st.GetValue(ctx, "t2", ok.RunID, ref)
	require.ErrorIs(t, err, failure.ErrNotFound, "value of another tenant: %v", err)
}

func TestDeleteEventsOfRunsClosedBefore(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	closed := createRun(t, st, "t1")
	open := createRun(t, st, "t1")
	for _, r := range []store.Run{closed, open} {
		require.NoError(t, st.AppendEvents(ctx, "t1", r.RunID, []execution.EventDraft{draft("a", "run.started", ""), draft("b", "x.y", "")}, nil))
	}
	require.NoError(t, st.AppendEvents(ctx, "t1", closed.RunID, nil, &execution.RunUpdate{Status: execution.StatusSucceeded}))
	n, err := st.DeleteEventsOfRunsClosedBefore(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err, "deleted %d, err", n)
	require.Equal(t, int64(2), n, "deleted %d, err %v", n, err)
	require.Empty(t, listAll(t, st, "t1", closed.RunID), "closed run keeps events")
	require.Len(t, listAll(t, st, "t1", open.RunID), 2, "open run lost events")
	err = st.VerifyChain(ctx, "t1", closed.RunID)
	require.ErrorIs(t, err, store.ErrEventsDeleted, "verify deleted: %v", err)
	n, err = st.DeleteEventsOfRunsClosedBefore(ctx, time.Now().Add(time.Hour))
	require.NoError(t, err, "second pass: %d", n)
	require.Equal(t, int64(0), n, "second pass: %d %v", n, err)
}
