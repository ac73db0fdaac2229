package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// Event evidence bounds (SPEC §5: bounded, marked truncated).
const (
	// MaxEventDataBytes bounds the canonical JSON of one event's data.
	MaxEventDataBytes = 8 << 10
	// eventPreviewBytes is how much of oversized data the truncation
	// envelope keeps as a string preview; the envelope must still fit
	// MaxEventDataBytes once the preview is JSON-escaped.
	eventPreviewBytes = 7 << 10
	// maxEventKeyBytes bounds event keys (deterministic, short by construction).
	maxEventKeyBytes = 512
	// Redacted replaces the value of every sensitive key in event data.
	Redacted = "[REDACTED]"
)

// sensitiveKeyParts are matched case-insensitively as substrings of object
// keys at any depth: evidence never holds credentials, tokens or hidden
// reasoning, whatever a node or provider put in it. Substring matching errs
// on the side of hiding ("accessToken", "X-Api-Key", "db_password").
var sensitiveKeyParts = []string{
	"password", "secret", "token", "apikey", "api_key", "api-key",
	"authorization", "credential", "private_key", "cookie", "reasoning",
}

// eventTypePattern is the shape of event type names: dotted lowercase
// segments, snake_case within one ("node.attempt.failed",
// "node.attempt.lease_lost").
var eventTypePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// Event is one stored, hash-chained event of a run.
type Event struct {
	Seq           int64
	Type          string
	SchemaVersion int
	At            time.Time
	NodeID        string
	Attempt       int
	Data          json.RawMessage
	PrevHash      string
	Hash          string
}

// ChainError reports the first event whose stored hash chain does not verify.
type ChainError struct {
	RunID  string
	Seq    int64
	Reason string
}

// Error names the run and the first bad seq.
func (e *ChainError) Error() string {
	return fmt.Sprintf("store: event chain of run %s is broken at seq %d: %s", e.RunID, e.Seq, e.Reason)
}

// CodeEventsDeleted is the code of ErrEventsDeleted (410 on the API).
const CodeEventsDeleted = "EVENTS_DELETED"

// ErrEventsDeleted is returned by VerifyChain and CheckChain for a run
// whose events retention deleted: there is nothing left to verify.
var ErrEventsDeleted = failure.New(CodeEventsDeleted, "the run's events were deleted by retention (WEFT_EVENT_RETENTION_DAYS); there is no chain left to verify")

// preparedEvent is a draft after validation, redaction and bounding.
type preparedEvent struct {
	key, typ, nodeID string
	attempt          int
	at               time.Time
	data             []byte // canonical JSON
	// preEnd and nodeEnd locate the event's hash pieces (eventHashParts)
	// in its appendCall's parts: pre ends at preEnd, node at nodeEnd.
	preEnd, nodeEnd int
}

// AppendEvents appends events to a run's log and applies upd (may be nil) to
// the run row, in one transaction under the run's row lock (SELECT ... FOR
// UPDATE), so concurrent writers of one run (the interpreter's flush and a
// node activity's tool events) are serialised and seq stays gapless.
//
// Events whose key the run already holds are skipped, so a re-executed
// activity appends nothing twice. Each new event gets seq = last seq + 1, its
// data redacted and bounded, `at` in UTC truncated to microseconds (what
// PostgreSQL stores, so the hash recomputes from the row), and
// hash = sha256(prevHash || canonical(event)).
//
// A run of another tenant is failure.ErrNotFound; malformed drafts are
// INVALID_REQUEST and append nothing.
func (s *Store) AppendEvents(ctx context.Context, tenantID, runID string, events []execution.EventDraft, upd *execution.RunUpdate) error {
	_, err := s.appendEvents(ctx, tenantID, runID, events, upd, false)
	return err
}

// appendEvents is AppendEvents; with onlyIfActive it appends nothing and
// reports false when the run is already terminal (checked under the row
// lock), so a writer that is not the interpreter (the reconciler) never
// appends after the run's terminal event.
func (s *Store) appendEvents(ctx context.Context, tenantID, runID string, events []execution.EventDraft, upd *execution.RunUpdate, onlyIfActive bool) (bool, error) {
	call, err := s.prepareAppend(ctx, AppendRequest{TenantID: tenantID, RunID: runID, Events: events, Update: upd}, onlyIfActive)
	if err != nil {
		return false, err
	}
	// One statement (weft_append_events, migration 00012), whatever the
	// batch: the events, the move to running and the terminal projection.
	out, err := execAppend(ctx, s.Pool, call)
	if err == nil && !out.found {
		err = failure.ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("store: append events to run %s: %w", runID, err)
	}
	// With onlyIfActive, a run already terminal got nothing.
	return !(onlyIfActive && out.wasClosed), nil
}

