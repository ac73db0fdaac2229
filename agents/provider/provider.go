// Package provider holds the model providers an agent node talks to: sim
// (deterministic, no network, the default) and openai (any OpenAI-compatible
// chat-completions endpoint). A provider answers one model turn at a time;
// the harness in package agents owns the loop, the tools and the transcript.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Provider names (agents.Definition.Provider).
const (
	NameSim    = "sim"
	NameOpenAI = "openai"
)

// Message roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of a transcript, provider-neutral.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID names the call a tool message answers.
	ToolCallID string `json:"toolCallId,omitempty"`
}

// ToolCall is one tool call a model asked for.
type ToolCall struct {
	// ID is the provider's call id: audit metadata only (the harness keys
	// ledgers and events by its own call ordinal).
	ID string `json:"id"`
	// Name is the tool as the model named it: a Tool.Name, or for the sim
	// provider the actionId@version of its script.
	Name string `json:"name"`
	// Arguments is the call input as the model wrote it (JSON text, which
	// the harness checks before anything runs).
	Arguments string `json:"arguments"`
}

// Tool is a tool offered to the model.
type Tool struct {
	// Name is the function name the model calls it by (^[a-zA-Z0-9_-]{1,64}$).
	Name string `json:"name"`
	// Ref is the action it runs, actionId@version.
	Ref         string          `json:"ref"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model turn.
type Request struct {
	// Model is the revision's model ("" = the provider's default).
	Model    string
	Messages []Message
	// Tools are the tools offered this turn (possibly none).
	Tools []Tool
	// OutputSchema is the JSON Schema the final answer must match; for an
	// agent-decision node it requires {"outcome": "pass"|"fail"}.
	OutputSchema json.RawMessage
	// Decision is set for agent-decision nodes.
	Decision bool
	// Sim is the revision's sim script (sim provider only).
	Sim *SimScript
	// MaxOutputTokens bounds the reply's output tokens (0: no bound). The
	// harness sets it from the run's budget reservation (and the agent's
	// maxOutputTokens); a provider must not let a reply use more.
	MaxOutputTokens int64
}

// Estimate is what a turn will use, as its provider can tell before
// making it: the harness reserves it against the run's budget.
type Estimate struct {
	// InputTokens the request sends (an estimate for a real model).
	InputTokens int64
	// OutputTokens the reply will use when the provider knows it in
	// advance (the sim); 0 when it cannot (a real model).
	OutputTokens int64
	// CostUSD is the turn's cost when known in advance (the sim).
	CostUSD *float64
	// Price prices the turn by its tokens (a priced model); nil with
	// CostUSD nil: the turn's cost cannot be known.
	Price *Price
}

// Estimator is implemented by providers that can estimate a turn before
// making it (sim and openai do). For one that does not, the harness counts
// a token per 4 bytes of the request and no price.
type Estimator interface {
	Estimate(req Request) Estimate
}

// EstimateInputTokens is a conservative token count of what req sends: a
// token per 4 bytes of every message, tool and the output schema, and 4
// tokens of framing per message (what chat formats add).
func EstimateInputTokens(req Request) int64 {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Role) + len(m.Content) + len(m.ToolCallID) + 16
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments) + 8
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters) + 16
	}
	n += len(req.OutputSchema)
	return int64((n + 3) / 4)
}

// Reply is a model's answer to one turn: tool calls to run, or the final
// answer (Content, JSON text) when there are none.
type Reply struct {
	ToolCalls []ToolCall
	Content   string
	// Refusal is set when the model declined to answer.
	Refusal string
	// Model is the model that answered.
	Model string
	Usage Usage
}

// Usage is the token usage and cost of one model call.
type Usage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
	// CostUSD is 0 when the model has no price (Priced false).
	CostUSD float64 `json:"costUsd"`
	Priced  bool    `json:"priced"`
}

// Provider answers model turns.
type Provider interface {
	// Name is the provider name revisions select it by.
	Name() string
	// Turn asks the model for its next step. Errors are *Error, or ctx.Err()
	// when ctx was cancelled by the caller.
	Turn(ctx context.Context, req Request) (Reply, error)
}

// Error codes of provider failures (they become the node attempt's error type).
const (
	// CodeRateLimited: the endpoint answered 429 (retryable; RetryAfter set
	// when the endpoint sent Retry-After).
	CodeRateLimited = "PROVIDER_RATE_LIMITED"
	// CodeUnavailable: 5xx or a network failure (retryable).
	CodeUnavailable = "PROVIDER_UNAVAILABLE"
	// CodeTimeout: the call did not finish before the agent's deadline (retryable).
	CodeTimeout = "PROVIDER_TIMEOUT"
	// CodeMalformed: replies were not chat completions, several times in a
	// row (not retryable: the endpoint does not speak the protocol).
	CodeMalformed = "PROVIDER_MALFORMED_REPLY"
	// CodeRefused: the endpoint refused the request (4xx other than 429:
	// bad key, unknown model, invalid request); not retryable.
	CodeRefused = "PROVIDER_REFUSED"
	// CodeNotConfigured: the provider lacks a setting (model, key); not retryable.
	CodeNotConfigured = "PROVIDER_NOT_CONFIGURED"
)

// Error is a provider failure. Message never contains credentials.
type Error struct {
	Code      string
	Message   string
	Retryable bool
	// RetryAfter is the delay the endpoint asked for (429), or 0.
	RetryAfter time.Duration
	// Status is the HTTP status, or 0.
	Status int
}

func (e *Error) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%s: %s (retry after %s)", e.Code, e.Message, e.RetryAfter)
	}
	return e.Code + ": " + e.Message
}

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var pe *Error
	ok := errors.As(err, &pe)
	return pe, ok
}

// SimScript is what the sim provider plays (agents.Definition.Sim).
type SimScript struct {
	// Output is the final answer; without it the sim answers a
	// deterministic value valid against the output schema.
	Output json.RawMessage `json:"output,omitempty"`
	// Outcome is the decision of an agent-decision node (default pass).
	Outcome string `json:"outcome,omitempty"`
	// ToolCalls are asked for in the first turn, in order; the final answer
	// follows once their results are in.
	ToolCalls []SimToolCall `json:"toolCalls,omitempty"`
	// Usage, when given, is what every turn reports using (instead of the
	// sim's estimate of a token per 4 bytes and no cost), so budgets can
	// be exercised offline.
	Usage *SimUsage `json:"usage,omitempty"`
}

// SimUsage is the usage a sim turn declares.
type SimUsage struct {
	InputTokens  int64   `json:"inputTokens"`
	OutputTokens int64   `json:"outputTokens"`
	CostUSD      float64 `json:"costUsd,omitempty"`
}

// SimToolCall is one scripted tool call.
type SimToolCall struct {
	// Tool is actionId@version.
	Tool  string          `json:"tool"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Decision outcomes.
const (
	OutcomePass = "pass"
	OutcomeFail = "fail"
)
