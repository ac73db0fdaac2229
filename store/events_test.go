package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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
	if err != nil {
		t.Fatal(err)
	}
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
		if err := st.AppendEvents(ctx, "t1", run.RunID, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("k2", execution.EventNodeStarted, ""), draft("k3", execution.EventNodeCompleted, ""),
	}, nil); err != nil {
		t.Fatal(err)
	}
	ev := listAll(t, st, "t1", run.RunID)
	if len(ev) != 3 {
		t.Fatalf("%d events, want 3", len(ev))
	}
	for i, e := range ev {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at %d", e.Seq, i)
		}
	}
	if string(ev[1].Data) != "{}" {
		t.Fatalf("empty data stored as %s", ev[1].Data)
	}
	if !ev[0].At.Equal(t0.Truncate(time.Microsecond)) || ev[0].At.Location() != time.UTC {
		t.Fatalf("at = %v", ev[0].At)
	}
	if ev[0].PrevHash != "" || ev[1].PrevHash != ev[0].Hash {
		t.Fatal("chain not linked")
	}
	if err := st.VerifyChain(ctx, "t1", run.RunID); err != nil {
		t.Fatal(err)
	}
	// Other tenant sees nothing.
	if _, err := st.ListEvents(ctx, "t2", run.RunID, 0, 10); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("other tenant list: %v", err)
	}
	if err := st.AppendEvents(ctx, "t2", run.RunID, batch, nil); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("other tenant append: %v", err)
	}
	// Paging.
	page, err := st.ListEvents(ctx, "t1", run.RunID, 1, 1)
	if err != nil || len(page) != 1 || page[0].Seq != 2 {
		t.Fatalf("page %+v %v", page, err)
	}
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
		if err != nil {
			t.Fatal(err)
		}
	}
	ev := listAll(t, st, "t1", run.RunID)
	if len(ev) != writers*each {
		t.Fatalf("%d events, want %d", len(ev), writers*each)
	}
	for i, e := range ev {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq %d at index %d", e.Seq, i)
		}
	}
	if err := st.VerifyChain(ctx, "t1", run.RunID); err != nil {
		t.Fatal(err)
	}
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
	if err := st.AppendEvents(ctx, "t1", run.RunID, batch, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.VerifyChain(ctx, "t1", run.RunID); err != nil {
		t.Fatalf("untouched chain: %v", err)
	}
	if _, err := st.Pool.Exec(ctx, `UPDATE run_events SET data = '{"i":99}' WHERE run_id = $1 AND seq = 3`, run.RunID); err != nil {
		t.Fatal(err)
	}
	err := st.VerifyChain(ctx, "t1", run.RunID)
	var ce *store.ChainError
	if !errors.As(err, &ce) || ce.Seq != 3 {
		t.Fatalf("err = %v, want a ChainError at seq 3", err)
	}
	if !strings.Contains(err.Error(), "seq 3") {
		t.Fatalf("message does not name the seq: %v", err)
	}
}

func TestVerifyChainDetectsDeletedEvent(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	if err := st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("a", "x.y", ""), draft("b", "x.y", ""), draft("c", "x.y", ""),
	}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `DELETE FROM run_events WHERE run_id = $1 AND seq = 3`, run.RunID); err != nil {
		t.Fatal(err)
	}
	var ce *store.ChainError
	if err := st.VerifyChain(ctx, "t1", run.RunID); !errors.As(err, &ce) || ce.Seq != 3 {
		t.Fatalf("err = %v", err)
	}
}