// appendEventsSQL calls weft_append_events (its third signature,
// migration 00026: 00023's arguments, each event's data sent once and the
// run's part once per call, 00025's body updating the run row once per
// call, and a carried batch's After check and Through vouch, 0 for none)
// with an appendCall's arguments.
const appendEventsSQL = `SELECT run_found, run_status, appended, was_terminal, gap FROM weft_append_events($1, $2, $3, $4,
	$5::text[], $6::text[], $7::text[], $8::integer[], $9::timestamptz[], $10::bytea[], $11::bytea[], $12::bytea[],
	$13::bytea, $14::timestamptz, $15, $16, $17, $18::text::jsonb, $19::text::jsonb, $20::timestamptz, $21::integer, $22::integer)`

// appendCall is one weft_append_events call: the prepared events, each
// event's canonical form in the pieces the function hashes around its
// data, the run's part and its seq (see eventHashParts), and the run
// update. The events' arrays are laid out when the call is sent (encode,
// or args for pgx).
type appendCall struct {
	tenantID, runID  string
	onlyIfActive     bool
	events           []preparedEvent
	parts            []byte // every event's pre and node, back to back
	runPart          []byte
	runningAt        *time.Time
	temporalRunID    string
	finalStatus      string
	output, runError *string // JSON text, nil for SQL NULL
	finishedAt       *time.Time
	after, through   int // AppendRequest's
}

func newAppendCall(tenantID, runID string, events []preparedEvent, onlyIfActive bool) (*appendCall, error) {
	runPart, err := eventRunPart(runID, execution.EventSchemaVersion)
	if err != nil {
		return nil, err
	}
	size := 0
	for _, e := range events {
		size += len(e.nodeID) + 80
	}
	c := &appendCall{tenantID: tenantID, runID: runID, onlyIfActive: onlyIfActive,
		events: events, parts: make([]byte, 0, size), runPart: runPart}
	for i := range events {
		e := &events[i]
		if c.parts, e.preEnd, err = appendEventHashParts(c.parts, e.at, e.attempt, e.nodeID); err != nil {
			return nil, err
		}
		e.nodeEnd = len(c.parts)
		// A batch holding run.started starts the run at that event's
		// time, whatever its update: a run that ran no activity reaches
		// its end with its start in the same batch.
		if e.typ == execution.EventRunStarted && c.runningAt == nil {
			at := e.at
			c.runningAt = &at
		}
	}
	return c, nil
}

// pre and node are event i's hash pieces (full slices: appending to one
// never writes over what follows).
func (c *appendCall) pre(i int) []byte {
	from := 0
	if i > 0 {
		from = c.events[i-1].nodeEnd
	}
	end := c.events[i].preEnd
	return c.parts[from:end:end]
}

func (c *appendCall) node(i int) []byte {
	end := c.events[i].nodeEnd
	return c.parts[c.events[i].preEnd:end:end]
}

// update sets the run update's arguments: the move to running (at the
// batch's time), or the terminal status with its output (a claim-checked
// output is read first: values are immutable) or error. The projection is
// forward only; the function ignores what would move it back.
func (c *appendCall) update(ctx context.Context, q querier, tenantID, runID string, upd *execution.RunUpdate, events []execution.EventDraft) error {
	if upd == nil || upd.Status == "" {
		return nil
	}
	c.temporalRunID = upd.TemporalRunID
	at := projectionTime(events)
	switch upd.Status {
	case execution.StatusThrottled, execution.StatusQueued:
		return nil // never a move forward (only the dispatcher admits a throttled run)
	case execution.StatusRunning:
		if c.runningAt == nil {
			if at == nil {
				now := time.Now().UTC()
				at = &now
			}
			c.runningAt = at
		}
		return nil
	}
	c.finalStatus, c.finishedAt = upd.Status, at
	if upd.Output != nil {
		v, err := valueJSON(ctx, q, tenantID, runID, *upd.Output)
		if err != nil {
			return fmt.Errorf("store: run %s output: %w", runID, err)
		}
		out := string(v)
		c.output = &out
	}
	if upd.Error != nil {
		b, err := json.Marshal(upd.Error)
		if err != nil {
			return err
		}
		e := string(b)
		c.runError = &e
	}
	return nil
}

