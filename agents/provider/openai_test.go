package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents/provider"
)

const secretKey = "sk-test-SECRET-0123456789"

// fakeOpenAI is an in-process endpoint speaking the chat-completions
// protocol; answer decides each reply by call number (from 1).
type fakeOpenAI struct {
	t      *testing.T
	calls  atomic.Int32
	answer func(n int, req map[string]any, w http.ResponseWriter)
	last   atomic.Value // map[string]any
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(f.calls.Add(1))
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+secretKey {
		http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
		return
	}
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.last.Store(req)
	f.answer(n, req, w)
}

func completion(message string, prompt, completionTokens int) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":%s,"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		message, prompt, completionTokens, prompt+completionTokens)
}

func newProvider(t *testing.T, f *fakeOpenAI, cfg provider.OpenAIConfig) *provider.OpenAI {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL + "/v1"
	cfg.APIKey = secretKey
	if cfg.Model == "" {
		cfg.Model = "gpt-test"
	}
	p, err := provider.NewOpenAI(cfg)
	require.NoError(t, err)
	return p
}

var request = provider.Request{
	Messages: []provider.Message{
		{Role: provider.RoleSystem, Content: "be brief"},
		{Role: provider.RoleUser, Content: `{"x":1}`},
		{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{{ID: "call_0", Name: "core_echo_v1", Arguments: `{"a":1}`}}},
		{Role: provider.RoleTool, ToolCallID: "call_0", Content: `{"a":1}`},
	},
	Tools: []provider.Tool{
		{Name: "core_echo_v1", Ref: "core.echo@1", Description: "echo", Parameters: json.RawMessage(`{}`)},
		{Name: "workspace_notes_write_v1", Ref: "workspace.notes.write@1", Parameters: json.RawMessage(`{"type":"object","required":["title"],"properties":{"title":{"type":"string"}}}`)},
	},
	OutputSchema: json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`),
}

func TestOpenAIToolCallsUsageAndWireFormat(t *testing.T) {
	t.Parallel()
	f := &fakeOpenAI{answer: func(n int, _ map[string]any, w http.ResponseWriter) {
		_, _ = io.WriteString(w, completion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"workspace_notes_write_v1","arguments":"{\"title\":\"t\"}"}}]}`, 1200, 300))
	}}
	p := newProvider(t, f, provider.OpenAIConfig{Prices: map[string]provider.Price{"gpt-test": {InputPerMTok: 1, OutputPerMTok: 4}}})
	reply, err := p.Turn(context.Background(), request)
	require.NoError(t, err)
	require.Equal(t, []provider.ToolCall{{ID: "call_1", Name: "workspace_notes_write_v1", Arguments: `{"title":"t"}`}}, reply.ToolCalls)
	require.Equal(t, provider.Usage{InputTokens: 1200, OutputTokens: 300, CostUSD: (1200*1 + 300*4) / 1e6, Priced: true}, reply.Usage)

	req := f.last.Load().(map[string]any)
	require.Equal(t, "gpt-test", req["model"])
	require.Equal(t, "auto", req["tool_choice"])
	tools := req["tools"].([]any)
	require.Len(t, tools, 2)
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	require.Equal(t, "core_echo_v1", fn["name"])
	require.Equal(t, map[string]any{"type": "object"}, fn["parameters"], "a function's parameters are always an object schema")
	rf := req["response_format"].(map[string]any)
	require.Equal(t, "json_schema", rf["type"])
	require.Equal(t, "agent_output", rf["json_schema"].(map[string]any)["name"])
	msgs := req["messages"].([]any)
	require.Len(t, msgs, 4)
	asst := msgs[2].(map[string]any)
	require.Nil(t, asst["content"])
	require.Equal(t, "call_0", asst["tool_calls"].([]any)[0].(map[string]any)["id"])
	require.Equal(t, "call_0", msgs[3].(map[string]any)["tool_call_id"])
}

