package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/weftworks/weft/execution"
)

// An append's parameters go to weft_append_events already encoded, in
// PostgreSQL's binary formats, from a buffer this process reuses. pgx would
// encode them itself into a per-connection buffer it grows from 256 bytes
// by doubling, element by element, and drops after every query: with an
// append's few kilobytes of arrays that is about twice the bytes sent,
// allocated anew for each of a run's dozen appends (issue 14, bytes per
// run). What the database receives is the same values; only who lays out
// the bytes differs (TestAppendWireMatchesPgx).

// OIDs of the types weft_append_events takes (pg_type.oid, fixed by
// PostgreSQL).
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt4        = 23
	oidText        = 25
	oidTimestamptz = 1184
)

// binaryFormat is the one format code that applies to every parameter and
// result column.
var binaryFormat = []int16{1}

// pgEpochMicros is 2000-01-01 00:00:00 UTC in microseconds since the Unix
// epoch: PostgreSQL's binary timestamptz counts microseconds from it.
const pgEpochMicros = 946684800 * 1_000_000

// appendParams is one call's encoded parameters: values point into buf.
type appendParams struct {
	buf    []byte
	values [][]byte
}

// appendParamsPool keeps parameter buffers between appends. A buffer that
// grew past maxPooledParams (a huge batch) is left to the collector, so
// one outlier does not pin its memory.
var appendParamsPool = sync.Pool{New: func() any { return &appendParams{values: make([][]byte, 0, 22)} }}

const maxPooledParams = 256 << 10

func getAppendParams() *appendParams { return appendParamsPool.Get().(*appendParams) }

func putAppendParams(p *appendParams) {
	if cap(p.buf) > maxPooledParams {
		return
	}
	clear(p.values)
	p.buf, p.values = p.buf[:0], p.values[:0]
	appendParamsPool.Put(p)
}

// encode lays out c as weft_append_events' 22 parameters, in binary, in
// the order of appendEventsSQL; a nil value is SQL NULL.
func (c *appendCall) encode(p *appendParams) {
	p.buf, p.values = p.buf[:0], p.values[:0]
	// Offsets first: buf may move while it grows.
	type span struct {
		from, to int
		null     bool
	}
	spans := [22]span{}
	k := 0
	mark := func() int { return len(p.buf) }
	done := func(from int) { spans[k] = span{from: from, to: len(p.buf)}; k++ }
	null := func() { spans[k] = span{null: true}; k++ }
	text := func(s string) { from := mark(); p.buf = append(p.buf, s...); done(from) }
	int4 := func(v int32) { from := mark(); p.buf = binary.BigEndian.AppendUint32(p.buf, uint32(v)); done(from) }
	boolean := func(v bool) {
		from := mark()
		if v {
			p.buf = append(p.buf, 1)
		} else {
			p.buf = append(p.buf, 0)
		}
		done(from)
	}
	timestamptz := func(t *time.Time) {
		if t == nil {
			null()
			return
		}
		from := mark()
		p.buf = appendTimestamptz(p.buf, *t)
		done(from)
	}
	optText := func(s *string) {
		if s == nil {
			null()
			return
		}
		text(*s)
	}

	text(c.runID)
	text(c.tenantID)
	boolean(c.onlyIfActive)
	int4(int32(execution.EventSchemaVersion))
	evs, n := c.events, len(c.events)
	from := mark()
	p.buf = appendArray(p.buf, oidText, n, func(b []byte, i int) []byte { return append(b, evs[i].key...) })
	done(from)
	from = mark()
	p.buf = appendArray(p.buf, oidText, n, func(b []byte, i int) []byte { return append(b, evs[i].typ...) })
	done(from)
	from = mark()
	p.buf = appendArray(p.buf, oidText, n, func(b []byte, i int) []byte { return append(b, evs[i].nodeID...) })
	done(from)
	from = mark()
	p.buf = appendArray(p.buf, oidInt4, n, func(b []byte, i int) []byte {
		return binary.BigEndian.AppendUint32(b, uint32(int32(evs[i].attempt)))
	})
	done(from)
	from = mark()
	p.buf = appendArray(p.buf, oidTimestamptz, n, func(b []byte, i int) []byte { return appendTimestamptz(b, evs[i].at) })
	done(from)
	from = mark()
	p.buf = appendArray(p.buf, oidBytea, n, func(b []byte, i int) []byte { return append(b, evs[i].data...) })
	done(from)
	from = mark()
	p.buf = appendArray(p.buf, oidBytea, n, func(b []byte, i int) []byte { return append(b, c.pre(i)...) })
	done(from)
	from = mark()
	p.buf = appendArray(p.buf, oidBytea, n, func(b []byte, i int) []byte { return append(b, c.node(i)...) })
	done(from)
	from = mark()
	p.buf = append(p.buf, c.runPart...)
	done(from)
	timestamptz(c.runningAt)
	text(c.temporalRunID)
	text(EventsChannel)
	text(c.finalStatus)
	optText(c.output)
	optText(c.runError)
	timestamptz(c.finishedAt)
	int4(int32(c.after))
	int4(int32(c.through))
	for _, s := range spans[:k] {
		if s.null {
			p.values = append(p.values, nil)
			continue
		}
		p.values = append(p.values, p.buf[s.from:s.to:s.to])
	}
}

// appendTimestamptz appends t in PostgreSQL's binary timestamptz form
// (microseconds since 2000-01-01 UTC; t is already at microseconds).
func appendTimestamptz(b []byte, t time.Time) []byte {
	micros := t.Unix()*1_000_000 + int64(t.Nanosecond()/1000) - pgEpochMicros
	return binary.BigEndian.AppendUint64(b, uint64(micros))
}

