package catalog

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// NoteWriter writes a note exactly once per ledger key (store.Store
// implements it with WriteNoteOnce): same key and input hash returns the
// first note; same key with another input is an IDEMPOTENCY_CONFLICT
// failure.Error.
type NoteWriter interface {
	// author is the call's actor; the note records it and its RequestedBy.
	WriteNoteOnce(ctx context.Context, tenantID, runID, nodeID, ledgerKey, inputHash, title string, body json.RawMessage, author execution.Actor) (noteID string, err error)
}

// BuiltinDeps are what the built-in actions need from the worker.
type BuiltinDeps struct {
	// Notes backs workspace.notes.write@1. Without it the action fails,
	// non-retryable, with ACTION_UNAVAILABLE.
	Notes NoteWriter
	// HTTPClient is used by core.http.fetch@1; nil uses a client with no
	// timeout of its own (the call's deadline bounds it) and at most 5 redirects.
	HTTPClient *http.Client
}

// Limits of core.http.fetch@1.
const (
	// MaxFetchBytes caps the response body kept; the rest is not read.
	MaxFetchBytes = 1 << 20
	maxRedirects  = 5
)

// SleepHeartbeatInterval is how often core.sleep@1 heartbeats while sleeping.
const SleepHeartbeatInterval = time.Second

// Builtins returns the built-in actions with their handlers, in the order of
// BuiltinContracts.
func Builtins(d BuiltinDeps) []Action {
	client := d.HTTPClient
	if client == nil {
		client = &http.Client{CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return nil
		}}
	}
	return []Action{
		{Contract: EchoV1, Handler: echo},
		{Contract: SleepV1, Handler: sleep},
		{Contract: FailV1, Handler: failUntil},
		{Contract: NotesWriteV1, Handler: notesWrite(d.Notes)},
		{Contract: HTTPFetchV1, Handler: httpFetch(client)},
	}
}

// permanent is a non-retryable application error: retrying cannot help.
func permanent(errType, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), errType, nil)
}

// decodeInput decodes the (schema-validated) call input into v.
func decodeInput(call Call, v any) error {
	if err := json.Unmarshal(call.Input, v); err != nil {
		return permanent(execution.ErrSchemaViolation, "input: %v", err)
	}
	return nil
}

// echo is core.echo@1: it returns its input unchanged.
func echo(_ context.Context, call Call) (json.RawMessage, error) {
	if len(call.Input) == 0 {
		return json.RawMessage("null"), nil
	}
	return call.Input, nil
}

// sleep is core.sleep@1: it sleeps ms milliseconds, heartbeating at once and
// every SleepHeartbeatInterval so cancellation reaches it, and returns
// ctx.Err() as soon as the context ends.
func sleep(ctx context.Context, call Call) (json.RawMessage, error) {
	var in struct {
		Ms int64 `json:"ms"`
	}
	if err := decodeInput(call, &in); err != nil {
		return nil, err
	}
	start := time.Now()
	call.Beat(map[string]int64{"sleptMs": 0})
	timer := time.NewTimer(time.Duration(in.Ms) * time.Millisecond)
	defer timer.Stop()
	tick := time.NewTicker(SleepHeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
			call.Beat(map[string]int64{"sleptMs": time.Since(start).Milliseconds()})
		case <-timer.C:
			return json.Marshal(map[string]int64{"sleptMs": in.Ms})
		}
	}
}

// failUntil is core.fail@1: every attempt before untilAttempt fails with a
// retryable ACTION_FAILED error; from untilAttempt on it returns value.
func failUntil(_ context.Context, call Call) (json.RawMessage, error) {
	var in struct {
		UntilAttempt int             `json:"untilAttempt"`
		Value        json.RawMessage `json:"value"`
	}
	if err := decodeInput(call, &in); err != nil {
		return nil, err
	}
	if call.Attempt < in.UntilAttempt {
		return nil, temporal.NewApplicationError(
			fmt.Sprintf("core.fail: attempt %d fails (succeeds from attempt %d)", call.Attempt, in.UntilAttempt),
			execution.ErrActionFailed)
	}
	if len(in.Value) == 0 {
		return json.RawMessage("null"), nil
	}
	return in.Value, nil
}