func TestAppendEventsRedactsNestedSecrets(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	data := `{"request":{"headers":{"Authorization":"Bearer abc","X-Api-Key":"k"},"items":[{"password":"p","ok":1},{"nested":{"accessToken":"t","Client_Secret":{"deep":1}}}]},
		"apiKey":"a","api_key":"b","privateKeyId":"keep","private_key":"pk","sessionCookie":"c","credentials":["x"],"reasoning":"hidden","keep":"visible","nul":"a\u0000b"}`
	if err := st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{draft("a", "tool.completed", data)}, nil); err != nil {
		t.Fatal(err)
	}
	ev := listAll(t, st, "t1", run.RunID)
	var got map[string]any
	if err := json.Unmarshal(ev[0].Data, &got); err != nil {
		t.Fatal(err)
	}
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
		if v != store.Redacted {
			t.Errorf("%s = %v, want redacted", k, v)
		}
	}
	if got["keep"] != "visible" || got["privateKeyId"] != "keep" || items[0].(map[string]any)["ok"] != 1.0 {
		t.Errorf("non-sensitive values changed: %v", got)
	}
	if got["nul"] != "a\uFFFDb" {
		t.Errorf("NUL not replaced: %q", got["nul"])
	}
	if err := st.VerifyChain(ctx, "t1", run.RunID); err != nil {
		t.Fatal(err)
	}
}

func TestAppendEventsBoundsDataTo8KiB(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	bigText, _ := json.Marshal(map[string]string{"text": strings.Repeat("ab\"", 5000)})
	big := string(bigText) // escaping inflates the preview
	small := `{"text":"` + strings.Repeat("a", 100) + `"}`
	if err := st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{
		draft("big", "tool.completed", big), draft("small", "tool.completed", small),
	}, nil); err != nil {
		t.Fatal(err)
	}
	ev := listAll(t, st, "t1", run.RunID)
	var env struct {
		Truncated bool   `json:"truncated"`
		Size      int    `json:"size"`
		Preview   string `json:"preview"`
	}
	if err := json.Unmarshal(ev[0].Data, &env); err != nil {
		t.Fatal(err)
	}
	if !env.Truncated || env.Size <= store.MaxEventDataBytes || !strings.HasPrefix(env.Preview, `{"text":"ab\"ab`) {
		t.Fatalf("envelope: truncated=%v size=%d preview=%.40q", env.Truncated, env.Size, env.Preview)
	}
	c, _ := store.EvidenceData(ev[0].Data)
	if len(c) > store.MaxEventDataBytes || len(env.Preview) < 3<<10 {
		t.Fatalf("envelope is %d bytes with a %d-byte preview", len(c), len(env.Preview))
	}
	if strings.Contains(string(ev[1].Data), "truncated") {
		t.Fatal("small data truncated")
	}
	if err := st.VerifyChain(ctx, "t1", run.RunID); err != nil {
		t.Fatal(err)
	}
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
		if failure.CodeOf(err) != failure.CodeInvalidRequest {
			t.Errorf("draft %d: err = %v", i, err)
		}
	}
	if ev := listAll(t, st, "t1", run.RunID); len(ev) != 0 {
		t.Fatalf("%d events appended from refused batches", len(ev))
	}
	if err := st.AppendEvents(ctx, "t1", run.RunID, nil, &execution.RunUpdate{Status: "paused"}); failure.CodeOf(err) != failure.CodeInvalidRequest {
		t.Fatalf("unknown status: %v", err)
	}
}

