// Package catalog is the action catalog: Go actions registered with a
// contract and a handler, published to PostgreSQL by the worker, and pinned
// by publication. This file holds the built-in contracts.
package catalog

import (
	"encoding/json"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/graph"
)

// Idempotency modes of an action contract.
const (
	IdempotencyNone   = "none"   // reads: safe to repeat
	IdempotencyLedger = "ledger" // writes: keyed (tenant, run, node) through a ledger
)

// Built-in action contracts (SPEC §7).
var (
	EchoV1 = graph.ActionContract{
		ID: "core.echo", Version: 1, Risk: graph.RiskRead,
		Description:  "Returns its input unchanged.",
		InputSchema:  json.RawMessage(`{}`),
		OutputSchema: json.RawMessage(`{}`),
		TimeoutMs:    10000, Idempotency: IdempotencyNone,
		RequiredPermissions: []string{},
	}
	SleepV1 = graph.ActionContract{
		ID: "core.sleep", Version: 1, Risk: graph.RiskRead,
		Description:  "Sleeps for ms milliseconds, heartbeating and honouring cancellation; returns {sleptMs}.",
		InputSchema:  json.RawMessage(`{"type":"object","required":["ms"],"properties":{"ms":{"type":"integer","minimum":0,"maximum":600000}},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","required":["sleptMs"],"properties":{"sleptMs":{"type":"integer"}}}`),
		TimeoutMs:    600000, Idempotency: IdempotencyNone,
		RequiredPermissions: []string{},
	}
	FailV1 = graph.ActionContract{
		ID: "core.fail", Version: 1, Risk: graph.RiskRead,
		Description:  "Fails every attempt before untilAttempt, then returns value: for drills and retry demos.",
		InputSchema:  json.RawMessage(`{"type":"object","required":["untilAttempt"],"properties":{"untilAttempt":{"type":"integer","minimum":1},"value":{}},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{}`),
		TimeoutMs:    10000, Idempotency: IdempotencyNone,
		RequiredPermissions: []string{},
	}
	NotesWriteV1 = graph.ActionContract{
		ID: "workspace.notes.write", Version: 1, Risk: graph.RiskWorkspaceWrite,
		Description:  "Writes a tenant-owned note {title, body}; exactly once per (tenant, run, node).",
		InputSchema:  json.RawMessage(`{"type":"object","required":["title","body"],"properties":{"title":{"type":"string","maxLength":200},"body":{}},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","required":["noteId"],"properties":{"noteId":{"type":"string"}}}`),
		TimeoutMs:    10000, Idempotency: IdempotencyLedger,
		RequiredPermissions: []string{auth.ScopeNotesWrite},
	}
	HTTPFetchV1 = graph.ActionContract{
		ID: "core.http.fetch", Version: 1, Risk: graph.RiskExternal,
		Description:  "Fetches a URL. External risk: publication refuses it; kept to prove the rule.",
		InputSchema:  json.RawMessage(`{"type":"object","required":["url"],"properties":{"url":{"type":"string"}},"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{}`),
		TimeoutMs:    30000, Idempotency: IdempotencyNone,
		RequiredPermissions: []string{},
	}
)

// BuiltinContracts returns the built-in contracts in a stable order.
func BuiltinContracts() []graph.ActionContract {
	return []graph.ActionContract{EchoV1, SleepV1, FailV1, NotesWriteV1, HTTPFetchV1}
}