// notesWrite is workspace.notes.write@1: it writes {title, body} once per
// call.IdempotencyKey through the ledger, bound to the canonical input hash,
// recording who acted (call.Actor and its RequestedBy).
func notesWrite(w NoteWriter) Handler {
	return func(ctx context.Context, call Call) (json.RawMessage, error) {
		if w == nil {
			return nil, permanent(execution.ErrActionUnavailable, "workspace.notes.write@1 has no note store on this worker")
		}
		if call.IdempotencyKey == "" {
			return nil, permanent(execution.ErrActionFailed, "workspace.notes.write@1 needs an idempotency key; refusing an unkeyed write")
		}
		var in struct {
			Title string          `json:"title"`
			Body  json.RawMessage `json:"body"`
		}
		if err := decodeInput(call, &in); err != nil {
			return nil, err
		}
		canon, err := graph.Canonical(call.Input)
		if err != nil {
			return nil, permanent(execution.ErrSchemaViolation, "input: %v", err)
		}
		if call.Actor.Sub == "" {
			// Who acted is part of the note; an unattributed write is a wiring mistake.
			return nil, permanent(execution.ErrActionFailed, "workspace.notes.write@1 needs the call's actor; refusing an unattributed write")
		}
		id, err := w.WriteNoteOnce(ctx, call.TenantID, call.RunID, call.NodeID, call.IdempotencyKey,
			graph.SHA256Hex(canon), in.Title, in.Body, call.Actor)
		switch code := failure.CodeOf(err); {
		case err == nil:
		case code == failure.CodeIdempotencyConflict:
			return nil, temporal.NewNonRetryableApplicationError(
				"workspace.notes.write@1: this node already wrote a note with another input; refusing to write again",
				execution.ErrIdempotencyConflict, err)
		case code != failure.CodeInternal:
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), execution.ErrActionFailed, err)
		default:
			return nil, err // a database blip: retryable
		}
		return json.Marshal(map[string]string{"noteId": id})
	}
}

// fetchOutput is what core.http.fetch@1 returns.
type fetchOutput struct {
	Status      int    `json:"status"`
	ContentType string `json:"contentType,omitempty"`
	// Body is the body as text when it is UTF-8; BodyBase64 otherwise.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"bodyBase64,omitempty"`
	// Bytes is how many body bytes were kept; Truncated says more were sent.
	Bytes     int  `json:"bytes"`
	Truncated bool `json:"truncated"`
}

// httpFetch is core.http.fetch@1: one GET bounded by the call's deadline and
// MaxFetchBytes. Publication refuses it (risk external); it is real so the
// refusal is what stops it, not a stub. 5xx and 429 are retryable errors;
// other statuses are results.
func httpFetch(client *http.Client) Handler {
	return func(ctx context.Context, call Call) (json.RawMessage, error) {
		var in struct {
			URL string `json:"url"`
		}
		if err := decodeInput(call, &in); err != nil {
			return nil, err
		}
		u, err := url.Parse(in.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, permanent(execution.ErrSchemaViolation, "url must be an absolute http or https URL")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, permanent(execution.ErrSchemaViolation, "url: %v", err)
		}
		call.Beat()
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, temporal.NewApplicationError("core.http.fetch: "+err.Error(), execution.ErrActionFailed)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, MaxFetchBytes+1))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, temporal.NewApplicationError("core.http.fetch: reading body: "+err.Error(), execution.ErrActionFailed)
		}
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return nil, temporal.NewApplicationError(fmt.Sprintf("core.http.fetch: %s answered %d", u.Host, resp.StatusCode),
				execution.ErrActionFailed)
		}
		out := fetchOutput{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
		if len(body) > MaxFetchBytes {
			body, out.Truncated = body[:MaxFetchBytes], true
		}
		text := body
		if out.Truncated {
			text = trimPartialRune(body) // the cap may split a character
		}
		if utf8.Valid(text) {
			out.Body, out.Bytes = string(text), len(text)
		} else {
			out.BodyBase64, out.Bytes = base64.StdEncoding.EncodeToString(body), len(body)
		}
		return json.Marshal(out)
	}
}

// trimPartialRune drops an incomplete UTF-8 sequence the size cap cut at the end.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.Valid(b); i++ {
		b = b[:len(b)-1]
	}
	return b
}