// args are the call's parameters as pgx takes them (appendInTx).
func (c *appendCall) args() []any {
	n := len(c.events)
	keys, types, nodes := make([]string, n), make([]string, n), make([]string, n)
	attempts, ats := make([]int32, n), make([]time.Time, n)
	data, pres, nodeParts := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i, e := range c.events {
		keys[i], types[i], nodes[i], attempts[i], ats[i], data[i] = e.key, e.typ, e.nodeID, int32(e.attempt), e.at, e.data
		pres[i], nodeParts[i] = c.pre(i), c.node(i)
	}
	return []any{c.runID, c.tenantID, c.onlyIfActive, execution.EventSchemaVersion,
		keys, types, nodes, attempts, ats, data, pres, nodeParts, c.runPart,
		c.runningAt, c.temporalRunID, EventsChannel, c.finalStatus, c.output, c.runError, c.finishedAt, int32(c.after), int32(c.through)}
}

// prepareEvents validates drafts, drops repeated keys within the batch (the
// first wins, as it would across batches) and redacts and bounds their data.
func prepareEvents(drafts []execution.EventDraft) ([]preparedEvent, error) {
	out := make([]preparedEvent, 0, len(drafts))
	seen := make(map[string]bool, len(drafts))
	var evidence evidenceWriter // its buffers serve every draft
	for i, d := range drafts {
		bad := func(format string, args ...any) error {
			return failure.New(failure.CodeInvalidRequest, "event %d (%q): "+format, append([]any{i, d.Key}, args...)...)
		}
		switch {
		case d.Key == "" || len(d.Key) > maxEventKeyBytes || !utf8.ValidString(d.Key) || strings.ContainsRune(d.Key, 0):
			return nil, bad("key must be 1 to %d bytes of UTF-8", maxEventKeyBytes)
		case !eventTypePattern.MatchString(d.Type):
			return nil, bad("type %q is not a dotted lowercase name", d.Type)
		case d.At.IsZero():
			return nil, bad("at is required")
		case d.Attempt < 0:
			return nil, bad("attempt must not be negative")
		case !utf8.ValidString(d.NodeID) || strings.ContainsRune(d.NodeID, 0):
			return nil, bad("node id is not valid text")
		}
		if seen[d.Key] {
			continue
		}
		seen[d.Key] = true
		data, err := evidence.evidence(d.Data)
		if err != nil {
			return nil, bad("%v", err)
		}
		out = append(out, preparedEvent{
			key: d.Key, typ: d.Type, nodeID: d.NodeID, attempt: d.Attempt,
			at: eventTime(d.At), data: data,
		})
	}
	return out, nil
}

// eventTime is t as PostgreSQL stores it: UTC, microsecond precision.
func eventTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// projectionTime is when a run update happened: the latest event time of the
// batch (workflow time, stable across re-executions), else nil for now().
func projectionTime(drafts []execution.EventDraft) *time.Time {
	var at *time.Time
	for _, d := range drafts {
		if t := eventTime(d.At); !d.At.IsZero() && (at == nil || t.After(*at)) {
			at = &t
		}
	}
	return at
}

// statusRank orders run statuses; a status only ever moves to a higher rank,
// and terminal statuses (rankTerminal) never change. -1 is unknown.
func statusRank(s string) int {
	switch {
	case s == execution.StatusThrottled:
		return 0
	case s == execution.StatusQueued:
		return 1
	case s == execution.StatusRunning:
		return 2
	case execution.Terminal(s):
		return rankTerminal
	}
	return -1
}

// rankTerminal is the rank of succeeded, failed and cancelled.
const rankTerminal = 3

