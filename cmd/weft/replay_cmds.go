package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftworks/weft/client"
	"github.com/weftworks/weft/fixtures"
)

// Replay polling: the first GET comes soon (a small replay is done in a
// second or two), later ones back off so a long wait costs few requests.
const (
	replayPollFirst = 250 * time.Millisecond
	replayPollMax   = 2 * time.Second
)

// maxReplayFixturesBytes bounds the --fixtures file: the API's body limit.
const maxReplayFixturesBytes = 1 << 20

// verdictOrder is the order verdicts are counted in the summary line.
var verdictOrder = []string{
	client.VerdictSame, client.VerdictOutputChanged, client.VerdictPathChanged,
	client.VerdictNowFails, client.VerdictNowSucceeds, client.VerdictNotReplayable,
}

func newReplayCmd() *cobra.Command {
	var (
		draft, last  int
		runs, status []string
		fixturesPath string
		asJSON       bool
		wait         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "replay KEY --draft N [--last N | --run RUN_ID...] [--status S,...] [--fixtures FILE] [--json] [--wait 10m]",
		Short: "Replay recorded live runs of KEY through a draft and show what would change",
		Long: `Replays recorded live runs of KEY through draft N in simulation (POST
/v1/workflows/{key}/replays): each run's input goes through the draft, its
nodes answering with what they answered live (agents, actions, approval
decisions). Nothing live is called and nothing is published. It waits until
every run is compared (at most --wait), then prints a row per run

  RUN  RECORDED  SIMULATED  VERDICT  CHANGES

and a summary, with the link to the report on the canvas. VERDICT is same, output-changed, path-changed (nodes that ran
or were skipped differently), now-fails, now-succeeds or not-replayable
(with its reason, e.g. RESULTS_DELETED). CHANGES lists the nodes whose
outcome changed, the output paths that differ and the unrecorded nodes
(nodes the live run never ran, or that the draft adds), which ran on the
simulation default or on --fixtures.

The runs are the last 20 terminal live runs, or --last N (filtered by
--status), or those named by --run (repeatable); --last and --run exclude
each other. The API caps a replay at 50 runs by default.

Exit status: 0 when every replayed run is the same (not-replayable runs are
listed and counted but do not fail it), 1 when any run changed, and 1 on any
error (a refused request, a draft with graph issues, a replay still running
after --wait). --json prints the replay document (GET /v1/replays/{id})
instead of the table, with the same exit status.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := args[0]
			req := client.ReplayRequest{DraftRevision: draft, Runs: runs, Status: status}
			switch {
			case draft < 1:
				return fmt.Errorf("replay %s: --draft must be a draft revision (1 or more), not %d", key, draft)
			case cmd.Flags().Changed("last") && len(runs) > 0:
				return fmt.Errorf("replay %s: --last and --run exclude each other: replay the last N runs or the runs you name", key)
			case cmd.Flags().Changed("last") && last < 1:
				return fmt.Errorf("replay %s: --last must be 1 or more, not %d", key, last)
			case len(status) > 0 && len(runs) > 0:
				return fmt.Errorf("replay %s: --status filters the runs --last chooses; it does not apply to --run", key)
			case wait <= 0:
				return fmt.Errorf("replay %s: --wait must be positive, not %s", key, wait)
			}
			if cmd.Flags().Changed("last") {
				req.Last = last
			}
			if fixturesPath != "" {
				raw, err := readReplayFixtures(fixturesPath)
				if err != nil {
					return fmt.Errorf("replay %s: %w", key, err)
				}
				req.Fixtures = raw
			}
			c, err := apiClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			acc, err := c.StartReplay(ctx, key, req)
			if err != nil {
				printServerIssues(errOut, nil, err)
				return fmt.Errorf("replay %s draft %d: %w", key, draft, err)
			}
			if !asJSON {
				fmt.Fprintf(out, "replay %s: %s of %s through draft %d\n", acc.ReplayID, plural(acc.Runs, "live run"), key, acc.DraftRevision)
			}
			r, err := waitReplay(ctx, c, acc.ReplayID, wait, errOut)
			if err != nil {
				return err
			}
			if asJSON {
				if r.Runs == nil {
					r.Runs = []client.ReplayRun{}
				}
				b, err := json.MarshalIndent(r, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(out, string(b))
			} else {
				if err := printReplay(out, r); err != nil {
					return err
				}
				// The canvas is served by the API under /ui/.
				fmt.Fprintf(out, "report: %s/ui/replays/%s\n", apiBaseURL(), url.PathEscape(r.ReplayID))
			}
			return replayOutcome(r)
		},
	}
	f := cmd.Flags()
	f.IntVar(&draft, "draft", 0, "the draft revision to replay the runs through (required)")
	f.IntVar(&last, "last", 0, "replay the last N terminal live runs (default: the API's, 20)")
	f.StringArrayVar(&runs, "run", nil, "a live run of KEY to replay; repeat for more (excludes --last)")
	f.StringSliceVar(&status, "status", nil, "with --last: only runs that ended so, e.g. succeeded,failed")
	f.StringVar(&fixturesPath, "fixtures", "", "a JSON file of simulation fixtures for nodes without a recording, keyed by node id")
	f.BoolVar(&asJSON, "json", false, "print the replay document as JSON instead of the table")
	f.DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for every run to be compared")
	_ = cmd.MarkFlagRequired("draft")
	return cmd
}

// readReplayFixtures reads and checks the shape of a fixtures file (the
// API checks them against the draft's nodes).
func readReplayFixtures(path string) (json.RawMessage, error) {
	data, err := readFileBounded(path, maxReplayFixturesBytes)
	if err != nil {
		return nil, fmt.Errorf("--fixtures: %w", err)
	}
	if _, problems := fixtures.Parse(data); len(problems) > 0 {
		lines := make([]string, 0, len(problems))
		for _, p := range problems {
			where := p.Path
			if where == "" {
				where = "(document)"
			}
			lines = append(lines, fmt.Sprintf("%s %s %s", path, where, p.Message))
		}
		return nil, fmt.Errorf("--fixtures %s are not simulation fixtures:\n  %s", path, strings.Join(lines, "\n  "))
	}
	return json.RawMessage(data), nil
}

// waitReplay polls replay id until it is done, for at most wait. A
// transient failure (the API unreachable or answering 5xx) is retried
// until then; any other refusal ends the wait. Progress goes to errOut.
func waitReplay(ctx context.Context, c *client.Client, id string, wait time.Duration, errOut io.Writer) (client.Replay, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var (
		last      client.Replay
		lastErr   error
		reported  = -1
		interval  = replayPollFirst
		retrying  bool
		hasAnswer bool
	)
	for {
		r, err := c.GetReplay(wctx, id)
		switch {
		case err == nil:
			last, hasAnswer, retrying, lastErr = r, true, false, nil
			if r.Done() {
				return r, nil
			}
			if compared, total := replayProgress(r); total > 0 && compared != reported {
				reported = compared
				fmt.Fprintf(errOut, "replay %s: %d of %d runs compared\n", id, compared, total)
			}
		case wctx.Err() != nil:
			// The wait ended during the request; reported below.
		case transientError(err):
			lastErr = err
			if !retrying {
				fmt.Fprintf(errOut, "replay %s: %v; retrying\n", id, err)
				retrying = true
			}
		default:
			return last, fmt.Errorf("replay %s: %w", id, err)
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return last, fmt.Errorf("replay %s: stopped waiting (%w); it continues on the server: GET /v1/replays/%s", id, ctx.Err(), id)
			}
			progress := ""
			if compared, total := replayProgress(last); hasAnswer && total > 0 {
				progress = fmt.Sprintf(" (%d of %d runs compared)", compared, total)
			}
			if lastErr != nil {
				progress += fmt.Sprintf("; last answer: %v", lastErr)
			}
			return last, fmt.Errorf("replay %s is not done after --wait %s%s; it continues on the server: GET /v1/replays/%s", id, wait, progress, id)
		case <-time.After(interval):
		}
		interval = min(interval*2, replayPollMax)
	}
}

// replayProgress counts the runs that have their verdict, of all.
func replayProgress(r client.Replay) (compared, total int) {
	for _, run := range r.Runs {
		if run.Verdict != client.VerdictPending {
			compared++
		}
	}
	return compared, len(r.Runs)
}

// transientError reports whether a failed GET is worth asking again: the
// API unreachable, or a 5xx (a store or dependency briefly down).
func transientError(err error) bool {
	var unreachable *client.UnreachableError
	if errors.As(err, &unreachable) {
		return true
	}
	var apiErr *client.Error
	return errors.As(err, &apiErr) && apiErr.Status >= http.StatusInternalServerError
}

// printReplay writes the replay's table and summary.
func printReplay(w io.Writer, r client.Replay) error {
	if len(r.Runs) == 0 {
		fmt.Fprintf(w, "no live runs of %s to replay\n", r.WorkflowKey)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tRECORDED\tSIMULATED\tVERDICT\tCHANGES")
	for _, run := range r.Runs {
		verdict := run.Verdict
		if verdict == client.VerdictPending {
			verdict = "pending"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", run.RunID, orDash(run.RecordedStatus), orDash(run.SimulatedStatus), verdict, replayChanges(run))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, replaySummaryLine(r))
	for _, run := range r.Runs {
		if client.ChangedVerdict(run.Verdict) && run.SimulationRunID != "" {
			fmt.Fprintf(w, "  %s %s: its simulation is run %s (weft events %s)\n", run.RunID, run.Verdict, run.SimulationRunID, run.SimulationRunID)
		}
	}
	return nil
}

// replaySummaryLine counts the runs by verdict, e.g.
// "5 runs through draft 3 of orders: 3 same, 1 path-changed, 1 not-replayable".
func replaySummaryLine(r client.Replay) string {
	counts := map[string]int{}
	for _, run := range r.Runs {
		counts[run.Verdict]++
	}
	var parts []string
	for _, v := range verdictOrder {
		if counts[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	if n := counts[client.VerdictPending]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d pending", n))
	}
	line := fmt.Sprintf("%s through draft %d of %s: %s", plural(len(r.Runs), "run"), r.DraftRevision, r.WorkflowKey, strings.Join(parts, ", "))
	if counts[client.VerdictNotReplayable] == len(r.Runs) {
		line += " (nothing could be replayed)"
	}
	return line
}

// replayOutcome turns a changed run into exit status 1.
func replayOutcome(r client.Replay) error {
	changed := 0
	for _, run := range r.Runs {
		if client.ChangedVerdict(run.Verdict) {
			changed++
		}
	}
	if changed == 0 {
		return nil
	}
	return &silentError{msg: fmt.Sprintf("replay %s: %d of %s would change under draft %d", r.ReplayID, changed, plural(len(r.Runs), "run"), r.DraftRevision)}
}

// maxChangeItems bounds the items of one kind the CHANGES column lists.
const maxChangeItems = 3

// replayChanges is a run's CHANGES column: nodes whose outcome changed,
// output paths that differ, unrecorded nodes; a not-replayable run's reason.
func replayChanges(run client.ReplayRun) string {
	if run.Verdict == client.VerdictNotReplayable {
		return orDash(run.Reason)
	}
	if run.Diff == nil {
		return "-"
	}
	var parts []string
	if len(run.Diff.Nodes) > 0 {
		items := make([]string, 0, len(run.Diff.Nodes))
		for _, n := range run.Diff.Nodes {
			items = append(items, fmt.Sprintf("%s %s→%s", n.NodeID, orDash(n.Recorded), orDash(n.Simulated)))
		}
		parts = append(parts, "nodes "+bounded(items))
	}
	if len(run.Diff.Output) > 0 {
		items := make([]string, 0, len(run.Diff.Output))
		for _, op := range run.Diff.Output {
			items = append(items, outputChange(op))
		}
		out := "output " + bounded(items)
		if run.Diff.Truncated {
			out += " (cut: GET /v1/runs/{id} of both runs has the outputs whole)"
		}
		parts = append(parts, out)
	}
	if len(run.Diff.Unrecorded) > 0 {
		parts = append(parts, "unrecorded "+bounded(run.Diff.Unrecorded))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// outputChange renders one output diff operation, e.g. "/total 3→4".
func outputChange(op client.ReplayDiffOp) string {
	path := op.Path
	if path == "" {
		path = "(whole output)"
	}
	switch op.Op {
	case "add":
		return fmt.Sprintf("%s +%s", path, compactJSON(op.To, 30))
	case "remove":
		return fmt.Sprintf("%s -%s", path, compactJSON(op.From, 30))
	}
	return fmt.Sprintf("%s %s→%s", path, compactJSON(op.From, 30), compactJSON(op.To, 30))
}

// bounded joins items, naming how many more there are beyond maxChangeItems.
func bounded(items []string) string {
	if len(items) <= maxChangeItems {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(items[:maxChangeItems], ", "), len(items)-maxChangeItems)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// plural is "1 run", "2 runs".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
