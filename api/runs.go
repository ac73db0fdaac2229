package api

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
)

// Run route limits.
const (
	// maxEnqueueBody bounds an enqueue request: input plus simulation
	// fixtures (256 KiB) and room for the envelope.
	maxEnqueueBody = starter.MaxInputBytes + 512<<10
	// Page sizes. Each maximum stays below the store's own cap, since a
	// page reads one row more than it returns to know whether another follows.
	defaultRunsLimit   = 50
	maxRunsLimit       = 200
	defaultEventsLimit = 100
	maxEventsLimit     = 500
	defaultNotesLimit  = 50
	maxNotesLimit      = 200
	// projectPage is how many events one query reads when projecting node states.
	projectPage = 1000
)

// errNoStarter answers run routes of a server wired without the execution
// capability (a wiring mistake) with 503 rather than a panic.
var errNoStarter = failure.New(failure.CodeUnavailable, "runs cannot be started or cancelled by this server")

// registerRunRoutes adds the /v1/runs and /v1/notes routes (owned by the runs task).
func (s *Server) registerRunRoutes(g *echo.Group) {
	g.POST("/workflows/:key/runs", s.enqueueRun, requireScope(auth.ScopeRunsExecute))
	g.GET("/runs", s.listRuns, requireScope(auth.ScopeRunsRead))
	g.GET("/runs/:id", s.getRun, requireScope(auth.ScopeRunsRead))
	g.GET("/runs/:id/events", s.listRunEvents, requireScope(auth.ScopeRunsRead))
	g.GET("/runs/:id/events/stream", s.streamRunEvents, requireScope(auth.ScopeRunsRead))
	g.GET("/runs/:id/verify", s.verifyRun, requireScope(auth.ScopeRunsRead))
	g.POST("/runs/:id/cancel", s.cancelRun, requireScope(auth.ScopeRunsCancel))
	g.GET("/notes", s.listNotes, requireScope(auth.ScopeRunsRead))
}

// enqueueRunBody is the body of POST /v1/workflows/{key}/runs.
type enqueueRunBody struct {
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Mode           execution.Mode  `json:"mode"`
	Revision       *int            `json:"revision"`
	DraftRevision  *int            `json:"draftRevision"`
	Fixtures       json.RawMessage `json:"fixtures"`
	// ToolGrants (actionId@version) narrow what the run's agents may
	// call; absent or null grants no narrowing, [] grants no tool.
	ToolGrants []string `json:"toolGrants"`
	// Budget bounds what the run's agent model calls may spend; fields it
	// leaves out take the workflow's default budget.
	Budget *store.Budget `json:"budget"`
}

// acceptedBody answers an enqueue.
type acceptedBody struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
	// Position is a throttled run's place in its workflow's queue.
	Position int    `json:"position,omitempty"`
	Revision int    `json:"revision"`
	Checksum string `json:"checksum"`
	// Temporal names the run's workflow, and the execution this request
	// started or found running, so a client can wait on it or an operator
	// open it without another request.
	Temporal temporalRef `json:"temporal"`
}

// enqueueRun runs a workflow: 202 for a new run, 200 when the idempotency
// key already started the same run. The trusted context (tenant, actor,
// permission snapshot) comes from the token, never from the body.
func (s *Server) enqueueRun(c echo.Context) error {
	if s.deps.Starter == nil {
		return errNoStarter
	}
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	var body enqueueRunBody
	if err := decodeBody(c, maxEnqueueBody, &body); err != nil {
		return err
	}
	p := principal(c)
	acc, err := s.deps.Starter.Enqueue(c.Request().Context(), starter.Request{
		WorkflowKey:    key,
		Input:          body.Input,
		IdempotencyKey: body.IdempotencyKey,
		Mode:           body.Mode,
		Revision:       body.Revision,
		DraftRevision:  body.DraftRevision,
		Fixtures:       body.Fixtures,
		ToolGrants:     body.ToolGrants,
		Budget:         body.Budget,
	}, apiTrusted(p))
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if !acc.Created {
		status = http.StatusOK
	}
	return c.JSON(status, acceptedBody{RunID: acc.RunID, Status: acc.Status, Position: acc.Position, Revision: acc.Revision,
		Checksum: acc.Checksum, Temporal: temporalRef{WorkflowID: acc.WorkflowID, RunID: acc.TemporalRunID,
			UIURL: s.deps.Starter.WorkflowURL(acc.WorkflowID)}})
}

