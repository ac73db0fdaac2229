package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// OpenAI defaults.
const (
	// DefaultMaxInlineRetryAfter: a 429 whose Retry-After is at most this
	// is waited out inside the activity (heartbeating) and the call repeated;
	// a longer one fails the attempt with PROVIDER_RATE_LIMITED and the
	// node's retry policy (computed by the interpreter) decides when to try
	// again, resuming from the saved transcript.
	DefaultMaxInlineRetryAfter = 5 * time.Second
	// DefaultMaxRateLimitWaits bounds the inline waits per turn.
	DefaultMaxRateLimitWaits = 2
	// DefaultMaxMalformedRetries: a reply that is not a chat completion is
	// asked again this many times at once; then the turn fails with
	// PROVIDER_MALFORMED_REPLY, not retryable (the endpoint does not speak
	// the protocol, and retrying the node would only spend more).
	DefaultMaxMalformedRetries = 2
	// maxReplyBytes bounds a reply body read into memory.
	maxReplyBytes = 8 << 20
	// maxErrorSnippet bounds the body excerpt kept in an error message.
	maxErrorSnippet = 200
)

// Price is a model's price in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// ParsePrices parses WEFT_OPENAI_PRICES: "model=IN,OUT;model2=IN,OUT" with
// prices in US dollars per million input and output tokens, e.g.
// "gpt-4o-mini=0.15,0.60;gpt-4o=2.50,10". The model is everything before
// the last '='. An empty string is an empty table.
func ParsePrices(s string) (map[string]Price, error) {
	out := map[string]Price{}
	for _, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		i := strings.LastIndex(entry, "=")
		if i <= 0 {
			return nil, fmt.Errorf("price %q is not model=IN,OUT", entry)
		}
		model, prices := strings.TrimSpace(entry[:i]), entry[i+1:]
		in, outStr, ok := strings.Cut(prices, ",")
		if !ok {
			return nil, fmt.Errorf("price %q is not model=IN,OUT", entry)
		}
		pi, err1 := strconv.ParseFloat(strings.TrimSpace(in), 64)
		po, err2 := strconv.ParseFloat(strings.TrimSpace(outStr), 64)
		if err1 != nil || err2 != nil || pi < 0 || po < 0 {
			return nil, fmt.Errorf("price %q: prices must be non-negative numbers", entry)
		}
		out[model] = Price{InputPerMTok: pi, OutputPerMTok: po}
	}
	return out, nil
}

// OpenAIConfig configures the openai provider.
type OpenAIConfig struct {
	// BaseURL is the API base, e.g. https://api.openai.com/v1; requests go
	// to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as a bearer token. It is never logged, recorded in
	// events or transcripts, or put in an error (and so never reaches
	// Temporal).
	APIKey string
	// Model is used when a revision names none.
	Model string
	// Prices per model; a model without a price costs 0 (Usage.Priced false).
	Prices map[string]Price
	// HTTPClient defaults to a client without its own timeout: every call
	// is bounded by the agent's deadline (its context).
	HTTPClient *http.Client

	// MaxTokensField names the request field a call's output-token limit
	// (Request.MaxOutputTokens) is sent in: MaxCompletionTokensField (the
	// default; what current OpenAI models require) or MaxTokensField (the
	// older name some compatible servers still expect).
	MaxTokensField string

	MaxInlineRetryAfter time.Duration // DefaultMaxInlineRetryAfter when 0
	MaxRateLimitWaits   int           // DefaultMaxRateLimitWaits when 0; negative: never wait
	MaxMalformedRetries int           // DefaultMaxMalformedRetries when 0; negative: never retry
}

// The request fields an output-token limit may be sent in.
const (
	MaxCompletionTokensField = "max_completion_tokens"
	MaxTokensField           = "max_tokens"
)

// apiKey holds the key behind a pointer: fmt prints a nested pointer as an
// address, so even %+v of the provider cannot show the key.
type apiKey struct{ value string }

// OpenAI talks to any OpenAI-compatible chat-completions endpoint: function
// tools from the offered contracts' input schemas, tool calls back, and the
// final answer constrained by response_format json_schema.
type OpenAI struct {
	endpoint     string
	modelsURL    string
	key          *apiKey
	model        string
	prices       map[string]Price
	client       *http.Client
	maxWait      time.Duration
	maxWaits     int
	maxMalformed int
	// legacyMaxTokens sends the output-token limit as max_tokens.
	legacyMaxTokens bool
}

