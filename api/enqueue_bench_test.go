package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/internal/testinfra/inproc"
	"github.com/weftworks/weft/starter"
)

func TestMain(m *testing.M) { testinfra.Main(m) }

// enqueueBenchGraph is a two-action chain, its input any JSON.
const enqueueBenchGraph = `{"schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "e1", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "e2", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.echo", "version": 1}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}],
  "edges": [{"from": "in.out", "to": "e1.in"}, {"from": "e1.out", "to": "e2.in"}, {"from": "e2.out", "to": "out.in"}]}`

var enqueueBenchInput = json.RawMessage(`{"text":"hello from weftbench","n":42}`)

// BenchmarkEnqueueThroughAPI is one enqueue through the API, in process
// as weftbench's enqueue section serves it (httptest request and
// recorder, the token checked, the starter's reads, statement and
// Temporal start onto a queue no worker polls), against the raw SDK
// start of the same input beside it ("sdk"). Its B/op and allocs/op are
// this process's share of an enqueue (issue 14: bytes per run); the time
// is mostly the database's and the dev server's.
//
//	go test ./api -run '^$' -bench EnqueueThroughAPI -benchmem
func BenchmarkEnqueueThroughAPI(b *testing.B) {
	st := testinfra.NewStore(b)
	_, tc := testinfra.SharedClient(b)
	keys := testinfra.Keys(b, "enqueue-bench-secret-0123456789ab")
	logger := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	queue := "enqueue-bench-" + uuid.NewString()
	runs := inproc.Starter(b, starter.Deps{Store: st, Temporal: tc, TaskQueue: queue, Logger: logger})
	e := inproc.API(b, api.Deps{Config: config.Config{TaskQueue: queue}, Store: st, Keys: keys, Temporal: tc,
		Logger: logger, Starter: runs})
	tenant := "t-" + uuid.NewString()
	token := testinfra.Token(b, keys, tenant, "bench", auth.AllScopes...)
	do := func(path string, body any) (int, []byte) {
		raw, err := json.Marshal(body)
		if err != nil {
			b.Fatal(err)
		}
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, path, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes()
	}
	if code, body := do("/v1/workflows", map[string]any{"key": "chain2", "graph": json.RawMessage(enqueueBenchGraph)}); code != http.StatusCreated {
		b.Fatalf("create: %d %s", code, body)
	}
	if code, body := do("/v1/workflows/chain2/publish", map[string]any{"expectedRevision": 1}); code != http.StatusCreated {
		b.Fatalf("publish: %d %s", code, body)
	}
	// Each call of a sub-benchmark (one per -count) takes keys and
	// workflow ids of its own: a repeated idempotency key is a replay
	// (200, not a new run), and a repeated workflow id a start the SDK
	// answers with the running workflow, neither of them an enqueue.
	b.Run("api", func(b *testing.B) {
		run := uuid.NewString()[:8]
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			code, body := do("/v1/workflows/chain2/runs", map[string]any{"input": enqueueBenchInput,
				"idempotencyKey": fmt.Sprintf("%s-%d", run, i)})
			if code != http.StatusAccepted {
				b.Fatalf("enqueue: %d %s", code, body)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		run := uuid.NewString()[:8]
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, err := tc.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
				ID: fmt.Sprintf("sdk-%s-%d", run, i), TaskQueue: queue}, "bench-hand-chain", enqueueBenchInput)
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
