package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
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

// ErrEventsDeleted is returned by VerifyChain for a run whose events
// retention deleted: there is nothing left to verify.
var ErrEventsDeleted = errors.New("store: the run's events were deleted by retention")

// preparedEvent is a draft after validation, redaction and bounding.
type preparedEvent struct {
	key, typ, nodeID string
	attempt          int
	at               time.Time
	data             []byte // canonical JSON
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
	prepared, err := prepareEvents(events)
	if err != nil {
		return false, err
	}
	if upd != nil && upd.Status != "" && statusRank(upd.Status) < 0 {
		return false, failure.New(failure.CodeInvalidRequest, "run update status %q is unknown", upd.Status)
	}
	applied := true
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		applied, err = appendInTx(ctx, tx, tenantID, runID, prepared, upd, projectionTime(events), onlyIfActive)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: append events to run %s: %w", runID, err)
	}
	return applied, nil
}

// appendInTx appends prepared events and applies upd inside tx, under the
// run's row lock (see AppendEvents). With onlyIfActive it does nothing and
// reports false when the run is already terminal.
func appendInTx(ctx context.Context, tx pgx.Tx, tenantID, runID string, prepared []preparedEvent, upd *execution.RunUpdate, at *time.Time, onlyIfActive bool) (bool, error) {
	var lastSeq int64
	var lastHash, status, mode string
	err := tx.QueryRow(ctx, `SELECT last_seq, last_hash, status, mode FROM runs
		WHERE run_id = $1 AND tenant_id = $2 FOR UPDATE`, runID, tenantID).Scan(&lastSeq, &lastHash, &status, &mode)
	if err != nil {
		return false, notFound(err)
	}
	if onlyIfActive && terminalStatus(status) {
		return false, nil
	}
	fresh, err := withoutExisting(ctx, tx, runID, prepared)
	if err != nil {
		return false, err
	}
	if len(fresh) > 0 {
		batch := &pgx.Batch{}
		for _, e := range fresh {
			lastSeq++
			h, err := eventHash(runID, lastSeq, execution.EventSchemaVersion, e.typ, e.at, e.nodeID, e.attempt, e.data, lastHash)
			if err != nil {
				return false, err
			}
			batch.Queue(`INSERT INTO run_events (run_id, tenant_id, seq, event_key, type, schema_version, at,
					node_id, attempt, data, prev_hash, hash)
				VALUES ($1, $2, $3, $4, $5, $6, $7, NULLIF($8, ''), NULLIF($9, 0), $10, $11, $12)`,
				runID, tenantID, lastSeq, e.key, e.typ, execution.EventSchemaVersion, e.at,
				e.nodeID, e.attempt, e.data, lastHash, h)
			lastHash = h
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return false, fmt.Errorf("insert events: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE runs SET last_seq = $2, last_hash = $3, updated_at = now()
			WHERE run_id = $1`, runID, lastSeq, lastHash); err != nil {
			return false, err
		}
		// Delivered at commit, never for a rolled-back batch: wakes the
		// event streams of this run (EventFeed) in every API process.
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, EventsChannel, runID); err != nil {
			return false, fmt.Errorf("notify: %w", err)
		}
	}
	return true, applyRunUpdate(ctx, tx, tenantID, runID, status, mode, upd, at)
}

// prepareEvents validates drafts, drops repeated keys within the batch (the
// first wins, as it would across batches) and redacts and bounds their data.
func prepareEvents(drafts []execution.EventDraft) ([]preparedEvent, error) {
	out := make([]preparedEvent, 0, len(drafts))
	seen := make(map[string]bool, len(drafts))
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
		data, err := EvidenceData(d.Data)
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

// withoutExisting drops the events whose key the run already holds.
func withoutExisting(ctx context.Context, tx pgx.Tx, runID string, events []preparedEvent) ([]preparedEvent, error) {
	if len(events) == 0 {
		return nil, nil
	}
	keys := make([]string, len(events))
	for i, e := range events {
		keys[i] = e.key
	}
	rows, err := tx.Query(ctx, `SELECT event_key FROM run_events WHERE run_id = $1 AND event_key = ANY($2)`, runID, keys)
	if err != nil {
		return nil, err
	}
	existing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if len(existing) == 0 {
		return events, nil
	}
	have := make(map[string]bool, len(existing))
	for _, k := range existing {
		have[k] = true
	}
	out := events[:0:0]
	for _, e := range events {
		if !have[e.key] {
			out = append(out, e)
		}
	}
	return out, nil
}

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
	switch s {
	case execution.StatusThrottled:
		return 0
	case execution.StatusQueued:
		return 1
	case execution.StatusRunning:
		return 2
	case execution.StatusSucceeded, execution.StatusFailed, execution.StatusCancelled:
		return rankTerminal
	}
	return -1
}

// rankTerminal is the rank of succeeded, failed and cancelled.
const rankTerminal = 3

// terminalStatus reports whether s is final.
func terminalStatus(s string) bool { return statusRank(s) == rankTerminal }

// holdsSlot reports whether a run in status s holds a slot under its
// limits: admitted (queued) or running, and not yet settled.
func holdsSlot(s string) bool {
	return s == execution.StatusQueued || s == execution.StatusRunning
}

// applyRunUpdate applies the forward-only status projection: throttled →
// queued → running → succeeded|failed|cancelled. A terminal run ignores
// every update, and output/error are written only by the transition into a
// terminal status. The transition of a run that held a slot into a
// terminal status releases that slot (slots are counted from statuses) and
// wakes the dispatchers of its tenant (SlotsChannel) when runs wait for one.
func applyRunUpdate(ctx context.Context, tx pgx.Tx, tenantID, runID, current, mode string, upd *execution.RunUpdate, at *time.Time) error {
	if upd == nil || upd.Status == "" {
		return nil
	}
	from, to := statusRank(current), statusRank(upd.Status)
	if from == rankTerminal || to <= from {
		return nil
	}
	if upd.Status == execution.StatusQueued {
		// Only the dispatcher admits a throttled run (admit, limits.go).
		return nil
	}
	if to < rankTerminal {
		_, err := tx.Exec(ctx, `UPDATE runs SET status = $2, started_at = COALESCE(started_at, $3::timestamptz, now()), updated_at = now()
			WHERE run_id = $1`, runID, upd.Status, at)
		return err
	}
	var output, runErr []byte
	if upd.Output != nil {
		v, err := valueJSON(ctx, tx, tenantID, runID, *upd.Output)
		if err != nil {
			return err
		}
		output = v
	}
	if upd.Error != nil {
		b, err := json.Marshal(upd.Error)
		if err != nil {
			return err
		}
		runErr = b
	}
	_, err := tx.Exec(ctx, `UPDATE runs SET status = $2, finished_at = COALESCE($3::timestamptz, now()), output = $4, error = $5,
			updated_at = now()
		WHERE run_id = $1`, runID, upd.Status, at, output, runErr)
	if err != nil {
		return err
	}
	if holdsSlot(current) && mode == string(execution.ModeLive) {
		return notifySlotFreed(ctx, tx, tenantID)
	}
	return nil
}

// eventHash is hex sha256(prevHash || canonical(event)), where the event is
// {runId, seq, type, schemaVersion, at, nodeId, attempt, data} with `at` in
// RFC 3339 with exactly six fractional digits, in UTC.
func eventHash(runID string, seq int64, schemaVersion int, typ string, at time.Time, nodeID string, attempt int, data []byte, prevHash string) (string, error) {
	c, err := graph.Canonical(struct {
		RunID         string          `json:"runId"`
		Seq           int64           `json:"seq"`
		Type          string          `json:"type"`
		SchemaVersion int             `json:"schemaVersion"`
		At            string          `json:"at"`
		NodeID        string          `json:"nodeId"`
		Attempt       int             `json:"attempt"`
		Data          json.RawMessage `json:"data"`
	}{runID, seq, typ, schemaVersion, at.UTC().Format("2006-01-02T15:04:05.000000Z07:00"), nodeID, attempt, data})
	if err != nil {
		return "", err
	}
	return graph.SHA256Hex(append([]byte(prevHash), c...)), nil
}

// EvidenceData turns event data into what may be stored as evidence: valid
// JSON (empty becomes {}), every sensitive key's value replaced by
// "[REDACTED]" at any depth, NUL characters (which jsonb cannot hold)
// replaced by U+FFFD, canonical (RFC 8785), and at most MaxEventDataBytes —
// larger data becomes {"truncated": true, "size": N, "preview": "..."} where
// N is the canonical size and preview its first ~7 KiB. Tool harnesses use it
// to bound their outputs the same way.
func EvidenceData(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte(`{}`), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // keep numbers as written until canonicalisation
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("data is not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("data holds more than one JSON value")
	}
	c, err := graph.Canonical(sanitize(v))
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	if len(c) <= MaxEventDataBytes {
		return c, nil
	}
	return truncated(c)
}

// sanitize redacts sensitive keys and replaces NUL characters, recursively.
func sanitize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
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

// VerifyChain recomputes every event hash of the run from the stored rows
// and checks seq is 1..last_seq without gaps and the chain ends at the run's
// last hash. The first mismatch is a *ChainError naming its seq. A run whose
// events retention deleted is ErrEventsDeleted.
func (s *Store) VerifyChain(ctx context.Context, tenantID, runID string) error {
	var lastSeq int64
	var lastHash string
	var deletedAt *time.Time
	err := s.Pool.QueryRow(ctx, `SELECT last_seq, last_hash, events_deleted_at FROM runs WHERE run_id = $1 AND tenant_id = $2`,
		runID, tenantID).Scan(&lastSeq, &lastHash, &deletedAt)
	if err != nil {
		return notFound(err)
	}
	if deletedAt != nil {
		return ErrEventsDeleted
	}
	rows, err := s.Pool.Query(ctx, `SELECT seq, type, schema_version, at, COALESCE(node_id, ''), COALESCE(attempt, 0),
			data, prev_hash, hash
		FROM run_events WHERE run_id = $1 AND tenant_id = $2 ORDER BY seq`, runID, tenantID)
	if err != nil {
		return fmt.Errorf("store: verify chain: %w", err)
	}
	defer rows.Close()
	var seq int64
	prev := ""
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return fmt.Errorf("store: verify chain: %w", err)
		}
		seq++
		broken := func(reason string) error { return &ChainError{RunID: runID, Seq: e.Seq, Reason: reason} }
		if e.Seq != seq {
			return &ChainError{RunID: runID, Seq: seq, Reason: fmt.Sprintf("missing; found seq %d instead", e.Seq)}
		}
		if e.PrevHash != prev {
			return broken("prevHash does not match the previous event's hash")
		}
		h, err := eventHash(runID, e.Seq, e.SchemaVersion, e.Type, e.At, e.NodeID, e.Attempt, e.Data, prev)
		if err != nil {
			return broken(err.Error())
		}
		if h != e.Hash {
			return broken("content does not match its hash")
		}
		prev = h
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: verify chain: %w", err)
	}
	if seq != lastSeq {
		return &ChainError{RunID: runID, Seq: seq + 1, Reason: fmt.Sprintf("missing; the run's last seq is %d", lastSeq)}
	}
	if prev != lastHash {
		return &ChainError{RunID: runID, Seq: seq, Reason: "the run's last hash does not match the chain"}
	}
	return nil
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