// NewOpenAI returns the provider; BaseURL and APIKey are required.
func NewOpenAI(c OpenAIConfig) (*OpenAI, error) {
	u, err := url.Parse(strings.TrimSpace(c.BaseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("provider: openai base URL must be an absolute http(s) URL")
	}
	if strings.TrimSpace(c.APIKey) == "" {
		return nil, errors.New("provider: openai needs an API key (WEFT_OPENAI_API_KEY)")
	}
	switch c.MaxTokensField {
	case "", MaxCompletionTokensField, MaxTokensField:
	default:
		return nil, fmt.Errorf("provider: openai max tokens field %q is not %s or %s (WEFT_OPENAI_MAX_TOKENS_FIELD)",
			c.MaxTokensField, MaxCompletionTokensField, MaxTokensField)
	}
	p := &OpenAI{
		endpoint:  strings.TrimRight(u.String(), "/") + "/chat/completions",
		modelsURL: strings.TrimRight(u.String(), "/") + "/models",
		key:       &apiKey{value: strings.TrimSpace(c.APIKey)},
		model:     strings.TrimSpace(c.Model),
		prices:    c.Prices,
		client:    c.HTTPClient,
		maxWait:   c.MaxInlineRetryAfter, maxWaits: c.MaxRateLimitWaits, maxMalformed: c.MaxMalformedRetries,
		legacyMaxTokens: c.MaxTokensField == MaxTokensField,
	}
	if p.client == nil {
		p.client = &http.Client{}
	}
	if p.maxWait == 0 {
		p.maxWait = DefaultMaxInlineRetryAfter
	}
	if p.maxWaits == 0 {
		p.maxWaits = DefaultMaxRateLimitWaits
	}
	if p.maxMalformed == 0 {
		p.maxMalformed = DefaultMaxMalformedRetries
	}
	return p, nil
}

// Name implements Provider.
func (p *OpenAI) Name() string { return NameOpenAI }

// String and LogValue describe the provider without its key.
func (p *OpenAI) String() string { return "openai(" + p.endpoint + ")" }

// LogValue implements slog.LogValuer.
func (p *OpenAI) LogValue() slog.Value { return slog.StringValue(p.String()) }

// Turn implements Provider: one chat completion, with inline retries for a
// short Retry-After and for malformed replies (see the Default* constants).
// 5xx and network failures are retryable *Errors, a deadline is
// PROVIDER_TIMEOUT (retryable), other 4xx PROVIDER_REFUSED.
func (p *OpenAI) Turn(ctx context.Context, req Request) (Reply, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	if model == "" {
		return Reply{}, &Error{Code: CodeNotConfigured, Message: "no model: the revision names none and WEFT_OPENAI_MODEL is empty"}
	}
	body, err := json.Marshal(p.chatRequest(model, req))
	if err != nil {
		return Reply{}, &Error{Code: CodeRefused, Message: "request cannot be encoded: " + err.Error()}
	}
	waits, malformed := 0, 0
	for {
		reply, retryAfter, err := p.once(ctx, body)
		var pe *Error
		switch {
		case err == nil:
			reply.Usage = p.cost(reply.Model, model, reply.Usage)
			return reply, nil
		case !errors.As(err, &pe):
			return Reply{}, err
		case pe.Code == CodeMalformed && malformed < p.maxMalformed:
			malformed++
			continue
		case pe.Code == CodeRateLimited && retryAfter > 0 && retryAfter <= p.maxWait && waits < p.maxWaits && fits(ctx, retryAfter):
			waits++
			t := time.NewTimer(retryAfter)
			select {
			case <-ctx.Done():
				t.Stop()
				return Reply{}, p.ctxError(ctx)
			case <-t.C:
			}
			continue
		}
		return Reply{}, err
	}
}

// Estimate implements Estimator: the request's input tokens (a token per
// 4 bytes, counted generously), the reply's unknown, and the price of the
// model the turn asks for (none when WEFT_OPENAI_PRICES does not list it).
func (p *OpenAI) Estimate(req Request) Estimate {
	model := req.Model
	if model == "" {
		model = p.model
	}
	est := Estimate{InputTokens: EstimateInputTokens(req)}
	if price, ok := p.prices[model]; ok {
		est.Price = &price
	}
	return est
}

// maxProbeBody bounds what a probe reads of the reply (it only needs the
// status).
const maxProbeBody = 64 << 10

// Probe implements Prober with the cheapest authenticated call of the
// protocol, GET {base}/models, bounded by ctx: any answer but a 5xx, 408,
// 401 or 403 means the endpoint is up (a 404 from an endpoint without the
// models list still proves it reachable; a 429 is rate limiting, which
// calls wait out themselves). Network errors, timeouts, 5xx and 408 are
// PROVIDER_UNAVAILABLE; 401 and 403 PROVIDER_REFUSED. The key is sent as
// on every call and never appears in the error.
func (p *OpenAI) Probe(ctx context.Context) error {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, p.modelsURL, nil)
	if err != nil {
		return &Error{Code: CodeNotConfigured, Message: "bad endpoint: " + p.scrub(err.Error())}
	}
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+p.key.value)
	resp, err := p.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return &Error{Code: CodeTimeout, Retryable: true, Message: "the endpoint did not answer the probe in time"}
		}
		return &Error{Code: CodeUnavailable, Retryable: true, Message: "probe failed: " + p.scrub(errorText(err))}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
	_ = resp.Body.Close()
	switch s := resp.StatusCode; {
	case s >= 500 || s == http.StatusRequestTimeout:
		return &Error{Code: CodeUnavailable, Retryable: true, Status: s, Message: fmt.Sprintf("the endpoint answered the probe with %d", s)}
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return &Error{Code: CodeRefused, Status: s, Message: fmt.Sprintf("the endpoint refused the key (%d)", s)}
	}
	return nil
}

