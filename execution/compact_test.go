package execution

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/failure"
)

const compactRunID = "6c4c201f-c507-43b7-a4f2-9f00de65ffb7"

// randomBatch is a batch as the interpreter's identity keys (version 4 on)
// make them: run-level events (node "-"), node events, the discriminated
// ones (edges, re-dispatches, approval requests, executions), times with
// nanoseconds, not always in order (workflow time comes from the server).
func randomBatch(r *rand.Rand, n int) EventBatch {
	b := EventBatch{Through: n + r.IntN(50)}
	if r.IntN(2) == 0 {
		b.Run = &RunUpdate{Status: StatusRunning, TemporalRunID: "01a235c6-89b9-7681-ad5a-320b93f38a59"}
	}
	at := time.Date(2026, 12, 2, 8, 2, 13, 628871123, time.UTC)
	for range n {
		node, attempt := fmt.Sprintf("n%d", r.IntN(5)), 1+r.IntN(3)
		var typ, disc string
		switch r.IntN(8) {
		case 0:
			node, attempt, typ = "", 0, []string{EventRunStarted, EventRunCancelRequested, EventRunSucceeded}[r.IntN(3)]
		case 1:
			node, attempt, typ, disc = "", 0, EventRunContinued, fmt.Sprintf("g%d", r.IntN(3))
		case 2:
			typ, disc = EventEdgeTaken, fmt.Sprintf("%s.out>n%d.in", node, r.IntN(5))
		case 3:
			typ, disc = EventNodeAttemptLeaseLost, fmt.Sprintf("r%d", r.IntN(4))
		case 4:
			typ, disc = EventNodeApprovalRequested, fmt.Sprintf("q%d", r.IntN(4))
		default:
			typ = []string{EventNodeStarted, EventNodeCompleted, EventNodeAttemptFailed, EventNodeSkipped}[r.IntN(4)]
		}
		keyNode := node
		if keyNode == "" {
			keyNode = "-"
		}
		key := fmt.Sprintf("%s/%s/%d/%s", compactRunID, keyNode, attempt, typ)
		if disc != "" {
			key += "/" + disc
		}
		at = at.Add(time.Duration(r.IntN(40_000_000)-5_000_000) * time.Nanosecond) // -5 .. +35 ms
		e := EventDraft{Key: key, Type: typ, NodeID: node, Attempt: attempt, At: at}
		if r.IntN(4) > 0 {
			e.Data = json.RawMessage(fmt.Sprintf(`{"port":"out","output":{"n":%d}}`, r.IntN(1000)))
		}
		if r.IntN(3) == 0 { // another zone: the store keeps UTC
			e.At = e.At.In(time.FixedZone("X", -3600))
		}
		b.Events = append(b.Events, e)
	}
	return b
}

// asStored is the batch as the store keeps its events: times in UTC,
// truncated to microseconds.
func asStored(b EventBatch) EventBatch {
	b.Events = append([]EventDraft(nil), b.Events...)
	for k := range b.Events {
		b.Events[k].At = storedTime(b.Events[k].At)
	}
	if len(b.Events) == 0 {
		b.Events = nil
	}
	return b
}

// viaJSON is what an activity decodes from v, as Temporal's JSON payload.
func viaJSON[T any](t *testing.T, v T) (T, int) {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var back T
	require.NoError(t, json.Unmarshal(raw, &back))
	return back, len(raw)
}

// The compact form, through JSON and expanded, is the plain form through
// JSON as the store keeps it: the same keys, types, nodes, attempts, data,
// run update and Through, each time equal to the plain time in UTC
// truncated to microseconds. Over random batches, and smaller every time.
func TestCompactBatchRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 6))
	for i := range 500 {
		b := randomBatch(r, r.IntN(20))
		c, ok := CompactBatchOf(compactRunID, b.Events, b.Run, b.Through)
		require.True(t, ok, "batch %d", i)
		back, compactBytes := viaJSON(t, *c)
		got, err := back.Expand(compactRunID)
		require.NoError(t, err, "batch %d", i)
		plain, plainBytes := viaJSON(t, b)
		require.Equal(t, asStored(plain), *got, "batch %d", i)
		if len(b.Events) > 0 {
			assert.Less(t, compactBytes, plainBytes, "batch %d", i)
			for _, e := range c.Events {
				assert.GreaterOrEqual(t, e.AtMicros, int64(0))
			}
		}
	}
}

