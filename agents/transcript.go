package agents

import (
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/store"
)

// TranscriptVersion is the version of the Transcript layout.
const TranscriptVersion = 1

// Transcript is one agent node's progress in one run, saved to PostgreSQL
// under (tenant, run, node) after every model turn and tool call. A later
// attempt loads it and continues: settled tool calls are never run or asked
// for again, and a final answer is never asked for again.
type Transcript struct {
	Version int `json:"version"`
	// Agent is key@revision and Hash its content hash.
	Agent    string `json:"agent"`
	Hash     string `json:"hash"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	// Skills are the tenant skill revisions (key@revision) whose texts the
	// system message carries, in the order they were appended.
	Skills []string `json:"skills,omitempty"`
	// Messages are what the model has seen and said: the resolved
	// instructions (system), the call input (user), assistant turns and
	// tool results.
	Messages []provider.Message `json:"messages"`
	// Turns records every model call.
	Turns []TurnRecord `json:"turns"`
	// Calls records every tool call by ordinal (Calls[i].Ordinal == i+1).
	Calls []CallRecord `json:"calls"`
	// Final is the final answer once the model gave it.
	Final *Final `json:"final,omitempty"`
}

// TurnRecord is one model call.
type TurnRecord struct {
	Turn       int            `json:"turn"`
	Attempt    int            `json:"attempt"`
	Model      string         `json:"model,omitempty"`
	ToolCalls  int            `json:"toolCalls"`
	Final      bool           `json:"final"`
	Usage      provider.Usage `json:"usage"`
	DurationMs int64          `json:"durationMs"`
}

// Call statuses.
const (
	CallPending   = "pending"
	CallCompleted = "completed"
	CallFailed    = "failed"
	CallDenied    = "denied"
)

// CallRecord is one tool call. Ordinal numbers the node's calls from 1; it
// keys the call's events and its ledger entry, so it is the same on every
// attempt.
type CallRecord struct {
	Ordinal int `json:"ordinal"`
	Turn    int `json:"turn"`
	// CallID is the provider's id (audit metadata only).
	CallID string `json:"callId"`
	// Name is the tool as the model named it; Tool the action it resolved
	// to (actionId@version), empty when it resolved to none.
	Name      string `json:"name"`
	Tool      string `json:"tool,omitempty"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
	// Reason is the error code of a denied or failed call.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// LedgerKey is set for mutating calls.
	LedgerKey string `json:"ledgerKey,omitempty"`
	Replayed  bool   `json:"replayed,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// Attempt is the attempt that settled the call.
	Attempt int `json:"attempt,omitempty"`
}

// Final is the model's final answer as it gave it.
type Final struct {
	Turn    int    `json:"turn"`
	Content string `json:"content,omitempty"`
	Refusal string `json:"refusal,omitempty"`
}

// Usage returns the totals of the transcript's model calls.
func (t *Transcript) Usage() store.Usage {
	var u store.Usage
	for _, r := range t.Turns {
		u.Calls++
		u.InputTokens += r.Usage.InputTokens
		u.OutputTokens += r.Usage.OutputTokens
		u.CostUSD += r.Usage.CostUSD
	}
	return u
}

// LedgerKeys returns the ledger keys of the transcript's mutating calls.
func (t *Transcript) LedgerKeys() []string {
	out := []string{}
	for _, c := range t.Calls {
		if c.LedgerKey != "" {
			out = append(out, c.LedgerKey)
		}
	}
	return out
}

// pending returns the first call not settled yet, or nil.
func (t *Transcript) pending() *CallRecord {
	for i := range t.Calls {
		if t.Calls[i].Status == CallPending {
			return &t.Calls[i]
		}
	}
	return nil
}

// LedgerKey is the ledger key of tool call ordinal of a node in a run,
// "<run>/<node>/<ordinal>" (parts path-escaped). It is also the call's
// catalog.Call.IdempotencyKey, so an action with a ledger of its own
// (workspace.notes.write@1) binds the same key.
func LedgerKey(runID, nodeID string, ordinal int) string {
	return url.PathEscape(runID) + "/" + url.PathEscape(nodeID) + "/" + strconv.Itoa(ordinal)
}

// errorResult is the tool message content of a denied or failed call.
func errorResult(code, message string) string {
	b, err := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": message}})
	if err != nil {
		return `{"error":{"code":"` + code + `"}}`
	}
	return string(b)
}