// appendInTx appends prepared events to a run's log inside tx with the
// same weft_append_events the hot path calls (seq, hash and the stream
// wake-up are identical), and the terminal update upd (may be nil; at is
// its time). The dispatcher writes a run's run.throttled, run.admitted and
// run.cancelled this way, inside its admission transaction. A run of
// another tenant is failure.ErrNotFound.
func appendInTx(ctx context.Context, tx pgx.Tx, tenantID, runID string, prepared []preparedEvent, upd *execution.RunUpdate, at *time.Time) error {
	call, err := newAppendCall(tenantID, runID, prepared, false)
	if err != nil {
		return err
	}
	if upd != nil && execution.Terminal(upd.Status) {
		call.finalStatus, call.finishedAt = upd.Status, at
		if upd.Error != nil {
			b, err := json.Marshal(upd.Error)
			if err != nil {
				return err
			}
			e := string(b)
			call.runError = &e
		}
	}
	var found, wasClosed bool
	var status string
	if err := tx.QueryRow(ctx, appendEventsSQL, call.args()...).Scan(&found, &status, new(int), &wasClosed, new(bool)); err != nil {
		return err
	}
	if !found {
		return failure.ErrNotFound
	}
	return nil
}

// eventHash is hex sha256(prevHash || canonical(event)), where the event is
// {runId, seq, type, schemaVersion, at, nodeId, attempt, data} with `at` in
// RFC 3339 with exactly six fractional digits, in UTC.
func eventHash(runID string, seq int64, schemaVersion int, typ string, at time.Time, nodeID string, attempt int, data []byte, prevHash string) (string, error) {
	c, err := eventCanonical(runID, seq, schemaVersion, typ, at, nodeID, attempt, data)
	if err != nil {
		return "", err
	}
	return graph.SHA256Hex(append([]byte(prevHash), c...)), nil
}

// eventCanonical is canonical(event) of eventHash.
func eventCanonical(runID string, seq int64, schemaVersion int, typ string, at time.Time, nodeID string, attempt int, data []byte) ([]byte, error) {
	return graph.Canonical(struct {
		RunID         string          `json:"runId"`
		Seq           int64           `json:"seq"`
		Type          string          `json:"type"`
		SchemaVersion int             `json:"schemaVersion"`
		At            string          `json:"at"`
		NodeID        string          `json:"nodeId"`
		Attempt       int             `json:"attempt"`
		Data          json.RawMessage `json:"data"`
	}{runID, seq, typ, schemaVersion, at.UTC().Format(eventTimeLayout), nodeID, attempt, data})
}

// The canonical form eventHash hashes, as weft_append_events (migration
// 00023) puts it together: canonical(event) = pre || data || node || run ||
// decimal(seq) || typePart(type). The keys sort as at, attempt, data,
// nodeId, runId, schemaVersion, seq, type, so pre ends with `"data":` and
// run with `"seq":`. The pieces are written directly, byte for byte what
// eventCanonical writes (TestEventHashPartsMatchCanonical), without its
// marshal-and-reparse; the data, canonical already (preparedEvent.data,
// from EvidenceData), is not copied into them: it crosses to the database
// once, as the jsonb to store.

// eventHashParts is an event's pre, `{"at":"...","attempt":N,"data":`, and
// node, `,"nodeId":"..."`, in one buffer.
func eventHashParts(at time.Time, attempt int, nodeID string) (pre, node []byte, err error) {
	buf, n, err := appendEventHashParts(make([]byte, 0, len(nodeID)+80), at, attempt, nodeID)
	if err != nil {
		return nil, nil, err
	}
	// A full slice expression: appending to pre never writes over node.
	return buf[:n:n], buf[n:], nil
}

// appendEventHashParts appends an event's pre and node to buf and returns
// it with where pre ends.
func appendEventHashParts(buf []byte, at time.Time, attempt int, nodeID string) ([]byte, int, error) {
	buf = append(buf, `{"at":"`...)
	buf = at.UTC().AppendFormat(buf, eventTimeLayout)
	buf = append(buf, `","attempt":`...)
	buf = graph.AppendCanonicalInt(buf, int64(attempt))
	buf = append(buf, `,"data":`...)
	n := len(buf)
	buf = append(buf, `,"nodeId":`...)
	buf, err := appendCanonicalText(buf, nodeID)
	return buf, n, err
}