// runBody is a run as the API shows it (SPEC §10).
type runBody struct {
	RunID         string           `json:"runId"`
	WorkflowKey   string           `json:"workflowKey"`
	Revision      int              `json:"revision"`
	DraftRevision *int             `json:"draftRevision,omitempty"`
	Checksum      string           `json:"checksum"`
	Mode          execution.Mode   `json:"mode"`
	Status        string           `json:"status"`
	Input         json.RawMessage  `json:"input"`
	Output        json.RawMessage  `json:"output"`
	Error         json.RawMessage  `json:"error"`
	Origin        execution.Origin `json:"origin"`
	Actor         execution.Actor  `json:"actor"`
	// ToolGrants are the enqueue's toolGrants (null: not narrowed).
	ToolGrants []string `json:"toolGrants"`
	// ToolPolicy is the schedule's or webhook's tool policy when it
	// started the run (absent for a user's run; [] when it had none).
	ToolPolicy *[]string             `json:"toolPolicy,omitempty"`
	Nodes      []execution.NodeState `json:"nodes,omitempty"`
	Usage      json.RawMessage       `json:"usage"`
	Temporal   temporalRef           `json:"temporal"`
	CreatedAt  time.Time             `json:"createdAt"`
	StartedAt  *time.Time            `json:"startedAt,omitempty"`
	FinishedAt *time.Time            `json:"finishedAt,omitempty"`
	// AdmittedAt is when the run got its slot under its limits (its
	// enqueue when it never waited); absent while it is throttled and for
	// runs enqueued before limits existed.
	AdmittedAt *time.Time `json:"admittedAt,omitempty"`
	// Position is a throttled run's place in its workflow's queue (1 is
	// next); absent otherwise.
	Position int `json:"position,omitempty"`
	// Budget is the run's effective budget (the enqueue's over the
	// workflow's default); null when it has none.
	Budget *budgetBody `json:"budget"`
}

// temporalRef tells an operator where to find the run in Temporal.
type temporalRef struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId,omitempty"`
	UIURL      string `json:"uiUrl,omitempty"`
}

func (s *Server) runJSON(r store.Run) runBody {
	return runBody{
		RunID: r.RunID, WorkflowKey: r.WorkflowKey, Revision: r.Revision, DraftRevision: r.DraftRevision,
		Checksum: r.Checksum, Mode: execution.Mode(r.Mode), Status: r.Status,
		Input: orNull(r.Input), Output: orNull(r.Output), Error: orNull(r.Error),
		Origin: r.Origin, Actor: r.Actor, ToolGrants: r.ToolGrants, ToolPolicy: listOrAbsent(r.ToolPolicy), Usage: orEmptyObject(r.Usage),
		Temporal: temporalRef{
			WorkflowID: r.WorkflowID, RunID: r.TemporalRunID,
			UIURL: s.deps.Starter.WorkflowURL(r.WorkflowID),
		},
		CreatedAt: r.CreatedAt, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		AdmittedAt: r.AdmittedAt, Position: r.Position, Budget: runBudget(r.Budget),
	}
}

// runBudget is a run's budget as the API shows it, nil when it has none.
func runBudget(b store.Budget) *budgetBody {
	if b.IsZero() {
		return nil
	}
	out := toBudgetBody(b)
	return &out
}

// listOrAbsent is nil (the field is left out) for a nil list, and the list
// otherwise, even empty.
func listOrAbsent(l []string) *[]string {
	if l == nil {
		return nil
	}
	return &l
}

func orNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

func orEmptyObject(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("{}")
	}
	return r
}

// runsCursor is the position a runs page ends at.
type runsCursor struct {
	CreatedAt time.Time `json:"c"`
	RunID     string    `json:"r"`
}