// Inside a NodeInput, the way an attempt of version 6 carries them; a
// decoder of the release before (which knows only "events") finds no
// events, so it can neither append nor confirm any.
func TestNodeInputCarriesTheCompactForm(t *testing.T) {
	b := chainBatch(14)
	for k := range b.Events {
		b.Events[k].Key = strings.Replace(b.Events[k].Key, "6c4c201f-c507-43b7-a4f2-9f00de65ffb7", compactRunID, 1)
	}
	c, ok := CompactBatchOf(compactRunID, b.Events, b.Run, b.Through)
	require.True(t, ok)
	in := NodeInput{RunID: compactRunID, NodeID: "e5", Attempt: 1, Carried: c}
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), `"events":{`)
	assert.NotContains(t, string(raw), compactRunID+"/", "keys are relative to the run")

	var back NodeInput
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Equal(t, 14, cap(back.Carried.Events), "the slice is sized once")
	got, err := back.CarriedEvents()
	require.NoError(t, err)
	require.Equal(t, asStored(b), *got)

	var previousRelease struct {
		Events *EventBatch `json:"events,omitempty"`
	}
	require.NoError(t, json.Unmarshal(raw, &previousRelease))
	assert.Nil(t, previousRelease.Events)

	plain := NodeInput{RunID: compactRunID, Events: &b}
	got, err = plain.CarriedEvents()
	require.NoError(t, err)
	assert.Same(t, &b, got, "the plain form as it came")
	got, err = (&NodeInput{RunID: compactRunID}).CarriedEvents()
	require.NoError(t, err)
	assert.Nil(t, got)
	both := NodeInput{RunID: compactRunID, Events: &b, Carried: c}
	_, err = both.CarriedEvents()
	assert.Equal(t, CodeCarriedInvalid, failure.CodeOf(err))
}

// What the compact form cannot hold exactly stays plain.
func TestCompactBatchOfFallsBackToPlain(t *testing.T) {
	at := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	good := EventDraft{Key: compactRunID + "/a/1/node.started", Type: EventNodeStarted, NodeID: "a", Attempt: 1, At: at}
	_, ok := CompactBatchOf(compactRunID, []EventDraft{good}, nil, 1)
	require.True(t, ok)
	for name, mutate := range map[string]func(*EventDraft){
		"another run":       func(e *EventDraft) { e.Key = "other-run/a/1/node.started" },
		"run id prefix":     func(e *EventDraft) { e.Key = compactRunID + "x/a/1/node.started" },
		"no relative key":   func(e *EventDraft) { e.Key = compactRunID + "/" },
		"type differs":      func(e *EventDraft) { e.Type = EventNodeCompleted },
		"node differs":      func(e *EventDraft) { e.NodeID = "b" },
		"attempt differs":   func(e *EventDraft) { e.Attempt = 2 },
		"run-level node":    func(e *EventDraft) { e.Key = compactRunID + "/-/1/node.started" },
		"attempt not canon": func(e *EventDraft) { e.Key = compactRunID + "/a/01/node.started" },
		"short key":         func(e *EventDraft) { e.Key = compactRunID + "/a/1" },
		"zero time":         func(e *EventDraft) { e.At = time.Time{} },
		"centuries apart":   func(e *EventDraft) { e.At = at.AddDate(300, 0, 0) },
	} {
		bad := good
		bad.Key = compactRunID + "/a/1/node.started" // the second event's own key
		bad.Type, bad.NodeID = EventNodeStarted, "a"
		mutate(&bad)
		_, ok := CompactBatchOf(compactRunID, []EventDraft{good, bad}, nil, 2)
		assert.False(t, ok, name)
	}
}

