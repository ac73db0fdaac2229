// Package client is a small typed HTTP client for weft's v1 API, used by the
// command line's client verbs (validate, push, publish, run, runs, events,
// cancel, revocations, replay). Every refusal the API answers with {"error": {code, message,
// details}} comes back as an *Error carrying that code.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// Client talks to one weft API as one principal (its bearer token).
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
	// UserAgent is sent with every request.
	UserAgent string
}

// New returns a client for the API at baseURL (for example
// http://localhost:8080) authenticating with token.
func New(baseURL, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(strings.TrimSpace(baseURL), "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: API URL %q must be an http(s) URL such as http://localhost:8080", baseURL)
	}
	return &Client{base: u, token: token, http: &http.Client{Timeout: 60 * time.Second}, UserAgent: "weft-cli"}, nil
}

// WithHTTPClient replaces the HTTP client (timeouts, transport).
func (c *Client) WithHTTPClient(h *http.Client) *Client {
	c.http = h
	return c
}

// Error is a refusal answered by the API.
type Error struct {
	// Status is the HTTP status.
	Status  int
	Code    string
	Message string
	Details map[string]any
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (HTTP %d)", e.Code, e.Message, e.Status)
}

// UnreachableError is an API that did not answer at all: nothing listens
// at the address, a wrong host, a network down.
type UnreachableError struct {
	URL string // the API base, credentials removed
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the weft API at %s: %v", e.URL, e.Err)
}

// Unwrap returns the transport's error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Issues returns the graph issues in details.issues (INVALID_GRAPH,
// INVALID_TOOLS_PATH), if any.
func (e *Error) Issues() []graph.Issue {
	raw, ok := e.Details["issues"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var issues []graph.Issue
	if json.Unmarshal(b, &issues) != nil {
		return nil
	}
	return issues
}

// Code returns the API error code of err, or "" when err is not an *Error.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsNotFound reports whether err is the API's NOT_FOUND.
func IsNotFound(err error) bool { return Code(err) == "NOT_FOUND" }

// Content types of request bodies.
const (
	ContentJSON = "application/json"
	ContentYAML = "application/yaml"
)

// do sends a request and decodes a 2xx JSON answer into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, contentType string, body []byte, out any) error {
	_, err := c.send(ctx, method, path, query, contentType, body, out)
	return err
}

// send is do that also returns the HTTP status of a 2xx answer.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, contentType string, body []byte, out any) (int, error) {
	res, err := c.roundTrip(ctx, method, path, query, contentType, ContentJSON, body)
	if err != nil {
		return res.status, err
	}
	if out == nil {
		return res.status, nil
	}
	if err := json.Unmarshal(res.body, out); err != nil {
		return res.status, fmt.Errorf("%s %s: unexpected answer: %w", method, res.url, err)
	}
	return res.status, nil
}

// rawAnswer is an answer as received.
type rawAnswer struct {
	status int
	header http.Header
	body   []byte
	url    string // redacted
}

// roundTrip sends a request accepting accept and returns a 2xx answer as
// received, or the API's refusal as an *Error.
func (c *Client) roundTrip(ctx context.Context, method, path string, query url.Values, contentType, accept string, body []byte) (rawAnswer, error) {
	u := *c.base
	// path is already escaped (workflowPath, runPath).
	u.RawPath = c.base.EscapedPath() + path
	var err error
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return rawAnswer{}, err
	}
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return rawAnswer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", accept)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	res, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return rawAnswer{}, fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
		}
		return rawAnswer{}, &UnreachableError{URL: c.base.Redacted(), Err: err}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return rawAnswer{}, fmt.Errorf("%s %s: reading the answer: %w", method, u.Redacted(), err)
	}
	out := rawAnswer{status: res.StatusCode, header: res.Header, body: data, url: u.Redacted()}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return out, decodeError(res.StatusCode, data)
	}
	return out, nil
}

