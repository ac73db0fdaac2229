package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

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
	return []catalog.Action{{Contract: slowNoteV1, Handler: slowNote}, {Contract: dieAfterReplyV1, Handler: dieAfterReply}}
}

// dieAfterReplyV1 answers its input, then — when the marker file
// WEFT_E2E_DIE_MARKER names does not exist yet — creates it and SIGKILLs
// its own worker process ms after answering: the drill of a worker lost
// between an attempt's completion and the append of what follows it.
var dieAfterReplyV1 = graph.ActionContract{
	ID: "drill.dieAfterReply", Version: 1, Risk: graph.RiskRead,
	Description:  "Returns its input, then kills its worker once (the crash drills).",
	InputSchema:  json.RawMessage(`{"type":"object","required":["ms"],"properties":{"ms":{"type":"integer"}}}`),
	OutputSchema: json.RawMessage(`{}`),
	TimeoutMs:    10000, Idempotency: catalog.IdempotencyNone,
	RequiredPermissions: []string{},
}

// dieMarkerEnv names the marker file of dieAfterReplyV1.
const dieMarkerEnv = "WEFT_E2E_DIE_MARKER"

func dieAfterReply(_ context.Context, call catalog.Call) (json.RawMessage, error) {
	var in struct {
		Ms int64 `json:"ms"`
	}
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, err
	}
	if marker := os.Getenv(dieMarkerEnv); marker != "" {
		if f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
			_ = f.Close()
			go func() {
				time.Sleep(time.Duration(in.Ms) * time.Millisecond)
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}()
		}
	}
	return call.Input, nil
}