// fits reports whether waiting d still leaves time before ctx's deadline.
func fits(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d
}

// once performs one HTTP call.
func (p *OpenAI) once(ctx context.Context, body []byte) (Reply, time.Duration, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		return Reply{}, 0, &Error{Code: CodeNotConfigured, Message: "bad endpoint: " + p.scrub(err.Error())}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+p.key.value)
	resp, err := p.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return Reply{}, 0, p.ctxError(ctx)
		}
		return Reply{}, 0, &Error{Code: CodeUnavailable, Retryable: true, Message: "request failed: " + p.scrub(errorText(err))}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return Reply{}, 0, p.ctxError(ctx)
		}
		return Reply{}, 0, &Error{Code: CodeUnavailable, Retryable: true, Status: resp.StatusCode, Message: "reading the reply failed: " + p.scrub(errorText(err))}
	}
	switch s := resp.StatusCode; {
	case s == http.StatusTooManyRequests:
		after := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		return Reply{}, after, &Error{Code: CodeRateLimited, Retryable: true, Status: s, RetryAfter: after,
			Message: "the endpoint is rate limiting (429)" + p.snippet(data)}
	case s >= 500 || s == http.StatusRequestTimeout:
		return Reply{}, 0, &Error{Code: CodeUnavailable, Retryable: true, Status: s,
			Message: fmt.Sprintf("the endpoint answered %d", s) + p.snippet(data)}
	case s < 200 || s > 299:
		return Reply{}, 0, &Error{Code: CodeRefused, Status: s,
			Message: fmt.Sprintf("the endpoint refused the request with %d", s) + p.snippet(data)}
	}
	if len(data) > maxReplyBytes {
		return Reply{}, 0, &Error{Code: CodeMalformed, Status: resp.StatusCode, Message: fmt.Sprintf("reply is larger than %d bytes", maxReplyBytes)}
	}
	reply, err := parseChatResponse(data)
	if err != nil {
		return Reply{}, 0, &Error{Code: CodeMalformed, Status: resp.StatusCode, Message: "reply is not a chat completion: " + p.scrub(err.Error())}
	}
	return reply, 0, nil
}

// ctxError is the error for an ended context: the caller's cancellation as
// is, a deadline as a retryable PROVIDER_TIMEOUT.
func (p *OpenAI) ctxError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Code: CodeTimeout, Retryable: true, Message: "the model did not answer before the agent's deadline"}
	}
	return ctx.Err()
}

// errorText drops the URL from a *url.Error (it names the endpoint only,
// never the key, but the reason is what matters).
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// scrub removes the API key from text that came from elsewhere (an error
// body may echo the credential).
func (p *OpenAI) scrub(s string) string {
	if p.key.value == "" {
		return s
	}
	return strings.ReplaceAll(s, p.key.value, "[REDACTED]")
}