// Expand refuses what CompactBatchOf never writes, with one stable code
// and a message naming the fault.
func TestCompactBatchExpandRefuses(t *testing.T) {
	for _, c := range []struct{ doc, runID, want string }{
		{`{"events":[{"k":"a/1/node.started"}],"through":1}`, compactRunID, "no base time"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":"a/1/node.started"}],"through":1}`, "", "run id"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":"a/1"}],"through":1}`, compactRunID, "is not node/attempt/type"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":""}],"through":1}`, compactRunID, "is not node/attempt/type"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":"/1/node.started"}],"through":1}`, compactRunID, "is not node/attempt/type"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":"a/1//x"}],"through":1}`, compactRunID, "is not node/attempt/type"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":"a/-1/node.started"}],"through":1}`, compactRunID, "not a decimal attempt"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":"a/01/node.started"}],"through":1}`, compactRunID, "not a decimal attempt"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":"a/1234567890/node.started"}],"through":1}`, compactRunID, "not a decimal attempt"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":"a/x/node.started"}],"through":1}`, compactRunID, "not a decimal attempt"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":"a/1/node.started","t":-1}],"through":1}`, compactRunID, "offset -1 µs is out of range"},
		{`{"base":"2026-12-02T08:00:00Z","events":[{"k":"a/1/node.started","t":9223372036854776}],"through":1}`, compactRunID, "out of range"},
		{`{"base":"2026-12-02T08:02:13.9666666Z","events":[{"k":"-/0/d"}],"through":1}`, compactRunID, "finer than a microsecond"},
	} {
		var b CompactBatch
		require.NoError(t, json.Unmarshal([]byte(c.doc), &b), c.doc)
		got, err := b.Expand(c.runID)
		require.Error(t, err, c.doc)
		assert.Nil(t, got, c.doc)
		assert.Equal(t, CodeCarriedInvalid, failure.CodeOf(err), c.doc)
		assert.Contains(t, err.Error(), c.want, c.doc)
	}
	// The largest offset a Duration holds is accepted.
	var b CompactBatch
	require.NoError(t, json.Unmarshal([]byte(`{"base":"2026-12-02T08:00:00Z","events":[{"k":"a/1/node.started","t":9223372036854775}],"through":1}`), &b))
	_, err := b.Expand(compactRunID)
	require.NoError(t, err)
	// A batch without events needs no base: only the run update rides.
	require.NoError(t, json.Unmarshal([]byte(`{"run":{"status":"running"},"through":4}`), &b))
	got, err := b.Expand(compactRunID)
	require.NoError(t, err)
	assert.Equal(t, EventBatch{Run: &RunUpdate{Status: StatusRunning}, Through: 4}, *got)
}

// Whatever Expand accepts, its events compact again to the same batch: the
// decoder and the encoder agree on what a key names.
func FuzzCompactBatchExpand(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b := randomBatch(r, 1+r.IntN(6))
		c, _ := CompactBatchOf(compactRunID, b.Events, b.Run, b.Through)
		raw, _ := json.Marshal(c)
		f.Add(raw)
	}
	f.Add([]byte(`{"base":"2026-12-02T08:00:00Z","events":[{"k":"-/0/run.started/x/y"}],"through":1}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var c CompactBatch
		if json.Unmarshal(raw, &c) != nil {
			return
		}
		b, err := c.Expand(compactRunID)
		if err != nil {
			require.Equal(t, CodeCarriedInvalid, failure.CodeOf(err))
			return
		}
		again, ok := CompactBatchOf(compactRunID, b.Events, b.Run, b.Through)
		require.True(t, ok, "%s", raw)
		b2, err := again.Expand(compactRunID)
		require.NoError(t, err)
		require.Equal(t, b, b2)
	})
}

// The carried batch's bytes and decoding in both forms (14 events of a
// chain10 run), the compact one expanded as the activity expands it.
//
//	go test ./execution -run '^$' -bench CarriedForms -benchmem
func BenchmarkCarriedForms(b *testing.B) {
	plain := chainBatch(14)
	plainRaw, err := json.Marshal(plain)
	require.NoError(b, err)
	c, ok := CompactBatchOf("6c4c201f-c507-43b7-a4f2-9f00de65ffb7", plain.Events, plain.Run, plain.Through)
	require.True(b, ok)
	compactRaw, err := json.Marshal(c)
	require.NoError(b, err)
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p EventBatch
			if err := json.Unmarshal(plainRaw, &p); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(plainRaw)), "wire-B")
	})
	b.Run("compact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p CompactBatch
			if err := json.Unmarshal(compactRaw, &p); err != nil {
				b.Fatal(err)
			}
			if _, err := p.Expand("6c4c201f-c507-43b7-a4f2-9f00de65ffb7"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(compactRaw)), "wire-B")
	})
}

// A value full of "k" members does not size the compact Events slice
// beyond what the bytes could encode.
func TestCompactBatchUnmarshalCapsItsGuess(t *testing.T) {
	value := `{` + strings.Repeat(`"k":1,`, 10_000) + `"end":1}`
	data := []byte(`{"base":"2026-01-02T03:04:05Z","events":[{"k":"a/1/node.completed","d":` + value + `}],"through":1}`)
	var c CompactBatch
	require.NoError(t, json.Unmarshal(data, &c))
	require.Len(t, c.Events, 1)
	require.LessOrEqual(t, cap(c.Events), len(data)/minCompactEventJSONBytes+1)
	var empty CompactBatch
	require.NoError(t, json.Unmarshal([]byte(`{"events":[],"through":2}`), &empty))
	require.Nil(t, empty.Events, "as an absent member decodes")
}