// eventRunPart is what every event of a run has after its node,
// `,"runId":"...","schemaVersion":N,"seq":`.
func eventRunPart(runID string, schemaVersion int) ([]byte, error) {
	buf := make([]byte, 0, len(runID)+48)
	buf = append(buf, `,"runId":`...)
	buf, err := appendCanonicalText(buf, runID)
	if err != nil {
		return nil, err
	}
	buf = append(buf, `,"schemaVersion":`...)
	buf = graph.AppendCanonicalInt(buf, int64(schemaVersion))
	return append(buf, `,"seq":`...), nil
}

// eventTypePart is the type member that weft_append_events writes after
// the seq: an event type is dotted lowercase names (eventTypePattern,
// which prepareEvents holds every event to), whose canonical JSON string
// is the type in quotes.
func eventTypePart(typ string) string { return `,"type":"` + typ + `"}` }

// appendCanonicalText appends s as a canonical JSON string; text that is
// not valid UTF-8 as graph.Canonical writes it (each bad byte U+FFFD).
func appendCanonicalText(dst []byte, s string) ([]byte, error) {
	if out, ok := graph.AppendCanonicalString(dst, s); ok {
		return out, nil
	}
	c, err := graph.Canonical(s)
	if err != nil {
		return nil, err
	}
	return append(dst, c...), nil
}

// eventTimeLayout is `at` in canonical events: RFC 3339, UTC, exactly six
// fractional digits.
const eventTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// EvidenceData turns event data into what may be stored as evidence: valid
// JSON (empty becomes {}), every sensitive key's value replaced by
// "[REDACTED]" at any depth, NUL characters (which jsonb cannot hold)
// replaced by U+FFFD, canonical (RFC 8785), and at most MaxEventDataBytes —
// larger data becomes {"truncated": true, "size": N, "preview": "..."} where
// N is the canonical size and preview its first ~7 KiB. Tool harnesses use it
// to bound their outputs the same way.
func EvidenceData(raw json.RawMessage) ([]byte, error) {
	var w evidenceWriter
	return w.evidence(raw)
}

// evidence is EvidenceData with w's buffers: in one pass over raw
// (evidenceWriter), else by decoding it (evidenceDecoded).
func (w *evidenceWriter) evidence(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte(`{}`), nil
	}
	c, ok := w.append(make([]byte, 0, len(raw)), raw)
	if !ok {
		return evidenceDecoded(raw)
	}
	if len(c) <= MaxEventDataBytes {
		return c, nil
	}
	return truncated(c)
}

// evidenceDecoded is EvidenceData by decoding raw with encoding/json: the
// way of every document the one-pass writer does not take, and the
// wording of every error.
func evidenceDecoded(raw json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep numbers as written until canonicalisation
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("data is not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("data holds more than one JSON value")
	}
	c, ok := appendEvidence(make([]byte, 0, len(raw)), v)
	if !ok {
		var err error
		if c, err = graph.Canonical(sanitize(v)); err != nil {
			return nil, fmt.Errorf("data: %w", err)
		}
	}
	if len(c) <= MaxEventDataBytes {
		return c, nil
	}
	return truncated(c)
}

// appendEvidence appends graph.Canonical(sanitize(v)) for v as a decoder
// with UseNumber returns it, in one pass with no copy of v: byte for byte
// the same (TestEvidenceDataMatchesCanonical). It reports false, having
// appended anything, where EvidenceData takes that long way instead: an
// object key holding NUL (which sanitize may merge with another key), a
// number beyond float64's range (whose error the long way reports).
func appendEvidence(dst []byte, v any) ([]byte, bool) {
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		if t {
			return append(dst, "true"...), true
		}
		return append(dst, "false"...), true
	case string:
		return graph.AppendCanonicalString(dst, noNUL(t))
	case json.Number:
		out, err := graph.AppendCanonicalNumber(dst, string(t))
		return out, err == nil
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendEvidence(dst, e); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			if strings.IndexByte(k, 0) >= 0 {
				return dst, false
			}
			keys = append(keys, k)
		}
		slices.SortFunc(keys, graph.CompareCanonicalKeys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = graph.AppendCanonicalString(dst, k); !ok {
				return dst, false
			}
			dst = append(dst, ':')
			if isSensitiveKey(k) {
				dst, ok = graph.AppendCanonicalString(dst, Redacted)
			} else {
				dst, ok = appendEvidence(dst, t[k])
			}
			if !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	}
	return dst, false
}