// snippet renders a short, scrubbed excerpt of an error body.
func (p *OpenAI) snippet(data []byte) string {
	s := strings.TrimSpace(string(data))
	if s == "" {
		return ""
	}
	if len(s) > maxErrorSnippet {
		s = s[:maxErrorSnippet]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return ": " + p.scrub(s)
}

// retryAfter parses Retry-After (delta seconds or an HTTP date); 0 when
// absent or unparseable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || secs > 86400 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// cost prices usage by the model that answered (else the requested one).
func (p *OpenAI) cost(answered, requested string, u Usage) Usage {
	price, ok := p.prices[answered]
	if !ok {
		price, ok = p.prices[requested]
	}
	if !ok {
		u.CostUSD, u.Priced = 0, false
		return u
	}
	u.CostUSD = (float64(u.InputTokens)*price.InputPerMTok + float64(u.OutputTokens)*price.OutputPerMTok) / 1e6
	u.Priced = true
	return u
}

// Wire types of the chat-completions protocol.
type (
	chatRequest struct {
		Model          string          `json:"model"`
		Messages       []chatMessage   `json:"messages"`
		Tools          []chatTool      `json:"tools,omitempty"`
		ToolChoice     string          `json:"tool_choice,omitempty"`
		ResponseFormat *responseFormat `json:"response_format,omitempty"`
		// The output-token limit, in the field the endpoint reads.
		MaxCompletionTokens int64 `json:"max_completion_tokens,omitempty"`
		MaxTokens           int64 `json:"max_tokens,omitempty"`
	}
	chatMessage struct {
		Role       string         `json:"role"`
		Content    *string        `json:"content"`
		ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
		ToolCallID string         `json:"tool_call_id,omitempty"`
	}
	chatToolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function chatFunction `json:"function"`
	}
	chatFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	chatTool struct {
		Type     string      `json:"type"`
		Function functionDef `json:"function"`
	}
	functionDef struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	responseFormat struct {
		Type       string      `json:"type"`
		JSONSchema *jsonSchema `json:"json_schema,omitempty"`
	}
	jsonSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	chatResponse struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content   *string        `json:"content"`
				Refusal   *string        `json:"refusal"`
				ToolCalls []chatToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
)

func (p *OpenAI) chatRequest(model string, req Request) chatRequest {
	out := chatRequest{Model: model, Messages: make([]chatMessage, 0, len(req.Messages))}
	if req.MaxOutputTokens > 0 {
		if p.legacyMaxTokens {
			out.MaxTokens = req.MaxOutputTokens
		} else {
			out.MaxCompletionTokens = req.MaxOutputTokens
		}
	}
	for _, m := range req.Messages {
		content := m.Content
		cm := chatMessage{Role: m.Role, Content: &content, ToolCallID: m.ToolCallID}
		if m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
			if content == "" {
				cm.Content = nil
			}
			for _, c := range m.ToolCalls {
				cm.ToolCalls = append(cm.ToolCalls, chatToolCall{ID: c.ID, Type: "function",
					Function: chatFunction{Name: c.Name, Arguments: c.Arguments}})
			}
		}
		out.Messages = append(out.Messages, cm)
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, chatTool{Type: "function",
			Function: functionDef{Name: t.Name, Description: t.Description, Parameters: objectSchema(t.Parameters)}})
	}
	if len(out.Tools) > 0 {
		out.ToolChoice = "auto"
	}
	if isObjectSchema(req.OutputSchema) {
		out.ResponseFormat = &responseFormat{Type: "json_schema",
			JSONSchema: &jsonSchema{Name: "agent_output", Schema: req.OutputSchema}}
	} else {
		out.ResponseFormat = &responseFormat{Type: "json_object"}
	}
	return out
}

// isObjectSchema reports a schema whose root is an object (json_schema
// response formats require that); other output schemas use json_object
// and are enforced by the harness's validation.
func isObjectSchema(raw json.RawMessage) bool {
	var s struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	t, _ := s.Type.(string)
	return t == "object"
}

// objectSchema makes a function's parameters an object schema, as the
// protocol requires (an action accepting anything takes any object).
func objectSchema(raw json.RawMessage) json.RawMessage {
	if isObjectSchema(raw) {
		return raw
	}
	return json.RawMessage(`{"type":"object"}`)
}

// parseChatResponse reads the first choice; anything that is not a chat
// completion with either tool calls, content or a refusal is malformed.
func parseChatResponse(data []byte) (Reply, error) {
	var r chatResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return Reply{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if len(r.Choices) == 0 {
		return Reply{}, errors.New("no choices")
	}
	msg := r.Choices[0].Message
	reply := Reply{Model: r.Model}
	if r.Usage != nil {
		if r.Usage.PromptTokens < 0 || r.Usage.CompletionTokens < 0 {
			return Reply{}, errors.New("negative usage")
		}
		reply.Usage = Usage{InputTokens: r.Usage.PromptTokens, OutputTokens: r.Usage.CompletionTokens}
	}
	for i, c := range msg.ToolCalls {
		if c.ID == "" || c.Function.Name == "" {
			return Reply{}, fmt.Errorf("tool call %d has no id or function name", i)
		}
		reply.ToolCalls = append(reply.ToolCalls, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	switch {
	case len(reply.ToolCalls) > 0:
	case msg.Refusal != nil && *msg.Refusal != "":
		reply.Refusal = *msg.Refusal
	case msg.Content != nil && strings.TrimSpace(*msg.Content) != "":
		reply.Content = *msg.Content
	default:
		return Reply{}, errors.New("the message has neither tool calls nor content")
	}
	if msg.Content != nil && len(reply.ToolCalls) > 0 {
		reply.Content = *msg.Content
	}
	return reply, nil
}