func TestOpenAIFinalAnswerAndUnpricedModel(t *testing.T) {
	t.Parallel()
	f := &fakeOpenAI{answer: func(int, map[string]any, http.ResponseWriter) {}}
	f.answer = func(_ int, _ map[string]any, w http.ResponseWriter) {
		_, _ = io.WriteString(w, completion(`{"role":"assistant","content":"{\"summary\":\"ok\"}"}`, 10, 3))
	}
	p := newProvider(t, f, provider.OpenAIConfig{})
	reply, err := p.Turn(context.Background(), provider.Request{Model: "other", Messages: request.Messages[:2], OutputSchema: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Equal(t, `{"summary":"ok"}`, reply.Content)
	require.Empty(t, reply.ToolCalls)
	require.Equal(t, provider.Usage{InputTokens: 10, OutputTokens: 3}, reply.Usage, "no price: cost 0, not priced")
	req := f.last.Load().(map[string]any)
	require.Equal(t, "other", req["model"], "the revision's model wins over the default")
	require.Equal(t, "json_object", req["response_format"].(map[string]any)["type"], "a non-object output schema")
	require.NotContains(t, req, "tools")
}

func TestOpenAIMalformedRepliesRetryThenFailClosed(t *testing.T) {
	t.Parallel()
	bodies := []string{`not json`, `{"choices":[]}`, `{"choices":[{"message":{"role":"assistant"}}]}`,
		`{"choices":[{"message":{"tool_calls":[{"id":"","function":{"name":"x"}}]}}]}`}
	for _, body := range bodies {
		f := &fakeOpenAI{answer: func(_ int, _ map[string]any, w http.ResponseWriter) { _, _ = io.WriteString(w, body) }}
		p := newProvider(t, f, provider.OpenAIConfig{})
		_, err := p.Turn(context.Background(), request)
		pe, ok := provider.AsError(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, provider.CodeMalformed, pe.Code, body)
		require.False(t, pe.Retryable)
		require.Equal(t, int32(1+provider.DefaultMaxMalformedRetries), f.calls.Load(), "asked again twice, then gave up")
	}

	// One malformed reply, then a good one: the turn succeeds.
	f := &fakeOpenAI{answer: func(n int, _ map[string]any, w http.ResponseWriter) {
		if n == 1 {
			_, _ = io.WriteString(w, `{"choices":`)
			return
		}
		_, _ = io.WriteString(w, completion(`{"role":"assistant","content":"{}"}`, 1, 1))
	}}
	p := newProvider(t, f, provider.OpenAIConfig{})
	reply, err := p.Turn(context.Background(), request)
	require.NoError(t, err)
	require.Equal(t, "{}", reply.Content)
}

func TestOpenAIRateLimits(t *testing.T) {
	t.Parallel()
	// A short Retry-After is waited out inside the call.
	f := &fakeOpenAI{answer: func(n int, _ map[string]any, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "0.2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, completion(`{"role":"assistant","content":"{}"}`, 1, 1))
	}}
	p := newProvider(t, f, provider.OpenAIConfig{})
	start := time.Now()
	_, err := p.Turn(context.Background(), request)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	require.Equal(t, int32(2), f.calls.Load())

	// A long one fails the turn, retryable, carrying the delay.
	f = &fakeOpenAI{answer: func(_ int, _ map[string]any, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"slow down"}}`)
	}}
	p = newProvider(t, f, provider.OpenAIConfig{})
	_, err = p.Turn(context.Background(), request)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, provider.CodeRateLimited, pe.Code)
	require.True(t, pe.Retryable)
	require.Equal(t, 120*time.Second, pe.RetryAfter)
	require.Equal(t, int32(1), f.calls.Load())

	// An HTTP-date Retry-After, within the inline bound, and a wait that
	// would pass the caller's deadline is not attempted.
	f = &fakeOpenAI{answer: func(_ int, _ map[string]any, w http.ResponseWriter) {
		w.Header().Set("Retry-After", time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusTooManyRequests)
	}}
	p = newProvider(t, f, provider.OpenAIConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = p.Turn(ctx, request)
	pe, ok = provider.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, provider.CodeRateLimited, pe.Code)
	require.Greater(t, pe.RetryAfter, time.Second)
	require.Equal(t, int32(1), f.calls.Load())
}

func TestOpenAIServerErrorsRefusalsAndScrubbing(t *testing.T) {
	t.Parallel()
	f := &fakeOpenAI{answer: func(_ int, _ map[string]any, w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "upstream down")
	}}
	p := newProvider(t, f, provider.OpenAIConfig{})
	_, err := p.Turn(context.Background(), request)
	pe, ok := provider.AsError(err)
	require.True(t, ok)
	require.Equal(t, provider.CodeUnavailable, pe.Code)
	require.True(t, pe.Retryable)
	require.Equal(t, http.StatusBadGateway, pe.Status)

	// A refusal whose body echoes the key: the error never carries it.
	f = &fakeOpenAI{answer: func(_ int, _ map[string]any, w http.ResponseWriter) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+secretKey+`"}}`)
	}}
	p = newProvider(t, f, provider.OpenAIConfig{})
	_, err = p.Turn(context.Background(), request)
	pe, ok = provider.AsError(err)
	require.True(t, ok)
	require.Equal(t, provider.CodeRefused, pe.Code)
	require.False(t, pe.Retryable)
	require.NotContains(t, err.Error(), secretKey)
	require.Contains(t, err.Error(), "[REDACTED]")

	// Neither formatting nor logging the provider shows the key.
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("provider", "p", p, "err", err)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v %s", p, p, p, p), logs.String()} {
		require.NotContains(t, s, secretKey)
	}

	_, err = provider.NewOpenAI(provider.OpenAIConfig{BaseURL: "http://x"})
	require.Error(t, err, "a key is required")
	p, err = provider.NewOpenAI(provider.OpenAIConfig{BaseURL: "http://127.0.0.1:1", APIKey: "k"})
	require.NoError(t, err)
	_, err = p.Turn(context.Background(), request)
	pe, ok = provider.AsError(err)
	require.True(t, ok)
	require.Equal(t, provider.CodeNotConfigured, pe.Code, "no model anywhere")
}

func TestOpenAITimeoutsHonourTheContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := &fakeOpenAI{answer: func(_ int, _ map[string]any, w http.ResponseWriter) { <-release }}
	p := newProvider(t, f, provider.OpenAIConfig{})
	t.Cleanup(func() { close(release) }) // before the server's Close, which waits for handlers

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Turn(ctx, request)
	require.Less(t, time.Since(start), 2*time.Second)
	pe, ok := provider.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, provider.CodeTimeout, pe.Code)
	require.True(t, pe.Retryable)

	// The caller's cancellation is returned as is (the attempt was cancelled).
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = p.Turn(ctx, request)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
}

func TestParsePrices(t *testing.T) {
	t.Parallel()
	got, err := provider.ParsePrices(" gpt-4o-mini=0.15,0.60; meta/llama:8b=1,2 ;")
	require.NoError(t, err)
	require.Equal(t, map[string]provider.Price{"gpt-4o-mini": {0.15, 0.6}, "meta/llama:8b": {1, 2}}, got)
	for _, bad := range []string{"x", "x=1", "x=a,b", "=1,2", "x=-1,2"} {
		_, err := provider.ParsePrices(bad)
		require.Error(t, err, bad)
	}
	empty, err := provider.ParsePrices("")
	require.NoError(t, err)
	require.Empty(t, empty)
}

func TestSimPlaysScriptThenAnswers(t *testing.T) {
	t.Parallel()
	script := &provider.SimScript{ToolCalls: []provider.SimToolCall{{Tool: "core.echo@1", Input: json.RawMessage(`{ "a" : 1 }`)}, {Tool: "x.y@2"}}}
	req := provider.Request{Messages: slices.Clone(request.Messages[:2]), Sim: script,
		OutputSchema: json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`)}
	r1, err := provider.Sim{}.Turn(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, []provider.ToolCall{{ID: "sim-call-1", Name: "core.echo@1", Arguments: `{"a":1}`}, {ID: "sim-call-2", Name: "x.y@2", Arguments: `{}`}}, r1.ToolCalls)
	require.Positive(t, r1.Usage.InputTokens)

	req.Messages = append(req.Messages, provider.Message{Role: provider.RoleAssistant, ToolCalls: r1.ToolCalls})
	r2, err := provider.Sim{}.Turn(context.Background(), req)
	require.NoError(t, err)
	require.Empty(t, r2.ToolCalls)
	require.JSONEq(t, `{"summary":"sample"}`, r2.Content, "schema-valid default")

	req.Decision = true
	req.OutputSchema = json.RawMessage(`{"type":"object","required":["outcome"],"properties":{"outcome":{"enum":["pass","fail"]}}}`)
	r3, err := provider.Sim{}.Turn(context.Background(), req)
	require.NoError(t, err)
	require.JSONEq(t, `{"outcome":"pass"}`, r3.Content, "decisions default to pass")
	script.Outcome = "fail"
	script.Output = json.RawMessage(`{"reason":"no","outcome":"pass"}`)
	r4, err := provider.Sim{}.Turn(context.Background(), req)
	require.NoError(t, err)
	require.JSONEq(t, `{"reason":"no","outcome":"fail"}`, r4.Content, "sim.outcome wins")

	_, err = provider.Sim{}.Turn(context.Background(), provider.Request{OutputSchema: json.RawMessage(`{"type":"string","pattern":"^[0-9]{3}$"}`)})
	pe, ok := provider.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, provider.CodeNoDefault, pe.Code)
	require.True(t, strings.Contains(pe.Message, "sim.output"))
}