// sanitize redacts sensitive keys and replaces NUL characters, recursively.
func sanitize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		// Replacing NUL can make two keys one ("a\x00" and "a\uFFFD"): taken
		// in sorted order, the same one wins every time, so the evidence of
		// one input is always the same bytes.
		for _, k := range slices.Sorted(maps.Keys(t)) {
			val := t[k]
			k = noNUL(k)
			if isSensitiveKey(k) {
				out[k] = Redacted
				continue
			}
			out[k] = sanitize(val)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = sanitize(val)
		}
		return out
	case string:
		return noNUL(t)
	}
	return v
}

func isSensitiveKey(k string) bool {
	lk := strings.ToLower(k)
	for _, p := range sensitiveKeyParts {
		if strings.Contains(lk, p) {
			return true
		}
	}
	return false
}

func noNUL(s string) string {
	if !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// truncated builds the truncation envelope for canonical data c, shrinking
// the preview until the envelope itself fits (escaping can grow it).
func truncated(c []byte) ([]byte, error) {
	n := eventPreviewBytes
	for {
		p := c[:n]
		for len(p) > 0 && !utf8.Valid(p) { // cut on a rune boundary
			p = p[:len(p)-1]
		}
		env, err := graph.Canonical(map[string]any{"truncated": true, "size": len(c), "preview": string(p)})
		if err != nil {
			return nil, err
		}
		if len(env) <= MaxEventDataBytes {
			return env, nil
		}
		n -= len(env) - MaxEventDataBytes
		if n <= 0 {
			n = 0
		}
	}
}

// Page sizes of ListEvents.
const (
	DefaultEventPageSize = 100
	MaxEventPageSize     = 10_000
)

// ListEvents returns up to limit events of the run with seq > afterSeq, in
// seq order (limit defaults to DefaultEventPageSize, capped at
// MaxEventPageSize). A run of another tenant is failure.ErrNotFound.
func (s *Store) ListEvents(ctx context.Context, tenantID, runID string, afterSeq int64, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = DefaultEventPageSize
	}
	limit = min(limit, MaxEventPageSize)
	rows, err := s.Pool.Query(ctx, `SELECT seq, type, schema_version, at, COALESCE(node_id, ''), COALESCE(attempt, 0),
			data, prev_hash, hash
		FROM run_events WHERE run_id = $1 AND tenant_id = $2 AND seq > $3
		ORDER BY seq LIMIT $4`, runID, tenantID, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list events: %w", err)
	}
	events, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, fmt.Errorf("store: list events: %w", err)
	}
	if len(events) == 0 {
		if err := s.runExists(ctx, tenantID, runID); err != nil {
			return nil, err
		}
	}
	return events, nil
}

func scanEvent(row pgx.CollectableRow) (Event, error) {
	var e Event
	err := row.Scan(&e.Seq, &e.Type, &e.SchemaVersion, &e.At, &e.NodeID, &e.Attempt, &e.Data, &e.PrevHash, &e.Hash)
	e.At = e.At.UTC()
	return e, err
}

func (s *Store) runExists(ctx context.Context, tenantID, runID string) error {
	var one int
	err := s.Pool.QueryRow(ctx, `SELECT 1 FROM runs WHERE run_id = $1 AND tenant_id = $2`, runID, tenantID).Scan(&one)
	return notFound(err)
}

// ChainReport is what CheckChain found in a run's event chain.
type ChainReport struct {
	// Intact is true when every event's hash matches its content and its
	// predecessor, seq runs 1..n without gaps and the chain ends at the
	// run's last hash.
	Intact bool
	// Events is how many events are stored for the run.
	Events int64
	// FirstBrokenSeq and Reason name the first place the chain breaks
	// (0 and "" when intact).
	FirstBrokenSeq int64
	Reason         string
}

// VerifyChain is CheckChain for callers that want an error: the first
// mismatch is a *ChainError naming its seq.
func (s *Store) VerifyChain(ctx context.Context, tenantID, runID string) error {
	r, err := s.CheckChain(ctx, tenantID, runID)
	if err != nil {
		return err
	}
	if !r.Intact {
		return &ChainError{RunID: runID, Seq: r.FirstBrokenSeq, Reason: r.Reason}
	}
	return nil
}

