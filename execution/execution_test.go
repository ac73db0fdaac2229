package execution

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTerminal(t *testing.T) {
	for status, want := range map[string]bool{
		StatusQueued: false, StatusRunning: false, "": false,
		StatusSucceeded: true, StatusFailed: true, StatusCancelled: true,
	} {
		got := Terminal(status)
		assert.Equal(t, want, got, "Terminal(%q) = %v, want %v", status, got, want)
	}
}

// A live attempt's input leaves its zero VirtualNow out, and decodes the
// same as the form earlier releases wrote (rolling deploys: either
// release reads the other's inputs).
func TestNodeInputZeroTimesLeftOut(t *testing.T) {
	in := NodeInput{TenantID: "t", RunID: "r", Mode: ModeLive, NodeID: "a", Kind: "action", Attempt: 1,
		RunStartedAt: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "virtualNow")
	assert.Contains(t, string(raw), `"runStartedAt":"2026-12-02T08:00:00Z"`)

	old := `{"tenantId":"t","runId":"r","workflowKey":"","checksum":"","mode":"live","nodeId":"a","kind":"action","attempt":1,` +
		`"inputs":null,"actor":{"kind":"","sub":""},"permissions":null,"runStartedAt":"2026-12-02T08:00:00Z","virtualNow":"0001-01-01T00:00:00Z"}`
	var fromOld, fromNew NodeInput
	require.NoError(t, json.Unmarshal([]byte(old), &fromOld))
	require.NoError(t, json.Unmarshal(raw, &fromNew))
	assert.Equal(t, in, fromOld)
	assert.Equal(t, in, fromNew)

	sim := in
	sim.Mode, sim.VirtualNow = ModeSimulation, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	raw, err = json.Marshal(sim)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"virtualNow":"2026-01-01T00:00:00Z"`)
}

// chainBatch is a batch like the ones a chain's attempts carry: n events
// of node.completed, edge.taken and node.started in turn.
func chainBatch(n int) EventBatch {
	b := EventBatch{Run: &RunUpdate{Status: StatusRunning, TemporalRunID: "01a235c6-89b9-7681-ad5a-320b93f38a59"}, Through: n}
	at := time.Date(2026, 12, 2, 8, 2, 13, 628871000, time.UTC)
	for i := range n {
		node := fmt.Sprintf("e%d", i/3+1)
		e := EventDraft{NodeID: node, Attempt: 1, At: at}
		switch i % 3 {
		case 0:
			e.Type, e.Data = EventNodeCompleted, json.RawMessage(`{"port":"out","output":{"n":42,"text":"hello from weftbench"}}`)
		case 1:
			e.Type, e.Data = EventEdgeTaken, json.RawMessage(fmt.Sprintf(`{"from":"%s.out","to":"e%d.in"}`, node, i/3+2))
		case 2:
			e.Type, e.Data = EventNodeStarted, json.RawMessage(`{"kind":"action"}`)
		}
		e.Key = "6c4c201f-c507-43b7-a4f2-9f00de65ffb7/" + node + "/1/" + e.Type
		b.Events = append(b.Events, e)
	}
	return b
}

// plainBatch is EventBatch without its UnmarshalJSON: what encoding/json
// decodes by itself.
type plainBatch EventBatch

// EventBatch.UnmarshalJSON decodes exactly what encoding/json decodes by
// itself, whatever the batch holds (a "key" in a value included), and
// fails where it fails.
func TestEventBatchUnmarshalMatchesPlainDecoding(t *testing.T) {
	withKeyInData := chainBatch(2)
	withKeyInData.Events[0].Data = json.RawMessage(`{"key":"key","output":{"key":1}}`)
	docs := []string{`{"through":0}`, `{"events":[],"through":3}`, `{"events":null,"through":3}`, `{"run":{"status":"running"},"through":7}`}
	for _, b := range []EventBatch{chainBatch(1), chainBatch(14), withKeyInData} {
		raw, err := json.Marshal(b)
		require.NoError(t, err)
		docs = append(docs, string(raw))
	}
	for _, doc := range docs {
		var got EventBatch
		var want plainBatch
		require.NoError(t, json.Unmarshal([]byte(doc), &got), doc)
		require.NoError(t, json.Unmarshal([]byte(doc), &want), doc)
		if len(want.Events) == 0 {
			want.Events = nil
		}
		assert.Equal(t, EventBatch(want), got, doc)
		assert.LessOrEqual(t, cap(got.Events), strings.Count(doc, `"key"`), doc)
	}
	for _, bad := range []string{`{"events":{}}`, `{"events":[{"key":1}]}`, `{"through":"x"}`, `[]`} {
		var got EventBatch
		var want plainBatch
		errGot, errWant := json.Unmarshal([]byte(bad), &got), json.Unmarshal([]byte(bad), &want)
		var typeGot, typeWant *json.UnmarshalTypeError
		require.ErrorAs(t, errWant, &typeWant, bad)
		require.ErrorAs(t, errGot, &typeGot, bad)
		// The same refusal; the message names the struct it decoded into.
		assert.Equal(t, [3]any{typeWant.Value, typeWant.Type.Kind(), typeWant.Field}, [3]any{typeGot.Value, typeGot.Type.Kind(), typeGot.Field}, bad)
	}
	// Inside a NodeInput, as an activity decodes it.
	in := NodeInput{RunID: "r", NodeID: "e5", Attempt: 1, Events: new(chainBatch(14))}
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	var back NodeInput
	require.NoError(t, json.Unmarshal(raw, &back))
	assert.Equal(t, in, back)
	assert.Equal(t, 14, cap(back.Events.Events))
}

// The carried batch's decoding, in B/op, with and without the sized slice.
//
//	go test ./execution -run '^$' -bench EventBatchDecode -benchmem
func BenchmarkEventBatchDecode(b *testing.B) {
	raw, err := json.Marshal(chainBatch(14))
	require.NoError(b, err)
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p plainBatch
			if err := json.Unmarshal(raw, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sized", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p EventBatch
			if err := json.Unmarshal(raw, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A value full of "key" members does not size the Events slice: the
// count is capped by what the bytes could encode.
func TestEventBatchUnmarshalCapsItsGuess(t *testing.T) {
	value := `{` + strings.Repeat(`"key":1,`, 10_000) + `"end":1}`
	data := []byte(`{"events":[{"key":"r/a/1/node.completed","type":"node.completed","at":"2026-01-02T03:04:05Z","data":` +
		value + `}],"through":1}`)
	var b EventBatch
	require.NoError(t, json.Unmarshal(data, &b))
	require.Len(t, b.Events, 1)
	require.LessOrEqual(t, cap(b.Events), len(data)/minEventJSONBytes+1)
}