// decodeError reads an error answer: the API's envelope, or a snippet of
// whatever else answered (a proxy's HTML page).
func decodeError(status int, data []byte) *Error {
	var eb struct {
		Error *struct {
			Code    string         `json:"code"`
			Message string         `json:"message"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &eb) == nil && eb.Error != nil && eb.Error.Code != "" {
		return &Error{Status: status, Code: eb.Error.Code, Message: eb.Error.Message, Details: eb.Error.Details}
	}
	snippet := strings.TrimSpace(string(data))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "…"
	}
	return &Error{Status: status, Code: "HTTP_" + strconv.Itoa(status), Message: snippet}
}

func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	return c.do(ctx, method, path, query, ContentJSON, body, out)
}

func workflowPath(key string, rest ...string) string {
	p := "/v1/workflows/" + url.PathEscape(key)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func runPath(id string, rest ...string) string {
	p := "/v1/runs/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// Draft answers a create or a draft save.
type Draft struct {
	Key           string `json:"key"`
	DraftRevision int    `json:"draftRevision"`
}

// CreateWorkflow creates workflow key with its first draft, a JSON graph document.
func (c *Client) CreateWorkflow(ctx context.Context, key string, doc json.RawMessage) (Draft, error) {
	var out Draft
	err := c.doJSON(ctx, http.MethodPost, "/v1/workflows", nil, map[string]any{"key": key, "graph": doc}, &out)
	return out, err
}

// CreateWorkflowYAML creates workflow key from a YAML graph document
// (POST /v1/workflows?key=K, Content-Type: application/yaml).
func (c *Client) CreateWorkflowYAML(ctx context.Context, key string, doc []byte) (Draft, error) {
	var out Draft
	err := c.do(ctx, http.MethodPost, "/v1/workflows", url.Values{"key": {key}}, ContentYAML, doc, &out)
	return out, err
}

// SaveDraft saves the next draft revision of key; expected must be the
// latest draft revision (else REVISION_CONFLICT).
func (c *Client) SaveDraft(ctx context.Context, key string, expected int, doc json.RawMessage) (Draft, error) {
	var out Draft
	err := c.doJSON(ctx, http.MethodPut, workflowPath(key, "draft"), nil, map[string]any{"expectedRevision": expected, "graph": doc}, &out)
	return out, err
}

// SaveDraftYAML is SaveDraft with a YAML graph document.
func (c *Client) SaveDraftYAML(ctx context.Context, key string, expected int, doc []byte) (Draft, error) {
	var out Draft
	err := c.do(ctx, http.MethodPut, workflowPath(key, "draft"), url.Values{"expectedRevision": {strconv.Itoa(expected)}}, ContentYAML, doc, &out)
	return out, err
}

// RevisionSummary is a published revision's head.
type RevisionSummary struct {
	Revision      int       `json:"revision"`
	Checksum      string    `json:"checksum"`
	DraftRevision int       `json:"draftRevision"`
	PublishedBy   string    `json:"publishedBy"`
	PublishedAt   time.Time `json:"publishedAt"`
}

// Workflow is GET /v1/workflows/{key}.
type Workflow struct {
	Key               string  `json:"key"`
	DraftRevision     int     `json:"draftRevision"`
	PublishedRevision *int    `json:"publishedRevision"`
	Checksum          *string `json:"checksum"`
	Draft             struct {
		Revision int             `json:"revision"`
		SavedBy  string          `json:"savedBy"`
		SavedAt  time.Time       `json:"savedAt"`
		Graph    json.RawMessage `json:"graph"`
	} `json:"draft"`
	Published *RevisionSummary `json:"published"`
}

// GetWorkflow reads a workflow with its latest draft.
func (c *Client) GetWorkflow(ctx context.Context, key string) (Workflow, error) {
	var out Workflow
	err := c.doJSON(ctx, http.MethodGet, workflowPath(key), nil, nil, &out)
	return out, err
}

// DryRun is the verdict of POST /v1/workflows/{key}/dry-run.
type DryRun struct {
	Key           string        `json:"key"`
	DraftRevision int           `json:"draftRevision"`
	Valid         bool          `json:"valid"`
	Issues        []graph.Issue `json:"issues"`
	Warnings      []graph.Issue `json:"warnings"`
	Order         []string      `json:"order"`
	Permissions   []string      `json:"permissions"`
	Checksum      string        `json:"checksum"`
}

// DryRun validates a draft (0 = the latest) on the server.
func (c *Client) DryRun(ctx context.Context, key string, draftRevision int) (DryRun, error) {
	var in any
	if draftRevision > 0 {
		in = map[string]any{"draftRevision": draftRevision}
	}
	var out DryRun
	err := c.doJSON(ctx, http.MethodPost, workflowPath(key, "dry-run"), nil, in, &out)
	return out, err
}

// Published answers a publication.
type Published struct {
	Key           string `json:"key"`
	Revision      int    `json:"revision"`
	Checksum      string `json:"checksum"`
	DraftRevision int    `json:"draftRevision"`
	// Warnings ask for what the revision lacks but runs without (a toolset
	// summary: MISSING_TOOLSET_SUMMARY).
	Warnings []graph.Issue `json:"warnings"`
	// Created is false when the content was already the latest revision.
	Created bool `json:"-"`
}

// Publish publishes draft revision expected of key. An invalid draft is an
// *Error with code INVALID_GRAPH and Issues().
func (c *Client) Publish(ctx context.Context, key string, expected int) (Published, error) {
	var out Published
	body, _ := json.Marshal(map[string]any{"expectedRevision": expected})
	status, err := c.send(ctx, http.MethodPost, workflowPath(key, "publish"), nil, ContentJSON, body, &out)
	out.Created = status == http.StatusCreated
	return out, err
}

// Revision is GET /v1/workflows/{key}/revisions/{n}.
type Revision struct {
	Key string `json:"key"`
	RevisionSummary
	Graph        graph.Document `json:"graph"`
	Order        []string       `json:"order"`
	Permissions  []string       `json:"permissions"`
	Dependencies struct {
		Actions []graph.PinnedAction  `json:"actions"`
		Agents  []graph.AgentContract `json:"agents"`
	} `json:"dependencies"`
}

// GetRevision reads published revision n of key.
func (c *Client) GetRevision(ctx context.Context, key string, n int) (Revision, error) {
	var out Revision
	err := c.doJSON(ctx, http.MethodGet, workflowPath(key, "revisions", strconv.Itoa(n)), nil, nil, &out)
	return out, err
}

// GraphYAML is a workflow's graph document exported as YAML (GET
// /v1/workflows/{key}/draft or /revisions/{n} with ?format=yaml): YAML
// that reads back to the same document, hence the same checksum.
type GraphYAML struct {
	YAML []byte
	// DraftRevision is the draft exported, or the draft a revision was
	// published from.
	DraftRevision int
	// Revision and Checksum are set for a published revision.
	Revision int
	Checksum string
}

// GetDraftYAML exports draft revision n of key (0: the latest) as YAML.
func (c *Client) GetDraftYAML(ctx context.Context, key string, n int) (GraphYAML, error) {
	q := url.Values{"format": {"yaml"}}
	if n > 0 {
		q.Set("revision", strconv.Itoa(n))
	}
	return c.getGraphYAML(ctx, workflowPath(key, "draft"), q)
}

// GetRevisionYAML exports published revision n of key as YAML.
func (c *Client) GetRevisionYAML(ctx context.Context, key string, n int) (GraphYAML, error) {
	return c.getGraphYAML(ctx, workflowPath(key, "revisions", strconv.Itoa(n)), url.Values{"format": {"yaml"}})
}

func (c *Client) getGraphYAML(ctx context.Context, path string, q url.Values) (GraphYAML, error) {
	res, err := c.roundTrip(ctx, http.MethodGet, path, q, "", ContentYAML, nil)
	if err != nil {
		return GraphYAML{}, err
	}
	out := GraphYAML{YAML: res.body, Checksum: res.header.Get("Weft-Checksum")}
	out.DraftRevision, _ = strconv.Atoi(res.header.Get("Weft-Draft-Revision"))
	out.Revision, _ = strconv.Atoi(res.header.Get("Weft-Revision"))
	if out.DraftRevision < 1 {
		return GraphYAML{}, fmt.Errorf("GET %s: the answer names no draft revision (Weft-Draft-Revision); is the API older than the YAML export?", res.url)
	}
	return out, nil
}

// RunRequest is the body of POST /v1/workflows/{key}/runs.
type RunRequest struct {
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Mode           string          `json:"mode,omitempty"`
	Revision       *int            `json:"revision,omitempty"`
	DraftRevision  *int            `json:"draftRevision,omitempty"`
	Fixtures       json.RawMessage `json:"fixtures,omitempty"`
	// ToolGrants (actionId@version) narrow what the run's agents may
	// call: nil grants no narrowing (sent as null), empty grants no tool.
	ToolGrants []string `json:"toolGrants"`
	// Budget bounds what the run's agent model calls may spend (nil:
	// the workflow's default budget).
	Budget *Budget `json:"budget,omitempty"`
}

// Budget bounds what a run's agent model calls may spend; a nil field
// bounds nothing (or, at enqueue, takes the workflow's default).
type Budget struct {
	MaxCostUSD *float64 `json:"maxCostUsd,omitempty"`
	MaxTokens  *int64   `json:"maxTokens,omitempty"`
}

// Accepted answers an enqueue.
type Accepted struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
	// Position is a throttled run's place in its workflow's queue.
	Position int    `json:"position,omitempty"`
	Revision int    `json:"revision"`
	Checksum string `json:"checksum"`
	// Temporal names the run's workflow and the execution the enqueue
	// started or found (RunID empty while the run is throttled).
	Temporal struct {
		WorkflowID string `json:"workflowId"`
		RunID      string `json:"runId"`
		UIURL      string `json:"uiUrl"`
	} `json:"temporal"`
	// Created is false when the idempotency key had already started this run.
	Created bool `json:"-"`
}

// StartRun enqueues a run of key.
func (c *Client) StartRun(ctx context.Context, key string, req RunRequest) (Accepted, error) {
	var out Accepted
	body, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	status, err := c.send(ctx, http.MethodPost, workflowPath(key, "runs"), nil, ContentJSON, body, &out)
	out.Created = status == http.StatusAccepted
	return out, err
}

// NodeState is one node of a run, projected from its events.
type NodeState struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Attempt int    `json:"attempt"`
	Port    string `json:"port,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Run is a run as the API shows it.
type Run struct {
	RunID       string          `json:"runId"`
	WorkflowKey string          `json:"workflowKey"`
	Revision    int             `json:"revision"`
	Checksum    string          `json:"checksum"`
	Mode        string          `json:"mode"`
	Status      string          `json:"status"`
	Input       json.RawMessage `json:"input"`
	Output      json.RawMessage `json:"output"`
	Error       json.RawMessage `json:"error"`
	Origin      struct {
		Kind string `json:"kind"`
		ID   string `json:"id,omitempty"`
	} `json:"origin"`
	Actor struct {
		Kind         string `json:"kind"`
		Sub          string `json:"sub"`
		ConfiguredBy string `json:"configuredBy,omitempty"`
	} `json:"actor"`
	// ToolGrants are the enqueue's toolGrants (nil: not narrowed);
	// ToolPolicy a schedule's or webhook's policy when it started the run.
	ToolGrants []string        `json:"toolGrants"`
	ToolPolicy []string        `json:"toolPolicy,omitempty"`
	Nodes      []NodeState     `json:"nodes"`
	Usage      json.RawMessage `json:"usage"`
	Temporal   struct {
		WorkflowID string `json:"workflowId"`
		RunID      string `json:"runId"`
		UIURL      string `json:"uiUrl"`
	} `json:"temporal"`
	CreatedAt  time.Time  `json:"createdAt"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	// AdmittedAt is when the run got its slot under its limits; Position
	// a throttled run's place in its workflow's queue; Budget its
	// effective budget (nil: none).
	AdmittedAt *time.Time `json:"admittedAt"`
	Position   int        `json:"position"`
	Budget     *Budget    `json:"budget"`
}

// StatusThrottled is the status of a run waiting for a slot under its limits.
const StatusThrottled = "throttled"

// GetRun reads one run with its node states.
func (c *Client) GetRun(ctx context.Context, id string) (Run, error) {
	var out Run
	err := c.doJSON(ctx, http.MethodGet, runPath(id), nil, nil, &out)
	return out, err
}

// pageQuery is the query of a list request: cursor and limit when set, and
// each filter (name, value pairs) whose value is not empty.
func pageQuery(cursor string, limit int, filters ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(filters); i += 2 {
		if filters[i+1] != "" {
			q.Set(filters[i], filters[i+1])
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}

// RunFilter narrows ListRuns.
type RunFilter struct {
	WorkflowKey string
	Status      string
	Limit       int
	Cursor      string
}

// RunPage is one page of runs, newest first.
type RunPage struct {
	Runs       []Run   `json:"runs"`
	NextCursor *string `json:"nextCursor"`
}

// ListRuns lists runs.
func (c *Client) ListRuns(ctx context.Context, f RunFilter) (RunPage, error) {
	q := pageQuery(f.Cursor, f.Limit, "workflowKey", f.WorkflowKey, "status", f.Status)
	var out RunPage
	err := c.doJSON(ctx, http.MethodGet, "/v1/runs", q, nil, &out)
	return out, err
}

// Event is one entry of a run's event log.
type Event struct {
	Seq           int64           `json:"seq"`
	Type          string          `json:"type"`
	SchemaVersion int             `json:"schemaVersion"`
	At            time.Time       `json:"at"`
	NodeID        string          `json:"nodeId,omitempty"`
	Attempt       int             `json:"attempt,omitempty"`
	Data          json.RawMessage `json:"data"`
	PrevHash      string          `json:"prevHash"`
	Hash          string          `json:"hash"`
}

// EventPage is one page of events in seq order.
type EventPage struct {
	Events     []Event `json:"events"`
	NextCursor *string `json:"nextCursor"`
}

// Events reads the page of run id's events after cursor ("" = from the start).
func (c *Client) Events(ctx context.Context, id, cursor string, limit int) (EventPage, error) {
	q := pageQuery(cursor, limit)
	var out EventPage
	err := c.doJSON(ctx, http.MethodGet, runPath(id, "events"), q, nil, &out)
	return out, err
}

// Verification answers GET /v1/runs/{id}/verify.
type Verification struct {
	RunID  string `json:"runId"`
	Intact bool   `json:"intact"`
	Events int64  `json:"events"`
	// FirstBrokenSeq and Reason name the first break; nil and "" when intact.
	FirstBrokenSeq *int64 `json:"firstBrokenSeq,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// VerifyRun asks the server to recompute run id's event hash chain. A run
// whose events retention deleted is an *Error with code EVENTS_DELETED.
func (c *Client) VerifyRun(ctx context.Context, id string) (Verification, error) {
	var out Verification
	err := c.doJSON(ctx, http.MethodGet, runPath(id, "verify"), nil, nil, &out)
	return out, err
}

// Cancelled answers a cancellation request.
type Cancelled struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
}

// CancelRun asks run id to cancel; a finished run is RUN_NOT_ACTIVE.
func (c *Client) CancelRun(ctx context.Context, id string) (Cancelled, error) {
	var out Cancelled
	err := c.doJSON(ctx, http.MethodPost, runPath(id, "cancel"), nil, nil, &out)
	return out, err
}

// EventFollower reads a run's events incrementally: each Next returns the
// events appended since the previous call, keeping the API's cursor. The
// cursor of an exhausted page is the last page's; the follower remembers
// the last seq it returned and asks again from the last cursor it had.
type EventFollower struct {
	c      *Client
	runID  string
	cursor string
	seen   int64
}

// FollowEvents returns a follower of run id's events from the start.
func (c *Client) FollowEvents(id string) *EventFollower {
	return &EventFollower{c: c, runID: id}
}

// Next returns the events not returned before (possibly none).
func (f *EventFollower) Next(ctx context.Context) ([]Event, error) {
	var out []Event
	for {
		page, err := f.c.Events(ctx, f.runID, f.cursor, 500)
		if err != nil {
			return out, err
		}
		for _, ev := range page.Events {
			if ev.Seq > f.seen {
				out = append(out, ev)
				f.seen = ev.Seq
			}
		}
		if page.NextCursor == nil {
			return out, nil
		}
		f.cursor = *page.NextCursor
	}
}

// Revocation withdraws Scope from every schedule and webhook service actor
// Sub configured in the caller's tenant.
type Revocation struct {
	Sub       string    `json:"sub"`
	Scope     string    `json:"scope"`
	CreatedAt time.Time `json:"createdAt"`
	// Created is false when the revocation already existed (AddRevocation).
	Created bool `json:"-"`
}

// RevocationFilter narrows ListRevocations.
type RevocationFilter struct {
	// Sub lists one sub's revocations only ("" = every sub).
	Sub    string
	Limit  int
	Cursor string
}

// RevocationPage is one page of revocations, by sub then scope.
type RevocationPage struct {
	Revocations []Revocation `json:"revocations"`
	NextCursor  *string      `json:"nextCursor"`
}

// ListRevocations lists the tenant's revocations (GET /v1/revocations).
func (c *Client) ListRevocations(ctx context.Context, f RevocationFilter) (RevocationPage, error) {
	q := pageQuery(f.Cursor, f.Limit, "sub", f.Sub)
	var out RevocationPage
	err := c.doJSON(ctx, http.MethodGet, "/v1/revocations", q, nil, &out)
	return out, err
}

// AddRevocation revokes scope from sub's service actors (POST
// /v1/revocations); Created reports whether it is new.
func (c *Client) AddRevocation(ctx context.Context, sub, scope string) (Revocation, error) {
	var out Revocation
	body, err := json.Marshal(map[string]string{"sub": sub, "scope": scope})
	if err != nil {
		return out, err
	}
	status, err := c.send(ctx, http.MethodPost, "/v1/revocations", nil, ContentJSON, body, &out)
	out.Created = status == http.StatusCreated
	return out, err
}

// RemoveRevocation gives scope back to sub's service actors (DELETE
// /v1/revocations/{sub}/{scope}); a missing revocation is NOT_FOUND.
func (c *Client) RemoveRevocation(ctx context.Context, sub, scope string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/revocations/"+url.PathEscape(sub)+"/"+url.PathEscape(scope), nil, nil, nil)
}

// WorkflowLimits are a workflow's caps and default budget, and what its
// runs hold of them (GET /v1/workflows/{key}/limits).
type WorkflowLimits struct {
	WorkflowKey        string     `json:"workflowKey"`
	MaxConcurrentRuns  *int       `json:"maxConcurrentRuns"`
	MaxStartsPerMinute *int       `json:"maxStartsPerMinute"`
	Budget             Budget     `json:"budget"`
	Running            int        `json:"running"`
	Throttled          int        `json:"throttled"`
	StartsLastMinute   int        `json:"startsLastMinute"`
	UpdatedBy          *string    `json:"updatedBy"`
	UpdatedAt          *time.Time `json:"updatedAt"`
}

// TenantLimits is the tenant's cap and what its runs hold of it.
type TenantLimits struct {
	MaxConcurrentRuns *int       `json:"maxConcurrentRuns"`
	Running           int        `json:"running"`
	Throttled         int        `json:"throttled"`
	UpdatedBy         *string    `json:"updatedBy"`
	UpdatedAt         *time.Time `json:"updatedAt"`
}

// Limits answers GET /v1/limits.
type Limits struct {
	Tenant    TenantLimits     `json:"tenant"`
	Workflows []WorkflowLimits `json:"workflows"`
}

// WorkflowLimitsRequest replaces a workflow's limits: a nil field removes
// that limit.
type WorkflowLimitsRequest struct {
	MaxConcurrentRuns  *int    `json:"maxConcurrentRuns"`
	MaxStartsPerMinute *int    `json:"maxStartsPerMinute"`
	Budget             *Budget `json:"budget"`
}

// GetLimits reads the tenant's limits and its workflows' (GET /v1/limits).
func (c *Client) GetLimits(ctx context.Context) (Limits, error) {
	var out Limits
	err := c.doJSON(ctx, http.MethodGet, "/v1/limits", nil, nil, &out)
	return out, err
}

// SetTenantLimits replaces the tenant's cap (PUT /v1/limits); nil removes it.
func (c *Client) SetTenantLimits(ctx context.Context, maxConcurrentRuns *int) (TenantLimits, error) {
	var out TenantLimits
	err := c.doJSON(ctx, http.MethodPut, "/v1/limits", nil, map[string]any{"maxConcurrentRuns": maxConcurrentRuns}, &out)
	return out, err
}

// GetWorkflowLimits reads one workflow's limits.
func (c *Client) GetWorkflowLimits(ctx context.Context, key string) (WorkflowLimits, error) {
	var out WorkflowLimits
	err := c.doJSON(ctx, http.MethodGet, workflowPath(key, "limits"), nil, nil, &out)
	return out, err
}

// SetWorkflowLimits replaces one workflow's limits (PUT /v1/workflows/{key}/limits).
func (c *Client) SetWorkflowLimits(ctx context.Context, key string, req WorkflowLimitsRequest) (WorkflowLimits, error) {
	var out WorkflowLimits
	err := c.doJSON(ctx, http.MethodPut, workflowPath(key, "limits"), nil, req, &out)
	return out, err
}

// Approval is one approval request (GET /v1/approvals, and the answer to a
// decision).
type Approval struct {
	RunID       string                  `json:"runId"`
	WorkflowKey string                  `json:"workflowKey,omitempty"`
	NodeID      string                  `json:"nodeId"`
	Request     int                     `json:"request"`
	Status      string                  `json:"status"`
	Kind        string                  `json:"kind"`
	Call        *execution.ApprovalCall `json:"call,omitempty"`
	TimeoutMs   int64                   `json:"timeoutMs"`
	RequestedAt time.Time               `json:"requestedAt"`
	DeadlineAt  *time.Time              `json:"deadlineAt,omitempty"`
	DecidedAt   *time.Time              `json:"decidedAt,omitempty"`
	Decision    string                  `json:"decision,omitempty"`
	Actor       *execution.Actor        `json:"actor,omitempty"`
	Comment     string                  `json:"comment,omitempty"`
}

// Decide approves or rejects (decision "approve" or "reject") what node
// nodeID of run id waits for; a node not waiting is APPROVAL_NOT_WAITING,
// a request decided already APPROVAL_ALREADY_DECIDED.
func (c *Client) Decide(ctx context.Context, id, nodeID, decision, comment string) (Approval, error) {
	var out Approval
	body := map[string]string{"decision": decision}
	if comment != "" {
		body["comment"] = comment
	}
	err := c.doJSON(ctx, http.MethodPost, runPath(id, "approvals", url.PathEscape(nodeID)), nil, body, &out)
	return out, err
}

// Approvals lists one page of the tenant's approval requests, filtered by
// status ("" for all) and run ("" for all).
func (c *Client) Approvals(ctx context.Context, status, runID, cursor string) ([]Approval, string, error) {
	q := url.Values{}
	for k, v := range map[string]string{"status": status, "runId": runID, "cursor": cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out struct {
		Approvals  []Approval `json:"approvals"`
		NextCursor *string    `json:"nextCursor"`
	}
	if err := c.doJSON(ctx, http.MethodGet, "/v1/approvals", q, nil, &out); err != nil {
		return nil, "", err
	}
	next := ""
	if out.NextCursor != nil {
		next = *out.NextCursor
	}
	return out.Approvals, next, nil
}