// appendArray appends a one-dimensional array of n non-null elements of
// type elem in PostgreSQL's binary array form; each element's bytes are
// what appendElem appends after its length. An empty array is written as
// pgx writes one: one dimension of length zero.
func appendArray(b []byte, elem uint32, n int, appendElem func([]byte, int) []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, elem)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = binary.BigEndian.AppendUint32(b, 1) // lower bound
	for i := range n {
		at := len(b)
		b = binary.BigEndian.AppendUint32(b, 0)
		b = appendElem(b, i)
		binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	}
	return b
}

// appendOutcome is one weft_append_events row: run_found, run_status,
// appended, was_terminal, gap.
type appendOutcome struct {
	found, wasClosed, gap bool
}

// readAppendOutcome reads the one row a weft_append_events call returns,
// its columns in binary.
func readAppendOutcome(rr *pgconn.ResultReader) (appendOutcome, error) {
	var out appendOutcome
	rows := 0
	for rr.NextRow() {
		vals := rr.Values()
		if len(vals) != 5 {
			rr.Close()
			return out, fmt.Errorf("weft_append_events returned %d columns, want 5", len(vals))
		}
		rows++
		out = appendOutcome{found: isTrue(vals[0]), wasClosed: isTrue(vals[3]), gap: isTrue(vals[4])}
	}
	if _, err := rr.Close(); err != nil {
		return out, err
	}
	if rows != 1 {
		return out, fmt.Errorf("weft_append_events returned %d rows, want 1", rows)
	}
	return out, nil
}

// isTrue reads a binary boolean (NULL as false).
func isTrue(v []byte) bool { return len(v) == 1 && v[0] != 0 }

// execAppend runs one call in its own statement (and transaction) on a
// connection of pool, through the connection's prepared statement.
func execAppend(ctx context.Context, pool *pgxpool.Pool, call *appendCall) (appendOutcome, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return appendOutcome{}, err
	}
	defer conn.Release()
	p := getAppendParams()
	defer putAppendParams(p)
	call.encode(p)
	for sent := false; ; sent = true {
		sd, err := conn.Conn().Prepare(ctx, appendEventsSQL, appendEventsSQL)
		if err != nil {
			return appendOutcome{}, err
		}
		out, err := readAppendOutcome(conn.Conn().PgConn().ExecStatement(ctx, sd, p.values, binaryFormat, binaryFormat))
		if err == nil {
			return out, nil
		}
		if keepsStatement(err) {
			return appendOutcome{}, err
		}
		forgetStatement(conn)
		if sent || !staleStatement(err) {
			return appendOutcome{}, err
		}
	}
}

// staleStatement reports whether err says the connection's prepared
// append statement no longer fits the server: the server lost it (26000)
// or a migration replaced weft_append_events with another result type
// since it was planned (0A000, "cached plan must not change result
// type"). The statement did not run (or ran in a transaction that rolled
// back), and the events are idempotent by key, so the append is sent once
// more on a statement prepared again.
func staleStatement(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "26000" || pgErr.Code == "0A000")
}

// keepsStatement reports whether err leaves the connection's prepared
// append statement as it was: PostgreSQL ran the statement and raised an
// error of its own (a constraint, a cast, a lock timeout), so the
// statement is sound and dropping it would only cost a DEALLOCATE and a
// new PREPARE. Any other error (the connection, a context, a stale
// statement) may leave it unknown, so it is forgotten.
func keepsStatement(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && !staleStatement(err)
}

// forgetStatement drops conn's prepared append statement after a failed
// execution, as pgx does with the statements it caches, so the next
// append on this connection prepares it again rather than fail on it
// until the pool replaces the connection. It runs on its own short
// context: the append's may be what failed. A connection too broken to
// deallocate is closed by pgx and dropped by the pool.
func forgetStatement(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Conn().Deallocate(ctx, appendEventsSQL)
}

// execAppendBatch runs calls as one batch, in order, in one implicit
// transaction (one Sync): all of them commit or none does. The outcomes
// are in the calls' order.
func execAppendBatch(ctx context.Context, pool *pgxpool.Pool, calls []*appendCall) ([]appendOutcome, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	params := make([]*appendParams, len(calls))
	defer func() {
		for _, p := range params {
			if p != nil {
				putAppendParams(p)
			}
		}
	}()
	for i, call := range calls {
		params[i] = getAppendParams()
		call.encode(params[i])
	}
	for sent := false; ; sent = true {
		outs, err := sendAppendBatch(ctx, conn, params)
		if err == nil {
			return outs, nil
		}
		if keepsStatement(err) {
			return nil, err
		}
		forgetStatement(conn)
		if sent || !staleStatement(err) {
			return nil, err
		}
	}
}

// sendAppendBatch sends one batch of encoded calls on conn and reads their
// outcomes, in order.
func sendAppendBatch(ctx context.Context, conn *pgxpool.Conn, params []*appendParams) ([]appendOutcome, error) {
	sd, err := conn.Conn().Prepare(ctx, appendEventsSQL, appendEventsSQL)
	if err != nil {
		return nil, err
	}
	batch := &pgconn.Batch{}
	for _, p := range params {
		batch.ExecStatement(sd, p.values, binaryFormat, binaryFormat)
	}
	mrr := conn.Conn().PgConn().ExecBatch(ctx, batch)
	outs := make([]appendOutcome, len(params))
	var readErr error
	for i := range params {
		if !mrr.NextResult() {
			readErr = errors.New("weft_append_events batch ended early")
			break
		}
		out, err := readAppendOutcome(mrr.ResultReader())
		if err != nil {
			readErr = err
			break
		}
		outs[i] = out
	}
	// Close reports the batch's error (a refused statement fails the rest).
	if err := mrr.Close(); err != nil {
		return nil, err
	}
	if readErr != nil {
		return nil, readErr
	}
	return outs, nil
}
