package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/replay"
	"github.com/weftworks/weft/store"
)

// Replay route limits.
const (
	// maxReplayBody bounds a replay request: its fixtures (at most
	// fixtures.MaxBytes) and room for the run ids.
	maxReplayBody       = 512 << 10
	defaultReplaysLimit = 20
	maxReplaysLimit     = 100
)

// errNoReplays answers the replay routes of a server wired without the
// replay engine (a wiring mistake) with 503 rather than a panic.
var errNoReplays = failure.New(failure.CodeUnavailable, "replays cannot be started by this server")

// registerReplayRoutes adds the replay routes (issue 21). Starting one
// starts simulation runs, so it needs runs.execute beside the read scopes.
func (s *Server) registerReplayRoutes(g *echo.Group) {
	g.POST("/workflows/:key/replays", s.startReplay,
		requireScopes(auth.ScopeWorkflowsRead, auth.ScopeRunsRead, auth.ScopeRunsExecute))
	g.GET("/workflows/:key/replays", s.listReplays, requireScopes(auth.ScopeWorkflowsRead, auth.ScopeRunsRead))
	g.GET("/replays/:id", s.getReplay, requireScopes(auth.ScopeWorkflowsRead, auth.ScopeRunsRead))
}

// startReplayBody is the body of POST /v1/workflows/{key}/replays.
type startReplayBody struct {
	DraftRevision int             `json:"draftRevision" required:"true"`
	Runs          []string        `json:"runs"`
	Last          *int            `json:"last"`
	Status        []string        `json:"status"`
	Fixtures      json.RawMessage `json:"fixtures"`
}

// replayStartedBody answers a started replay (202).
type replayStartedBody struct {
	ReplayID      string `json:"replayId"`
	Status        string `json:"status"`
	WorkflowKey   string `json:"workflowKey"`
	DraftRevision int    `json:"draftRevision"`
	Runs          int    `json:"runs"`
}

// startReplay replays recorded live runs of a workflow through one of its
// drafts: 202 with the replay id; GET /v1/replays/{id} reports.
func (s *Server) startReplay(c echo.Context) error {
	if s.deps.Replays == nil {
		return errNoReplays
	}
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	var body startReplayBody
	if err := decodeBody(c, maxReplayBody, &body); err != nil {
		return err
	}
	p := principal(c)
	started, err := s.deps.Replays.Start(c.Request().Context(), replay.Request{
		WorkflowKey: key, DraftRevision: body.DraftRevision, Runs: body.Runs, Last: body.Last,
		Status: body.Status, Fixtures: body.Fixtures,
	}, apiTrusted(p))
	if err != nil {
		return err
	}
	r := started.Replay
	return c.JSON(http.StatusAccepted, replayStartedBody{ReplayID: r.ReplayID, Status: r.Status,
		WorkflowKey: r.WorkflowKey, DraftRevision: r.DraftRevision, Runs: started.Runs})
}

// replayBody is a replay as lists show it: without its runs.
type replayBody struct {
	ReplayID      string         `json:"replayId"`
	WorkflowKey   string         `json:"workflowKey"`
	DraftRevision int            `json:"draftRevision"`
	Status        string         `json:"status"`
	CreatedAt     time.Time      `json:"createdAt"`
	FinishedAt    *time.Time     `json:"finishedAt,omitempty"`
	Summary       replay.Summary `json:"summary"`
}

// replayReportBody is one replay with every run (GET /v1/replays/{id}).
type replayReportBody struct {
	replayBody
	Runs []replayRunBody `json:"runs"`
}

// replayRunBody is one replayed run.
type replayRunBody struct {
	RunID           string          `json:"runId"`
	Verdict         string          `json:"verdict"`
	Reason          string          `json:"reason,omitempty"`
	SimulationRunID string          `json:"simulationRunId,omitempty"`
	RecordedStatus  string          `json:"recordedStatus,omitempty"`
	SimulatedStatus string          `json:"simulatedStatus,omitempty"`
	Diff            json.RawMessage `json:"diff,omitempty"`
}

func replayJSON(r store.Replay, counts map[string]int) replayBody {
	return replayBody{ReplayID: r.ReplayID, WorkflowKey: r.WorkflowKey, DraftRevision: r.DraftRevision,
		Status: r.Status, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt, Summary: replay.Summarize(counts)}
}

// getReplay reports a replay: per run its verdict, diff and simulation run.
// Another tenant's replay is 404, like a missing one.
func (s *Server) getReplay(c echo.Context) error {
	p := principal(c)
	id := c.Param("id")
	r, runs, err := s.deps.Store.GetReplay(c.Request().Context(), p.Tenant, id)
	if errors.Is(err, failure.ErrNotFound) {
		return failure.New(failure.CodeNotFound, "replay %q not found", id)
	}
	if err != nil {
		return err
	}
	counts := map[string]int{}
	items := make([]replayRunBody, 0, len(runs))
	for _, rr := range runs {
		counts[rr.Verdict]++
		items = append(items, replayRunBody{RunID: rr.RunID, Verdict: rr.Verdict, Reason: rr.Reason,
			SimulationRunID: rr.SimulationRunID, RecordedStatus: rr.RecordedStatus, SimulatedStatus: rr.SimulatedStatus,
			Diff: rr.Diff})
	}
	return c.JSON(http.StatusOK, replayReportBody{replayBody: replayJSON(r, counts), Runs: items})
}

// replaysCursor is a position in a workflow's replays.
type replaysCursor struct {
	CreatedAt time.Time `json:"c"`
	ReplayID  string    `json:"r"`
}

// listReplays lists a workflow's replays, newest first, without their runs.
func (s *Server) listReplays(c echo.Context) error {
	p := principal(c)
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	limit, err := pageLimit(c, defaultReplaysLimit, maxReplaysLimit)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := s.deps.Store.GetWorkflow(ctx, p.Tenant, key); errors.Is(err, failure.ErrNotFound) {
		return failure.New(failure.CodeNotFound, "workflow %q not found", key)
	} else if err != nil {
		return err
	}
	scope := cursorScope("replays", p.Tenant, key)
	rc, err := openJSONCursor(s, scope, c.QueryParam("cursor"), func(replaysCursor) bool { return true })
	if err != nil {
		return err
	}
	var before *store.ReplayCursor
	if rc != nil {
		before = &store.ReplayCursor{CreatedAt: rc.CreatedAt, ReplayID: rc.ReplayID}
	}
	found, sums, err := s.deps.Store.ListReplays(ctx, p.Tenant, key, before, limit+1)
	if err != nil {
		return err
	}
	type row struct {
		r   store.Replay
		sum store.ReplaySummary
	}
	rows := make([]row, len(found))
	for i := range found {
		rows[i] = row{found[i], sums[i]}
	}
	rows, next := trimPage(s, scope, rows, limit, func(x row) replaysCursor {
		return replaysCursor{CreatedAt: x.r.CreatedAt, ReplayID: x.r.ReplayID}
	})
	items := make([]replayBody, 0, len(rows))
	for _, x := range rows {
		items = append(items, replayJSON(x.r, x.sum))
	}
	return list(c, "replays", items, next)
}