// CheckChain recomputes every event hash of the run from the stored rows
// and checks seq is 1..last_seq without gaps and the chain ends at the run's
// last hash, reporting the first break. A missing run (or another
// tenant's) is failure.ErrNotFound; a run whose events retention deleted is
// ErrEventsDeleted.
func (s *Store) CheckChain(ctx context.Context, tenantID, runID string) (ChainReport, error) {
	var lastSeq int64
	var lastHash string
	var deletedAt *time.Time
	err := s.Pool.QueryRow(ctx, `SELECT last_seq, last_hash, events_deleted_at FROM runs WHERE run_id = $1 AND tenant_id = $2`,
		runID, tenantID).Scan(&lastSeq, &lastHash, &deletedAt)
	if err != nil {
		return ChainReport{}, notFound(err)
	}
	if deletedAt != nil {
		return ChainReport{}, ErrEventsDeleted
	}
	rows, err := s.Pool.Query(ctx, `SELECT seq, type, schema_version, at, COALESCE(node_id, ''), COALESCE(attempt, 0),
			data, prev_hash, hash
		FROM run_events WHERE run_id = $1 AND tenant_id = $2 ORDER BY seq`, runID, tenantID)
	if err != nil {
		return ChainReport{}, fmt.Errorf("store: verify chain: %w", err)
	}
	defer rows.Close()
	var report ChainReport
	broken := func(seq int64, reason string) {
		if report.FirstBrokenSeq == 0 {
			report.FirstBrokenSeq, report.Reason = seq, reason
		}
	}
	prev := ""
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return ChainReport{}, fmt.Errorf("store: verify chain: %w", err)
		}
		report.Events++
		if report.FirstBrokenSeq != 0 {
			continue // counting only: the first break is what matters
		}
		if e.Seq != report.Events {
			broken(report.Events, fmt.Sprintf("missing; found seq %d instead", e.Seq))
			continue
		}
		if e.PrevHash != prev {
			broken(e.Seq, "prevHash does not match the previous event's hash")
			continue
		}
		h, err := eventHash(runID, e.Seq, e.SchemaVersion, e.Type, e.At, e.NodeID, e.Attempt, e.Data, prev)
		if err != nil {
			broken(e.Seq, err.Error())
			continue
		}
		if h != e.Hash {
			broken(e.Seq, "content does not match its hash")
			continue
		}
		prev = h
	}
	if err := rows.Err(); err != nil {
		return ChainReport{}, fmt.Errorf("store: verify chain: %w", err)
	}
	switch {
	case report.FirstBrokenSeq != 0:
	case report.Events != lastSeq:
		broken(report.Events+1, fmt.Sprintf("missing; the run's last seq is %d", lastSeq))
	case prev != lastHash:
		broken(max(report.Events, 1), "the run's last hash does not match the chain")
	}
	report.Intact = report.FirstBrokenSeq == 0
	return report, nil
}

// DeleteEventsOfRunsClosedBefore deletes the events of every run that
// finished before t (retention of closed runs) and marks those runs, so
// VerifyChain reports the deletion instead of a broken chain. It works in
// batches of runs so no transaction holds many locks, and returns the number
// of events deleted.
func (s *Store) DeleteEventsOfRunsClosedBefore(ctx context.Context, t time.Time) (int64, error) {
	var total int64
	for {
		var events, runs int64
		err := s.Pool.QueryRow(ctx, `
			WITH doomed AS (
				SELECT run_id FROM runs
				WHERE finished_at < $1 AND events_deleted_at IS NULL
				ORDER BY finished_at
				LIMIT 100
				FOR UPDATE SKIP LOCKED
			), del AS (
				DELETE FROM run_events e USING doomed d WHERE e.run_id = d.run_id RETURNING 1
			), marked AS (
				UPDATE runs r SET events_deleted_at = now(), updated_at = now()
				FROM doomed d WHERE r.run_id = d.run_id RETURNING 1
			)
			SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM marked)`, t).Scan(&events, &runs)
		if err != nil {
			return total, fmt.Errorf("store: delete events: %w", err)
		}
		total += events
		if runs == 0 {
			return total, nil
		}
	}
}
