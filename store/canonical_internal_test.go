package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// evidenceDataOf is EvidenceData the long way, as it was written before
// appendEvidence: decode, sanitize, graph.Canonical, bound. The fast path
// must give the same bytes and fail on the same inputs.
func evidenceDataOf(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte(`{}`), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one value")
	}
	c, err := graph.Canonical(sanitize(v))
	if err != nil {
		return nil, err
	}
	if len(c) <= MaxEventDataBytes {
		return c, nil
	}
	return truncated(c)
}

var evidenceSamples = []string{
	``, ` `, `null`, `true`, `false`, `0`, `-0`, `1.50`, `1e400`, `-1e400`, `123456789012345678901234567890`, `"x"`, `[]`, `{}`,
	`{"text":"hello from weftbench","n":42}`,
	// Two keys that NUL replacement makes one: found by the fuzzer when
	// sanitize let map order pick the survivor.
	`{"a\u0000":1,"a\ufffd":2}`, `{"a\ufffd":2,"a\u0000":1}`,
	`{"mode":"live","checksum":"sha256-abc","revision":3}`,
	`{"port":"out","output":{"text":"hello","n":42,"nested":[1,2.0,{"b":true,"a":null}]}}`,
	`{"b":1,"a":2,"é":3,"` + "\ue000" + `":4,"😀":5,"A":6,"":7}`,
	`{"password":"p","Api-Key":{"deep":1},"nested":{"AccessToken":"t","list":[{"secret":1},{"ok":"<>&\u2028"}]}}`,
	`{"s":"quote\" back\\ \b\f\n\r\t \u0001 \u001f \u007f é 😀 \ud83d\ude00 \u0000 end"}`,
	`{"a\u0000":1,"a\ufffd":2}`, `{"k\u0000ey":{"x":1}}`,
	`{"bad":"\ud800"}`, `{"bad":"\xff\xfe"}`, `{"dup":1,"dup":2}`,
	`{"n":[0,-0,0.1,1e-7,1e21,9007199254740993,-1.5E+3,1e400]}`,
	`{"a":1} {"b":2}`, `{"a":`, `[1,2,]`, `{"a":1}}`, `1]`, `{"a":1} x`, `[01]`, `[1.]`, `[.5]`, `[1e]`, `[-]`, `tru`, `[truex]`,
	`{"a" 1}`, `{"a":1,}`, `{,}`, `{"a":1 "b":2}`, `["\x"]`, `["\u12"]`, `["\ud83d\u0041"]`, `["\udc00"]`, `["\u0000"]`,
	`{"\u0061":1,"a":2}`, `{"b\u0000":1}`, "[\"\t\"]", "{\"\x01\":1}", `[1e400]`, `{"a":1e400,"a":2}`, `{"a":{"b":1},"a":{"c":2}}`,
	`{"token":{"x":[1,}}`, `{"TOKEN":1,"tokens":2,"to\u212aen":3}`, "{\"to\u212aen\":3}", "{\"\u0130\":1,\"ab\":2}",
	strings.Repeat("[", 300) + strings.Repeat("]", 300), strings.Repeat(`{"a":`, 300) + "1" + strings.Repeat("}", 300),
	`{"big":"` + strings.Repeat("x", 9000) + `"}`,
	`{"big":"` + strings.Repeat("é\u0001", 3000) + `"}`,
}

func TestEvidenceDataMatchesCanonical(t *testing.T) {
	for _, raw := range evidenceSamples {
		checkEvidence(t, []byte(raw))
	}
}

// checkEvidence checks EvidenceData, the one-pass writer alone (where it
// takes raw) and the decoding way alone against the long way.
func checkEvidence(t *testing.T, raw []byte) {
	t.Helper()
	want, werr := evidenceDataOf(raw)
	got, gerr := EvidenceData(raw)
	require.Equal(t, werr == nil, gerr == nil, "%.80q: %v / %v", raw, werr, gerr)
	require.Equal(t, string(want), string(got), "%.80q", raw)
	if len(bytes.TrimSpace(raw)) == 0 {
		return
	}
	decoded, derr := evidenceDecoded(raw)
	require.Equal(t, werr == nil, derr == nil, "decoded %.80q: %v / %v", raw, werr, derr)
	require.Equal(t, string(want), string(decoded), "decoded %.80q", raw)
	var w evidenceWriter
	if c, ok := w.append(nil, raw); ok {
		require.NoError(t, werr, "the writer took %.80q", raw)
		if len(c) > MaxEventDataBytes {
			var err error
			c, err = truncated(c)
			require.NoError(t, err)
		}
		require.Equal(t, string(want), string(c), "writer %.80q", raw)
	}
}

// The one-pass writer takes what events hold, so they do not take the
// decoding way: names out of order, repeated and redacted, escapes,
// numbers to normalise, nesting.
func TestEvidenceWriterTakesOrdinaryData(t *testing.T) {
	for _, raw := range []string{
		`null`, `-0`, `1.50`, `"x"`, `[]`, `{}`, ` {"b" : [1, 2.0, {"d":true, "c":null}] , "a":"\n\u00e9\ud83d\ude00\/"} `,
		`{"mode":"live","checksum":"sha256-abc","revision":3}`, `{"dup":1,"dup":2}`, `{"Api-Key":{"deep":1},"é":2,"😀":3,"` + "\ue000" + `":4}`,
		`{"n":[0,-0,0.1,1e-7,1e21,9007199254740993,-1.5E+3]}`, `{"big":"` + strings.Repeat("x", 9000) + `"}`,
	} {
		var w evidenceWriter
		_, ok := w.append(nil, []byte(raw))
		require.True(t, ok, "%.80s", raw)
		checkEvidence(t, []byte(raw))
	}
	// One writer over many documents gives each its own evidence.
	var w evidenceWriter
	for _, raw := range evidenceSamples {
		want, werr := evidenceDataOf(json.RawMessage(raw))
		got, gerr := w.evidence(json.RawMessage(raw))
		require.Equal(t, werr == nil, gerr == nil, "%.80s: %v / %v", raw, werr, gerr)
		require.Equal(t, string(want), string(got), "%.80s", raw)
	}
}

