package provider_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents/provider"
)

// A call's output-token limit reaches the endpoint: max_completion_tokens
// by default, max_tokens when configured for older compatible servers, and
// nothing without a limit.
func TestOpenAISendsTheOutputTokenLimit(t *testing.T) {
	t.Parallel()
	answer := func(_ int, _ map[string]any, w http.ResponseWriter) {
		_, _ = io.WriteString(w, completion(`{"role":"assistant","content":"{\"summary\":\"ok\"}"}`, 10, 3))
	}
	for _, c := range []struct {
		field, want, absent string
	}{
		{"", "max_completion_tokens", "max_tokens"},
		{provider.MaxCompletionTokensField, "max_completion_tokens", "max_tokens"},
		{provider.MaxTokensField, "max_tokens", "max_completion_tokens"},
	} {
		f := &fakeOpenAI{answer: answer}
		p := newProvider(t, f, provider.OpenAIConfig{MaxTokensField: c.field})
		req := request
		req.MaxOutputTokens = 1234
		_, err := p.Turn(context.Background(), req)
		require.NoError(t, err)
		got := f.last.Load().(map[string]any)
		require.Equal(t, 1234.0, got[c.want], c.field)
		require.NotContains(t, got, c.absent)

		req.MaxOutputTokens = 0
		_, err = p.Turn(context.Background(), req)
		require.NoError(t, err)
		got = f.last.Load().(map[string]any)
		require.NotContains(t, got, "max_tokens")
		require.NotContains(t, got, "max_completion_tokens")
	}
	_, err := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: "http://x", APIKey: "k", MaxTokensField: "max_output"})
	require.ErrorContains(t, err, "max tokens field")
}

// openai estimates the input and prices the model the turn asks for.
func TestOpenAIEstimate(t *testing.T) {
	t.Parallel()
	p := newProvider(t, &fakeOpenAI{}, provider.OpenAIConfig{Prices: map[string]provider.Price{"gpt-test": {InputPerMTok: 1, OutputPerMTok: 4}}})
	est := p.Estimate(request)
	require.Equal(t, provider.EstimateInputTokens(request), est.InputTokens)
	require.Positive(t, est.InputTokens)
	require.Zero(t, est.OutputTokens, "a model's reply size is unknown")
	require.Nil(t, est.CostUSD)
	require.Equal(t, &provider.Price{InputPerMTok: 1, OutputPerMTok: 4}, est.Price)
	other := request
	other.Model = "unpriced"
	require.Nil(t, p.Estimate(other).Price)
	// More to send, more tokens.
	longer := request
	longer.Messages = append(append([]provider.Message{}, request.Messages...), provider.Message{Role: provider.RoleUser, Content: string(make([]byte, 4000))})
	require.GreaterOrEqual(t, provider.EstimateInputTokens(longer), est.InputTokens+1000, "a token per 4 bytes at least")
}

// sim.usage is what every sim turn reports; the estimate is exactly that;
// a limit below the reply's size cuts it as a model's would be.
func TestSimDeclaredUsageEstimateAndLimit(t *testing.T) {
	t.Parallel()
	script := &provider.SimScript{Output: json.RawMessage(`{"summary":"a fairly long answer"}`),
		Usage: &provider.SimUsage{InputTokens: 100, OutputTokens: 50, CostUSD: 0.01}}
	req := provider.Request{Messages: request.Messages[:2], Sim: script, OutputSchema: json.RawMessage(`{}`)}
	reply, err := provider.Sim{}.Turn(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, provider.Usage{InputTokens: 100, OutputTokens: 50, CostUSD: 0.01, Priced: true}, reply.Usage)
	require.JSONEq(t, `{"summary":"a fairly long answer"}`, reply.Content)
	est := provider.Sim{}.Estimate(req)
	require.Equal(t, int64(100), est.InputTokens)
	require.Equal(t, int64(50), est.OutputTokens)
	require.Equal(t, 0.01, *est.CostUSD)

	req.MaxOutputTokens = 50
	reply, err = provider.Sim{}.Turn(context.Background(), req)
	require.NoError(t, err)
	require.JSONEq(t, `{"summary":"a fairly long answer"}`, reply.Content, "a limit the reply fits changes nothing")
	req.MaxOutputTokens = 25
	reply, err = provider.Sim{}.Turn(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, int64(25), reply.Usage.OutputTokens)
	require.False(t, json.Valid([]byte(reply.Content)), "cut: %q", reply.Content)
	require.InDelta(t, 0.005, reply.Usage.CostUSD, 1e-12)

	// Without sim.usage the estimate is still exactly what the turn reports.
	plain := provider.Request{Messages: request.Messages[:2], OutputSchema: json.RawMessage(`{"type":"object","required":["summary"],"properties":{"summary":{"type":"string"}}}`)}
	r, err := provider.Sim{}.Turn(context.Background(), plain)
	require.NoError(t, err)
	e := provider.Sim{}.Estimate(plain)
	require.Equal(t, r.Usage.InputTokens, e.InputTokens)
	require.Equal(t, r.Usage.OutputTokens, e.OutputTokens)
	require.Zero(t, *e.CostUSD)
}
