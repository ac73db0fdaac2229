package store

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
)

// appendParamOIDs are weft_append_events' parameter types, in order.
var appendParamOIDs = []uint32{
	oidText, oidText, oidBool, oidInt4,
	pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.Int4ArrayOID, pgtype.TimestamptzArrayOID,
	pgtype.ByteaArrayOID, pgtype.ByteaArrayOID, pgtype.ByteaArrayOID, oidBytea,
	oidTimestamptz, oidText, oidText, oidText, oidText, oidText, oidTimestamptz, oidInt4, oidInt4,
}

// TestAppendWireMatchesPgx checks that the parameters appendCall.encode
// lays out are, byte for byte, what pgx encodes in binary from args(), for
// calls with and without events, NULLs and every optional member set.
func TestAppendWireMatchesPgx(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 20, 1, 123456000, time.UTC)
	before := time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC) // before PostgreSQL's epoch
	drafts := []execution.EventDraft{
		{Key: "r/a/1/node.started", Type: "node.started", At: at, NodeID: "a", Attempt: 1, Data: []byte(`{"b":1,"a":"x"}`)},
		{Key: "r/é/2/node.completed", Type: "node.completed", At: before, NodeID: "é\"n", Attempt: 2, Data: []byte(`{"token":"s"}`)},
		{Key: "r/run", Type: "run.started", At: at, Data: nil},
	}
	prepared, err := prepareEvents(drafts)
	require.NoError(t, err)
	full, err := newAppendCall("tenant-1", "0f5b6c1e-6b1c-4c57-9d7e-0f1a2b3c4d5e", prepared, true)
	require.NoError(t, err)
	out, runErr := `{"x":[1,2]}`, `{"code":"E"}`
	full.temporalRunID, full.finalStatus, full.output, full.runError, full.finishedAt = "trid", execution.StatusSucceeded, &out, &runErr, &at
	full.after, full.through = 3, 9
	empty, err := newAppendCall("t", "r", nil, false)
	require.NoError(t, err)

	m := pgtype.NewMap()
	for name, c := range map[string]*appendCall{"full": full, "empty": empty} {
		p := getAppendParams()
		c.encode(p)
		args := c.args()
		require.Len(t, p.values, len(args), name)
		require.Len(t, appendParamOIDs, len(args))
		for i, arg := range args {
			// A non-nil buffer, as pgx's query builder passes: only NULL encodes as nil.
			want, err := m.Encode(appendParamOIDs[i], pgtype.BinaryFormatCode, arg, make([]byte, 0, 8))
			require.NoError(t, err, "%s: parameter $%d", name, i+1)
			require.Equal(t, want, p.values[i], "%s: parameter $%d", name, i+1)
			require.Equal(t, want == nil, p.values[i] == nil, "%s: parameter $%d NULL", name, i+1)
		}
		putAppendParams(p)
	}
}

// TestAppendParamsReused checks that a pooled buffer written again holds
// the new call only, not a remnant of a longer one.
func TestAppendParamsReused(t *testing.T) {
	at := time.Date(2026, 12, 2, 16, 20, 1, 0, time.UTC)
	long, err := prepareEvents([]execution.EventDraft{
		{Key: "k1", Type: "node.started", At: at, NodeID: "n", Data: []byte(`{"a":"a long value"}`)},
		{Key: "k2", Type: "node.started", At: at, NodeID: "n"},
	})
	require.NoError(t, err)
	short, err := prepareEvents([]execution.EventDraft{{Key: "k", Type: "node.started", At: at, NodeID: "m"}})
	require.NoError(t, err)
	c1, err := newAppendCall("t", "r1", long, false)
	require.NoError(t, err)
	c2, err := newAppendCall("t", "r2", short, false)
	require.NoError(t, err)
	p := &appendParams{}
	c1.encode(p)
	c2.encode(p)
	fresh := &appendParams{}
	c2.encode(fresh)
	require.Equal(t, fresh.values, p.values)
}
