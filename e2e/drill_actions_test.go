package e2e

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// slowNoteV1 is the outage drill's action: it naps, then writes a note
// exactly as workspace.notes.write does, so an outage that starts during
// the nap meets the write.
var slowNoteV1 = graph.ActionContract{
	ID: "drill.slowNote", Version: 1, Risk: graph.RiskWorkspaceWrite,
	Description:  "Sleeps ms, then writes a note {title, body} (the PostgreSQL outage drill).",
	InputSchema:  json.RawMessage(`{"type":"object","required":["ms","title","body"],"properties":{"ms":{"type":"integer"},"title":{"type":"string"},"body":{}},"additionalProperties":false}`),
	OutputSchema: json.RawMessage(`{"type":"object","required":["noteId"],"properties":{"noteId":{"type":"string"}}}`),
	TimeoutMs:    30000, Idempotency: catalog.IdempotencyLedger,
	RequiredPermissions: []string{auth.ScopeNotesWrite},
}

// drillActions are registered by the helper worker processes beside the
// built-ins: slowNoteV1, made of core.sleep and workspace.notes.write.
func drillActions(st *store.Store) []catalog.Action {
	handlers := map[string]catalog.Handler{}
	for _, a := range catalog.Builtins(catalog.BuiltinDeps{Notes: st}) {
		handlers[a.Contract.ID] = a.Handler
	}
	sleep, write := handlers[catalog.SleepV1.ID], handlers[catalog.NotesWriteV1.ID]
	slowNote := func(ctx context.Context, call catalog.Call) (json.RawMessage, error) {
		var in struct {
			Ms    int64           `json:"ms"`
			Title string          `json:"title"`
			Body  json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(call.Input, &in); err != nil {
			return nil, fmt.Errorf("drill.slowNote input: %w", err)
		}
		nap := call
		nap.Input, _ = json.Marshal(map[string]int64{"ms": in.Ms})
		if _, err := sleep(ctx, nap); err != nil {
			return nil, err
		}
		note := call
		note.Input, _ = json.Marshal(map[string]any{"title": in.Title, "body": in.Body})
		return write(ctx, note)
	}
	return []catalog.Action{{Contract: slowNoteV1, Handler: slowNote}}
}
