package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Replay verdicts: what a recorded live run would do under the draft.
const (
	VerdictSame          = "same"
	VerdictOutputChanged = "output-changed"
	VerdictPathChanged   = "path-changed"
	VerdictNowFails      = "now-fails"
	VerdictNowSucceeds   = "now-succeeds"
	VerdictNotReplayable = "not-replayable"
	// VerdictPending is a run not compared yet.
	VerdictPending = ""
)

// Replay statuses.
const (
	ReplayRunning = "running"
	ReplayDone    = "done"
)

// ChangedVerdict reports whether verdict says the run would behave
// differently under the draft (output-changed, path-changed, now-fails,
// now-succeeds). same, not-replayable and pending are not changes.
func ChangedVerdict(verdict string) bool {
	switch verdict {
	case VerdictOutputChanged, VerdictPathChanged, VerdictNowFails, VerdictNowSucceeds:
		return true
	}
	return false
}

// ReplayRequest is the body of POST /v1/workflows/{key}/replays: replay
// recorded live runs of the workflow through draft DraftRevision. Runs
// names them; otherwise the API takes the Last terminal live runs (20 when
// 0), filtered by Status. Runs and Last exclude each other.
type ReplayRequest struct {
	DraftRevision int      `json:"draftRevision"`
	Runs          []string `json:"runs,omitempty"`
	Last          int      `json:"last,omitempty"`
	Status        []string `json:"status,omitempty"`
	// Fixtures stand in for nodes that have no recording (the simulation
	// fixture shape, keyed by node id).
	Fixtures json.RawMessage `json:"fixtures,omitempty"`
}

// ReplayAccepted answers a replay's start (202).
type ReplayAccepted struct {
	ReplayID      string `json:"replayId"`
	Status        string `json:"status"`
	WorkflowKey   string `json:"workflowKey"`
	DraftRevision int    `json:"draftRevision"`
	// Runs is how many live runs the replay chose.
	Runs int `json:"runs"`
}

// ReplaySummary counts a replay's runs by verdict.
type ReplaySummary struct {
	Same          int `json:"same"`
	OutputChanged int `json:"outputChanged"`
	PathChanged   int `json:"pathChanged"`
	NowFails      int `json:"nowFails"`
	NowSucceeds   int `json:"nowSucceeds"`
	NotReplayable int `json:"notReplayable"`
	Pending       int `json:"pending"`
}

// Changed is how many runs would behave differently under the draft.
func (s ReplaySummary) Changed() int {
	return s.OutputChanged + s.PathChanged + s.NowFails + s.NowSucceeds
}

// Total is how many runs the replay holds.
func (s ReplaySummary) Total() int {
	return s.Same + s.Changed() + s.NotReplayable + s.Pending
}

// ReplayDiffOp is one change of the run output, as a JSON pointer and the
// recorded (From) and simulated (To) values; From is absent for an add, To
// for a remove.
type ReplayDiffOp struct {
	Op   string          `json:"op"`
	Path string          `json:"path"`
	From json.RawMessage `json:"from,omitempty"`
	To   json.RawMessage `json:"to,omitempty"`
}

// ReplayNodeChange is a node whose outcome differs: its recorded and its
// simulated status (succeeded, failed, skipped, ...; "none" when it has
// none), with the port that fired when only that differs ("succeeded:yes").
type ReplayNodeChange struct {
	NodeID    string `json:"nodeId"`
	Recorded  string `json:"recorded"`
	Simulated string `json:"simulated"`
}

// ReplayDiff is the compact difference between a recorded run and its
// simulation under the draft.
type ReplayDiff struct {
	Output []ReplayDiffOp     `json:"output,omitempty"`
	Nodes  []ReplayNodeChange `json:"nodes,omitempty"`
	// Unrecorded are the nodes that had no recording to replay (a node the
	// draft adds, a branch the live run did not take): they ran on the
	// simulation default or a fixture the request supplied.
	Unrecorded []string `json:"unrecorded,omitempty"`
	// Truncated says Output was cut to the API's bound (GET
	// /v1/runs/{id} of both runs has the outputs whole).
	Truncated bool `json:"truncated,omitempty"`
}

// ReplayRun is one recorded live run in a replay.
type ReplayRun struct {
	RunID string `json:"runId"`
	// Verdict is one of the Verdict constants ("" while pending).
	Verdict string `json:"verdict"`
	// Reason says why a run is not replayable (RESULTS_DELETED, ...).
	Reason string `json:"reason,omitempty"`
	// SimulationRunID is the simulated run (GET /v1/runs/{id} reads it).
	SimulationRunID string      `json:"simulationRunId,omitempty"`
	RecordedStatus  string      `json:"recordedStatus,omitempty"`
	SimulatedStatus string      `json:"simulatedStatus,omitempty"`
	Diff            *ReplayDiff `json:"diff,omitempty"`
}

// Replay is GET /v1/replays/{id}: a replay's state and, once compared,
// each run's verdict. List items have no Runs.
type Replay struct {
	ReplayID      string        `json:"replayId"`
	WorkflowKey   string        `json:"workflowKey"`
	DraftRevision int           `json:"draftRevision"`
	Status        string        `json:"status"`
	CreatedAt     time.Time     `json:"createdAt"`
	FinishedAt    *time.Time    `json:"finishedAt,omitempty"`
	Summary       ReplaySummary `json:"summary"`
	Runs          []ReplayRun   `json:"runs"`
}

// Done reports whether every run of the replay has its verdict.
func (r Replay) Done() bool { return r.Status == ReplayDone }

// ReplayPage is one page of a workflow's replays, newest first.
type ReplayPage struct {
	Replays    []Replay `json:"replays"`
	NextCursor *string  `json:"nextCursor"`
}

// StartReplay replays recorded live runs of key through a draft (POST
// /v1/workflows/{key}/replays). A draft with graph issues is an *Error
// with code INVALID_GRAPH and Issues(); a run that is not key's is
// REPLAY_RUN_INVALID (details.runId); too many runs REPLAY_TOO_MANY_RUNS
// (details.limit).
func (c *Client) StartReplay(ctx context.Context, key string, req ReplayRequest) (ReplayAccepted, error) {
	var out ReplayAccepted
	err := c.doJSON(ctx, http.MethodPost, workflowPath(key, "replays"), nil, req, &out)
	return out, err
}

// GetReplay reads replay id with its runs; another tenant's is NOT_FOUND.
func (c *Client) GetReplay(ctx context.Context, id string) (Replay, error) {
	var out Replay
	err := c.doJSON(ctx, http.MethodGet, "/v1/replays/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// ListReplays lists one page of key's replays, newest first, without
// their runs.
func (c *Client) ListReplays(ctx context.Context, key string, limit int, cursor string) (ReplayPage, error) {
	var out ReplayPage
	err := c.doJSON(ctx, http.MethodGet, workflowPath(key, "replays"), pageQuery(cursor, limit), nil, &out)
	return out, err
}