// FuzzEvidenceData checks the one-pass canonical form and the decoding
// way against the long way on arbitrary input.
func FuzzEvidenceData(f *testing.F) {
	for _, raw := range evidenceSamples {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkEvidence(t, raw)
	})
}

// Keys that become one when NUL is replaced give the same evidence every
// time, whatever order the map is walked in.
func TestEvidenceDataOfMergedKeysIsStable(t *testing.T) {
	for _, raw := range []string{`{"a\u0000":1,"a\ufffd":2}`, `{"a\ufffd":2,"a\u0000":1}`} {
		first, err := EvidenceData(json.RawMessage(raw))
		require.NoError(t, err)
		require.Equal(t, "{\"a\uFFFD\":2}", string(first), raw)
		for range 50 {
			again, err := EvidenceData(json.RawMessage(raw))
			require.NoError(t, err)
			require.Equal(t, string(first), string(again), raw)
		}
	}
}

func TestEventHashPartsMatchCanonical(t *testing.T) {
	at := time.Date(2026, 12, 2, 1, 2, 3, 456789123, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		runID, typ, nodeID string
		attempt            int
		data               string
	}{
		{"5f0c6a3e-0000-4000-8000-000000000001", "run.started", "", 0, `{"checksum":"sha256-abc","mode":"live","revision":1}`},
		{"r", "node.completed", "e1", 1, `{"output":{"n":42,"text":"hello"},"port":"out"}`},
		{"r", "node.started", "quote\" back\\ \x01 <>& \u2028 é 😀", 3, `{}`},
		{"run \x00 \t", "edge.taken", "n", 1 << 60, `[1,"x",null]`},
		{"bad \xff", "node.started", "n", 1, `{}`},
		{"r", "node.started", "bad \xc3", 1, `{}`},
	} {
		for _, seq := range []int64{1, 12345} {
			want, err := eventCanonical(tc.runID, seq, 1, tc.typ, at, tc.nodeID, tc.attempt, []byte(tc.data))
			require.NoError(t, err)
			require.Regexp(t, eventTypePattern, tc.typ)
			pre, node, err := eventHashParts(at, tc.attempt, tc.nodeID)
			require.NoError(t, err)
			run, err := eventRunPart(tc.runID, 1)
			require.NoError(t, err)
			got := string(pre) + tc.data + string(node) + string(run) + strconv.FormatInt(seq, 10) + eventTypePart(tc.typ)
			require.Equal(t, string(want), got, "%+v", tc)
		}
	}
}

// BenchmarkPrepareChainEvents is the client side of appending the events of
// one chain10 run: each event's data redacted and made canonical
// (EvidenceData) and its canonical form split for the hash chain
// (newAppendCall), without the database round trip.
func BenchmarkPrepareChainEvents(b *testing.B) {
	drafts := chainDrafts(10)
	b.ReportAllocs()
	for b.Loop() {
		prepared, err := prepareEvents(drafts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := newAppendCall("tenant", "5f0c6a3e-0000-4000-8000-000000000001", prepared, false); err != nil {
			b.Fatal(err)
		}
	}
}

// chainDrafts are the interpreter's events of one run of a chain of n
// echo actions, as it records them: run.started; per node node.started
// and node.completed with the value; the output node; run.succeeded.
func chainDrafts(n int) []execution.EventDraft {
	const runID = "5f0c6a3e-0000-4000-8000-000000000001"
	at := time.Date(2026, 12, 2, 1, 2, 3, 456789000, time.UTC)
	value := `{"n":42,"text":"hello from weftbench"}`
	var out []execution.EventDraft
	add := func(typ, node string, attempt int, data string) {
		at = at.Add(time.Millisecond)
		out = append(out, execution.EventDraft{Key: fmt.Sprintf("%s/%s/%d/%s/%d", runID, node, attempt, typ, len(out)+1),
			Type: typ, NodeID: node, Attempt: attempt, At: at, Data: json.RawMessage(data)})
	}
	add(execution.EventRunStarted, "-", 0, `{"mode":"live","checksum":"sha256-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","revision":1}`)
	add(execution.EventNodeCompleted, "in", 0, `{"port":"out","output":`+value+`}`)
	for i := 1; i <= n; i++ {
		node := fmt.Sprintf("e%d", i)
		add(execution.EventNodeStarted, node, 1, `{"kind":"action"}`)
		add(execution.EventNodeCompleted, node, 1, `{"port":"out","output":`+value+`}`)
	}
	add(execution.EventNodeCompleted, "out", 0, `{"output":`+value+`}`)
	add(execution.EventRunSucceeded, "", 0, `{"output":`+value+`,"nodeId":"out"}`)
	return out
}