// listRuns lists the tenant's runs, newest first, filtered by workflowKey
// and status. The cursor is bound to the tenant and the filters.
func (s *Server) listRuns(c echo.Context) error {
	p := principal(c)
	limit, err := pageLimit(c, defaultRunsLimit, maxRunsLimit)
	if err != nil {
		return err
	}
	f := store.RunFilter{WorkflowKey: c.QueryParam("workflowKey"), Status: c.QueryParam("status"),
		Mode: c.QueryParam("mode"), Limit: limit + 1}
	if statuses := execution.RunStatuses(); f.Status != "" && !slices.Contains(statuses, f.Status) {
		return failure.New(failure.CodeInvalidRequest, "status must be one of %s", strings.Join(statuses, ", "))
	}
	switch execution.Mode(f.Mode) {
	case "", execution.ModeLive, execution.ModeSimulation:
	default:
		return failure.New(failure.CodeInvalidRequest, "mode must be live or simulation").
			WithDetails(map[string]any{"field": "mode"})
	}
	scope := cursorScope("runs", p.Tenant, f.WorkflowKey, f.Status)
	if f.Mode != "" { // appended only when set, so cursors issued before the filter existed stay valid
		scope = cursorScope("runs", p.Tenant, f.WorkflowKey, f.Status, f.Mode)
	}
	rc, err := openJSONCursor(s, scope, c.QueryParam("cursor"), func(runsCursor) bool { return true })
	if err != nil {
		return err
	}
	if rc != nil {
		f.Before = &store.RunCursor{CreatedAt: rc.CreatedAt, RunID: rc.RunID}
	}
	runs, err := s.deps.Store.ListRuns(c.Request().Context(), p.Tenant, f)
	if err != nil {
		return err
	}
	runs, next := trimPage(s, scope, runs, limit, func(r store.Run) runsCursor {
		return runsCursor{CreatedAt: r.CreatedAt, RunID: r.RunID}
	})
	items := make([]runBody, 0, len(runs))
	for _, r := range runs {
		items = append(items, s.runJSON(r))
	}
	return list(c, "runs", items, next)
}

// getRun returns one run with its node states projected from the event log.
func (s *Server) getRun(c echo.Context) error {
	p := principal(c)
	r, err := s.tenantRun(c, p.Tenant)
	if err != nil {
		return err
	}
	body := s.runJSON(r)
	nodes, err := s.projectNodes(c, r)
	if err != nil {
		return err
	}
	body.Nodes = nodes
	return c.JSON(http.StatusOK, body)
}

// tenantRun loads the :id run of tenant; another tenant's run is NOT_FOUND,
// indistinguishable from a missing one.
func (s *Server) tenantRun(c echo.Context, tenant string) (store.Run, error) {
	id := c.Param("id")
	r, err := s.deps.Store.GetRun(c.Request().Context(), tenant, id)
	if errors.Is(err, failure.ErrNotFound) {
		return store.Run{}, failure.New(failure.CodeNotFound, "run %q not found", id)
	}
	return r, err
}

// projectNodes folds the run's events into node states, listed in compiled
// order so nodes that have not run yet show as pending (see
// execution.NodeProjection).
func (s *Server) projectNodes(c echo.Context, r store.Run) ([]execution.NodeState, error) {
	ctx := c.Request().Context()
	compiled, err := s.deps.Store.GetCompiled(ctx, r.TenantID, r.Checksum)
	if err != nil {
		return nil, err
	}
	p := execution.NewNodeProjection(compiled.Document.Nodes)
	var after int64
	for {
		events, err := s.deps.Store.ListEvents(ctx, r.TenantID, r.RunID, after, projectPage)
		if err != nil {
			return nil, err
		}
		for _, ev := range events {
			p.Apply(execution.RecordedEvent{Type: ev.Type, NodeID: ev.NodeID, Attempt: ev.Attempt, At: ev.At, Data: ev.Data})
			after = ev.Seq
		}
		if len(events) < projectPage {
			break
		}
	}
	return p.States(r.Status), nil
}

