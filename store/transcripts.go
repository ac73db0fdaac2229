package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
)

// CodeStaleAttempt refuses a transcript save from an attempt older than
// the one that saved last (a zombie attempt of a lost worker).
const CodeStaleAttempt = "STALE_ATTEMPT"

// AgentTranscript is one agent node's saved progress in a run.
type AgentTranscript struct {
	TenantID      string
	RunID         string
	NodeID        string
	AgentKey      string
	AgentRevision int
	// Attempt is the attempt that saved it; a save from an older attempt is
	// refused (STALE_ATTEMPT), so a lost worker cannot overwrite progress.
	Attempt int
	// Dispatch is the attempt's re-dispatch count (infrastructure faults);
	// within one attempt, a save from an earlier dispatch is stale too.
	Dispatch int
	// Turn counts completed model turns.
	Turn int
	// Transcript is the agents package's transcript JSON.
	Transcript json.RawMessage
	// LedgerKeys are the ledger keys of the node's mutating tool calls.
	LedgerKeys []string
	// Outbox holds the events of the step this save records. They are
	// saved atomically with the transcript and appended (idempotently, by
	// event key) right after; a resumed attempt appends them again first,
	// so a crash between the two never loses a completed step's evidence.
	Outbox    []execution.EventDraft
	UpdatedAt time.Time
}

// GetAgentTranscript returns the saved transcript of (tenant, run, node), or
// failure.ErrNotFound before the node's first save.
func (s *Store) GetAgentTranscript(ctx context.Context, tenantID, runID, nodeID string) (AgentTranscript, error) {
	t := AgentTranscript{TenantID: tenantID, RunID: runID, NodeID: nodeID}
	var raw []byte
	err := s.Pool.QueryRow(ctx, `SELECT agent_key, agent_revision, attempt, turn, transcript, ledger_keys, updated_at
		FROM agent_transcripts WHERE tenant_id = $1 AND run_id = $2 AND node_id = $3`, tenantID, runID, nodeID).
		Scan(&t.AgentKey, &t.AgentRevision, &t.Attempt, &t.Turn, &raw, &t.LedgerKeys, &t.UpdatedAt)
	if err != nil {
		return AgentTranscript{}, fmt.Errorf("store: agent transcript: %w", notFound(err))
	}
	var env transcriptEnvelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return AgentTranscript{}, fmt.Errorf("store: agent transcript: %w", err)
	}
	t.Transcript, t.Outbox = env.Transcript, env.Outbox
	if t.LedgerKeys == nil {
		t.LedgerKeys = []string{}
	}
	return t, nil
}

// transcriptEnvelope is the stored jsonb: the transcript and the outbox.
type transcriptEnvelope struct {
	Transcript json.RawMessage        `json:"transcript"`
	Outbox     []execution.EventDraft `json:"outbox,omitempty"`
}

// SaveAgentTranscript saves t (insert or replace) and, in the same
// transaction, adds usage (may be nil) to the run's totals and settles the
// budget reservation of turn t.Turn (ReserveBudget) with it. A save from an
// attempt older than the stored one (or an earlier dispatch of the same
// attempt) is refused with STALE_ATTEMPT and
// changes nothing. Append t.Outbox with AppendEvents afterwards.
func (s *Store) SaveAgentTranscript(ctx context.Context, t AgentTranscript, usage *Usage) error {
	if t.TenantID == "" || t.RunID == "" || t.NodeID == "" || t.Attempt < 1 || !json.Valid(t.Transcript) {
		return failure.New(failure.CodeInvalidRequest, "tenant, run, node, attempt and a JSON transcript are required")
	}
	env, err := json.Marshal(transcriptEnvelope{Transcript: t.Transcript, Outbox: t.Outbox})
	if err != nil {
		return err
	}
	keys := t.LedgerKeys
	if keys == nil {
		keys = []string{}
	}
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO agent_transcripts (tenant_id, run_id, node_id, agent_key, agent_revision,
				attempt, dispatch, turn, transcript, ledger_keys)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
			ON CONFLICT (tenant_id, run_id, node_id) DO UPDATE SET
				agent_key = EXCLUDED.agent_key, agent_revision = EXCLUDED.agent_revision, attempt = EXCLUDED.attempt,
				dispatch = EXCLUDED.dispatch, turn = EXCLUDED.turn, transcript = EXCLUDED.transcript,
				ledger_keys = EXCLUDED.ledger_keys, updated_at = now()
			WHERE (agent_transcripts.attempt, agent_transcripts.dispatch) <= (EXCLUDED.attempt, EXCLUDED.dispatch)`,
			t.TenantID, t.RunID, t.NodeID, t.AgentKey, t.AgentRevision, t.Attempt, t.Dispatch, t.Turn, env, keys)
		if isUnstorableJSON(err) {
			return failure.Wrap(err, failure.CodeInvalidRequest, "the transcript cannot be stored: %s", pgMessage(err))
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return failure.New(CodeStaleAttempt, "attempt %d of node %q is stale: a later attempt saved its transcript", t.Attempt, t.NodeID)
		}
		if usage == nil {
			return nil
		}
		// The turn's budget reservation (if any) settles with the usage
		// it records, so what is spent is never counted twice.
		if err := settleReservation(ctx, tx, t, *usage); err != nil {
			return err
		}
		return addUsage(ctx, tx, t.TenantID, t.RunID, *usage)
	})
	if err != nil {
		return fmt.Errorf("store: save agent transcript: %w", err)
	}
	return nil
}