func TestRunUpdateOnlyMovesForward(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	run := createRun(t, st, "t1")
	get := func() store.Run {
		r, err := st.GetRun(ctx, "t1", run.RunID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	up := func(key string, u execution.RunUpdate) {
		t.Helper()
		if err := st.AppendEvents(ctx, "t1", run.RunID, []execution.EventDraft{draft(key, "run.x", "")}, &u); err != nil {
			t.Fatal(err)
		}
	}
	up("1", execution.RunUpdate{Status: execution.StatusRunning})
	r := get()
	if r.Status != execution.StatusRunning || r.StartedAt == nil || !r.StartedAt.Equal(t0.Truncate(time.Microsecond)) {
		t.Fatalf("after running: %s %v", r.Status, r.StartedAt)
	}
	up("2", execution.RunUpdate{Status: execution.StatusQueued})
	if get().Status != execution.StatusRunning {
		t.Fatal("moved back to queued")
	}
	up("3", execution.RunUpdate{Status: execution.StatusSucceeded, Output: &execution.Value{Inline: json.RawMessage(`{"ok":true}`)}})
	r = get()
	if r.Status != execution.StatusSucceeded || r.FinishedAt == nil || string(r.Output) != `{"ok": true}` || r.Error != nil {
		t.Fatalf("after success: %s %v %s %s", r.Status, r.FinishedAt, r.Output, r.Error)
	}
	up("4", execution.RunUpdate{Status: execution.StatusFailed, Error: &execution.RunError{Code: "X", Message: "m"}})
	up("5", execution.RunUpdate{Status: execution.StatusRunning})
	r = get()
	if r.Status != execution.StatusSucceeded || r.Error != nil || string(r.Output) != `{"ok": true}` {
		t.Fatalf("terminal status changed: %s %s", r.Status, r.Error)
	}
}

func TestRunUpdateFailsFromQueuedAndResolvesRefOutput(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	failed := createRun(t, st, "t1")
	if err := st.AppendEvents(ctx, "t1", failed.RunID, nil, &execution.RunUpdate{
		Status: execution.StatusFailed, Error: &execution.RunError{Code: "NODE_FAILED", Message: "boom", NodeID: "n"}}); err != nil {
		t.Fatal(err)
	}
	r, _ := st.GetRun(ctx, "t1", failed.RunID)
	var re execution.RunError
	if err := json.Unmarshal(r.Error, &re); err != nil || re.Code != "NODE_FAILED" || re.NodeID != "n" || r.FinishedAt == nil || r.StartedAt != nil {
		t.Fatalf("failed run: %+v %s", r, r.Error)
	}

	ok := createRun(t, st, "t1")
	ref, err := st.PutValue(ctx, "t1", ok.RunID, "out", "in", json.RawMessage(`{"big":[1,2,3]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AppendEvents(ctx, "t1", ok.RunID, nil, &execution.RunUpdate{
		Status: execution.StatusSucceeded, Output: &execution.Value{Ref: &ref}}); err != nil {
		t.Fatal(err)
	}
	r, _ = st.GetRun(ctx, "t1", ok.RunID)
	if string(r.Output) != `{"big": [1, 2, 3]}` {
		t.Fatalf("output %s", r.Output)
	}
	if _, err := st.GetValue(ctx, "t2", ok.RunID, ref); !errors.Is(err, failure.ErrNotFound) {
		t.Fatalf("value of another tenant: %v", err)
	}
}

func TestDeleteEventsOfRunsClosedBefore(t *testing.T) {
	t.Parallel()
	st := testinfra.NewStore(t)
	ctx := context.Background()
	closed := createRun(t, st, "t1")
	open := createRun(t, st, "t1")
	for _, r := range []store.Run{closed, open} {
		if err := st.AppendEvents(ctx, "t1", r.RunID, []execution.EventDraft{draft("a", "run.started", ""), draft("b", "x.y", "")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AppendEvents(ctx, "t1", closed.RunID, nil, &execution.RunUpdate{Status: execution.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	n, err := st.DeleteEventsOfRunsClosedBefore(ctx, time.Now().Add(time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, err %v", n, err)
	}
	if ev := listAll(t, st, "t1", closed.RunID); len(ev) != 0 {
		t.Fatal("closed run keeps events")
	}
	if ev := listAll(t, st, "t1", open.RunID); len(ev) != 2 {
		t.Fatal("open run lost events")
	}
	if err := st.VerifyChain(ctx, "t1", closed.RunID); !errors.Is(err, store.ErrEventsDeleted) {
		t.Fatalf("verify deleted: %v", err)
	}
	if n, err := st.DeleteEventsOfRunsClosedBefore(ctx, time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("second pass: %d %v", n, err)
	}
}