// eventBody is one event as the API shows it (SPEC §10).
type eventBody struct {
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

// listRunEvents pages through a run's event log in seq order. The cursor is
// HMAC-bound to the tenant and the run: another run's cursor, or a tampered
// one, is CURSOR_INVALID.
// verifyResponse answers GET /v1/runs/{id}/verify.
type verifyResponse struct {
	RunID string `json:"runId"`
	// Intact is true when every event's hash matches its content and its
	// predecessor's hash, seq runs 1..n without gaps, and the chain ends
	// at the run's last hash.
	Intact bool `json:"intact"`
	// Events is how many events are stored for the run.
	Events int64 `json:"events"`
	// FirstBrokenSeq and Reason name the first break (absent when intact).
	FirstBrokenSeq *int64 `json:"firstBrokenSeq,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// verifyRun handles GET /v1/runs/{id}/verify: it recomputes the run's
// hash chain from the stored events and reports whether it is intact, or
// the first seq where it breaks (an edited, deleted or reordered event).
// A run whose events retention deleted is 410 EVENTS_DELETED.
func (s *Server) verifyRun(c echo.Context) error {
	p := principal(c)
	r, err := s.tenantRun(c, p.Tenant)
	if err != nil {
		return err
	}
	rep, err := s.deps.Store.CheckChain(c.Request().Context(), p.Tenant, r.RunID)
	if err != nil {
		return notFoundAs(err, "run %q not found", r.RunID)
	}
	out := verifyResponse{RunID: r.RunID, Intact: rep.Intact, Events: rep.Events, Reason: rep.Reason}
	if !rep.Intact {
		out.FirstBrokenSeq = &rep.FirstBrokenSeq
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) listRunEvents(c echo.Context) error {
	p := principal(c)
	r, err := s.tenantRun(c, p.Tenant)
	if err != nil {
		return err
	}
	limit, err := pageLimit(c, defaultEventsLimit, maxEventsLimit)
	if err != nil {
		return err
	}
	scope := cursorScope("events", p.Tenant, r.RunID)
	var after int64
	if cur := c.QueryParam("cursor"); cur != "" {
		payload, err := s.openCursor(scope, cur)
		if err != nil {
			return err
		}
		if len(payload) != 8 {
			return failure.New(failure.CodeCursorInvalid, "the cursor is invalid")
		}
		after = int64(binary.BigEndian.Uint64(payload))
	}
	events, err := s.deps.Store.ListEvents(c.Request().Context(), p.Tenant, r.RunID, after, limit+1)
	if err != nil {
		return err
	}
	next := ""
	if len(events) > limit {
		events = events[:limit]
		next = s.sealCursor(scope, binary.BigEndian.AppendUint64(nil, uint64(events[limit-1].Seq)))
	}
	items := make([]eventBody, 0, len(events))
	for _, ev := range events {
		items = append(items, eventJSON(ev))
	}
	return list(c, "events", items, next)
}

// cancelRun asks a run to cancel: 202 with the run's status at the time of
// the request (the interpreter records the outcome). A finished run is
// 409 RUN_NOT_ACTIVE.
func (s *Server) cancelRun(c echo.Context) error {
	p := principal(c)
	id := c.Param("id")
	actor := execution.Actor{Kind: "user", Sub: p.Sub, Name: p.Name, Email: p.Email}
	if s.deps.Starter == nil {
		return errNoStarter
	}
	if err := s.deps.Starter.Cancel(c.Request().Context(), p.Tenant, id, actor); err != nil {
		return err
	}
	r, err := s.tenantRun(c, p.Tenant)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"runId": r.RunID, "status": r.Status})
}

// noteBody is a note written by workspace.notes.write@1, with the run and
// node that wrote it.
type noteBody struct {
	NoteID string `json:"noteId"`
	RunID  string `json:"runId"`
	NodeID string `json:"nodeId"`
	// Actor is who acted (for a schedule's or webhook's run, the service
	// actor naming it, with configuredBy); RequestedBy is the user behind
	// it. Null for a note whose run was gone when actors were first
	// recorded.
	Actor       *execution.Actor `json:"actor"`
	RequestedBy *string          `json:"requestedBy"`
	Title       string           `json:"title"`
	Body        json.RawMessage  `json:"body"`
	CreatedAt   time.Time        `json:"createdAt"`
}

// notesCursor is the position a notes page ends at.
type notesCursor struct {
	CreatedAt time.Time `json:"c"`
	NoteID    string    `json:"n"`
}

// listNotes lists the tenant's notes, newest first.
func (s *Server) listNotes(c echo.Context) error {
	p := principal(c)
	limit, err := pageLimit(c, defaultNotesLimit, maxNotesLimit)
	if err != nil {
		return err
	}
	scope := cursorScope("notes", p.Tenant)
	nc, err := openJSONCursor(s, scope, c.QueryParam("cursor"), func(notesCursor) bool { return true })
	if err != nil {
		return err
	}
	var before *store.NoteCursor
	if nc != nil {
		before = &store.NoteCursor{CreatedAt: nc.CreatedAt, NoteID: nc.NoteID}
	}
	notes, err := s.deps.Store.ListNotes(c.Request().Context(), p.Tenant, limit+1, before)
	if err != nil {
		return err
	}
	notes, next := trimPage(s, scope, notes, limit, func(n store.Note) notesCursor {
		return notesCursor{CreatedAt: n.CreatedAt, NoteID: n.NoteID}
	})
	items := make([]noteBody, 0, len(notes))
	for _, n := range notes {
		item := noteBody{NoteID: n.NoteID, RunID: n.RunID, NodeID: n.NodeID, Actor: n.Actor, Title: n.Title,
			Body: orNull(n.Body), CreatedAt: n.CreatedAt}
		if n.Actor != nil {
			item.RequestedBy = &n.RequestedBy
		}
		items = append(items, item)
	}
	return list(c, "notes", items, next)
}

// pageLimit reads ?limit= (default def, 1..max).
func pageLimit(c echo.Context, def, max int) (int, error) {
	v := c.QueryParam("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, failure.New(failure.CodeInvalidRequest, "limit must be an integer from 1 to %d", max)
	}
	return n, nil
}
