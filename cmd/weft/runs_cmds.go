package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/weftworks/weft/client"
	"github.com/weftworks/weft/execution"
)

// pollInterval is how often the CLI asks again for a run's status (cancel
// --wait, and the run row after a followed stream ended).
const pollInterval = 200 * time.Millisecond

func newRunCmd() *cobra.Command {
	var (
		input, idem, mode, fixtures string
		revision, draft             int
		wait, quiet, noTools        bool
		timeout                     time.Duration
		toolGrants                  []string
		maxTokens                   int64
		maxCostUSD                  float64
	)
	cmd := &cobra.Command{
		Use:   "run KEY --input JSON [--wait]",
		Short: "Run workflow KEY and print the run id and its Web UI link",
		Long: `Enqueues a run of KEY (the latest published revision unless --revision or,
in simulation, --draft says otherwise) with --input as its input. The
idempotency key defaults to a fresh UUID: pass --idempotency-key to make a
retried command start the same run. Prints the run id and the Temporal Web UI
link. With --wait it follows the run's events with a progress line per event
and exits 0 only when the run succeeded (1 when it failed or was cancelled).

--tool-grant actionId@version (repeatable) narrows what the run's agents may
call to the tools listed; --no-tools grants none. The grants are part of the
idempotency key's binding: the same key with other grants is refused.

--max-tokens and --max-cost-usd set the run's budget (what its agents' model
calls may spend; what you leave out takes the workflow's default). A call
the budget cannot cover fails its agent node with BUDGET_EXCEEDED. The budget
is part of the idempotency key's binding too.

A run over its workflow's or tenant's limits (weft limits) is accepted as
throttled, with its place in the queue, and starts when a slot frees.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			key := args[0]
			if !json.Valid([]byte(input)) {
				return fmt.Errorf("--input is not valid JSON: %s", input)
			}
			req := client.RunRequest{Input: json.RawMessage(input), IdempotencyKey: idem, Mode: mode}
			if req.IdempotencyKey == "" {
				req.IdempotencyKey = uuid.NewString()
			}
			if revision > 0 {
				req.Revision = &revision
			}
			if draft > 0 {
				req.DraftRevision = &draft
			}
			switch {
			case noTools && len(toolGrants) > 0:
				return fmt.Errorf("--no-tools and --tool-grant exclude each other")
			case noTools:
				req.ToolGrants = []string{}
			case len(toolGrants) > 0:
				req.ToolGrants = toolGrants
			}
			if cmd.Flags().Changed("max-tokens") || cmd.Flags().Changed("max-cost-usd") {
				req.Budget = &client.Budget{}
				if cmd.Flags().Changed("max-tokens") {
					req.Budget.MaxTokens = &maxTokens
				}
				if cmd.Flags().Changed("max-cost-usd") {
					req.Budget.MaxCostUSD = &maxCostUSD
				}
			}
			if fixtures != "" {
				if !json.Valid([]byte(fixtures)) {
					return fmt.Errorf("--fixtures is not valid JSON")
				}
				req.Fixtures = json.RawMessage(fixtures)
			}
			c, err := apiClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			acc, err := c.StartRun(ctx, key, req)
			var apiErr *client.Error
			if err != nil && !cmd.Flags().Changed("input") && errors.As(err, &apiErr) && apiErr.Code == "INVALID_INPUT" {
				// Nothing was created: a refused input starts no run.
				return fmt.Errorf("run %s needs --input: its input schema refuses the empty object that is sent without one: %w", key, err)
			}
			if err != nil {
				return fmt.Errorf("run %s: %w", key, err)
			}
			r, err := c.GetRun(ctx, acc.RunID)
			if err != nil {
				return fmt.Errorf("run %s: read run %s: %w", key, acc.RunID, err)
			}
			if quiet {
				fmt.Fprintln(out, acc.RunID)
			} else {
				again := ""
				if !acc.Created {
					again = " (this idempotency key already started it)"
				}
				fmt.Fprintf(out, "run %s %s: workflow %s revision %d, mode %s%s\n", acc.RunID, statusText(acc.Status, acc.Position),
					key, acc.Revision, r.Mode, again)
				if acc.Status == client.StatusThrottled {
					fmt.Fprintf(out, "waiting for a slot under the workflow's or tenant's limits (weft limits); it starts when one frees\n")
				}
				if r.Budget != nil {
					fmt.Fprintf(out, "budget: %s\n", budgetText(*r.Budget))
				}
				if r.Temporal.UIURL != "" {
					fmt.Fprintf(out, "web ui: %s\n", r.Temporal.UIURL)
				}
				if r.ToolGrants != nil {
					fmt.Fprintf(out, "tool grants: %s\n", toolList(r.ToolGrants))
				}
			}
			if !wait {
				return nil
			}
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			final, err := follow(ctx, c, r, out, quiet)
			if err != nil {
				return fmt.Errorf("waiting for run %s: %w", acc.RunID, err)
			}
			return runOutcome(out, final, quiet)
		},
	}
	f := cmd.Flags()
	f.StringVar(&input, "input", "{}", "the run's input, a JSON value (required unless the input schema accepts {})")
	f.StringVar(&idem, "idempotency-key", "", "idempotency key (default: a random UUID)")
	f.StringVar(&mode, "mode", string(execution.ModeLive), "live or simulation")
	f.IntVar(&revision, "revision", 0, "published revision to run (default: the latest)")
	f.IntVar(&draft, "draft", 0, "draft revision to run (simulation only)")
	f.StringVar(&fixtures, "fixtures", "", "simulation fixtures, a JSON object keyed by node id")
	f.BoolVar(&wait, "wait", false, "follow the run's events until it ends; exit 1 unless it succeeded")
	f.BoolVarP(&quiet, "quiet", "q", false, "print only the run id (and, with --wait, the outcome)")
	f.DurationVar(&timeout, "timeout", 0, "with --wait, stop waiting after this long (0: no limit)")
	f.StringArrayVar(&toolGrants, "tool-grant", nil, "a tool (actionId@version) the run's agents may call; repeat for more (default: no narrowing)")
	f.BoolVar(&noTools, "no-tools", false, "grant the run's agents no tool at all")
	f.Int64Var(&maxTokens, "max-tokens", 0, "budget: the most tokens (input and output) the run's model calls may use")
	f.Float64Var(&maxCostUSD, "max-cost-usd", 0, "budget: the most US dollars the run's model calls may cost")
	return cmd
}

// statusText is a run status, with a throttled run's place in its queue.
func statusText(status string, position int) string {
	if status == client.StatusThrottled && position > 0 {
		return fmt.Sprintf("%s #%d", status, position)
	}
	return status
}

// budgetText renders a budget, "none" for no bound.
func budgetText(b client.Budget) string {
	var parts []string
	if b.MaxTokens != nil {
		parts = append(parts, fmt.Sprintf("%d tokens", *b.MaxTokens))
	}
	if b.MaxCostUSD != nil {
		parts = append(parts, fmt.Sprintf("$%s", strconv.FormatFloat(*b.MaxCostUSD, 'f', -1, 64)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// toolList renders a tool list, "(none)" when empty.
func toolList(tools []string) string {
	if len(tools) == 0 {
		return "(none)"
	}
	return strings.Join(tools, ", ")
}

// progress tracks node states from events for the progress display.
type progress struct {
	total int
	done  map[string]bool
	start time.Time
}

func newProgress(r client.Run) *progress {
	return &progress{total: len(r.Nodes), done: map[string]bool{}}
}

// apply folds one event into the node counts.
func (p *progress) apply(ev client.Event) {
	if p.start.IsZero() {
		p.start = ev.At
	}
	switch ev.Type {
	case execution.EventNodeCompleted, execution.EventNodeFailed, execution.EventNodeSkipped,
		execution.EventNodeCancelAcknowledged, execution.EventNodeCancelUnacked:
		if ev.NodeID != "" {
			p.done[ev.NodeID] = true
		}
	}
}

// line renders one event as a progress line:
//
//	[2/4] +0.153s node.completed         echo      port out
func (p *progress) line(ev client.Event) string {
	var d execution.EventData
	_ = json.Unmarshal(ev.Data, &d)
	var detail []string
	switch ev.Type {
	case execution.EventNodeStarted:
		if d.Kind != "" {
			detail = append(detail, string(d.Kind))
		}
	case execution.EventNodeCompleted:
		if d.Port != "" {
			detail = append(detail, "port "+d.Port)
		}
	case execution.EventNodeSkipped:
		detail = append(detail, d.Reason)
	case execution.EventEdgeTaken, execution.EventEdgeDead:
		detail = append(detail, d.From+" → "+d.To)
	case execution.EventNodeRetryScheduled:
		if d.DelayMs != nil {
			detail = append(detail, fmt.Sprintf("attempt %d in %dms", d.NextAttempt, *d.DelayMs))
		}
	case execution.EventRunStarted:
		detail = append(detail, fmt.Sprintf("%s revision %d", d.Mode, d.Revision))
	case execution.EventRunFailed, execution.EventRunCancelled:
		if e := d.RunError; e != nil {
			detail = append(detail, strings.TrimSuffix(e.Code+": "+e.Message+" "+e.NodeID, " "))
		}
	case execution.EventRunThrottled, execution.EventRunAdmitted, "agent.budget.exceeded":
		detail = append(detail, limitsDetail(ev))
	}
	if d.Error != nil {
		detail = append(detail, d.Error.Type+": "+d.Error.Message)
	}
	if ev.Attempt > 1 {
		detail = append(detail, fmt.Sprintf("attempt %d", ev.Attempt))
	}
	if strings.HasPrefix(ev.Type, "tool.") {
		detail = append(detail, toolDetail(ev))
	}
	total := fmt.Sprint(p.total)
	if p.total == 0 {
		total = "?"
	}
	return strings.TrimRight(fmt.Sprintf("[%d/%s] +%.3fs %-26s %-12s %s", len(p.done), total,
		ev.At.Sub(p.start).Seconds(), ev.Type, ev.NodeID, strings.Join(detail, "; ")), " ")
}

// limitsDetail summarises run.throttled (position, reason), run.admitted
// (how long it waited) and agent.budget.exceeded (spent of allowed).
func limitsDetail(ev client.Event) string {
	var d struct {
		Position  int    `json:"position"`
		Reason    string `json:"reason"`
		WaitedMs  int64  `json:"waitedMs"`
		Dimension string `json:"dimension"`
		Spent     struct {
			Total   int64   `json:"total"`
			CostUSD float64 `json:"costUsd"`
		} `json:"spent"`
		Allowed struct {
			Total   *int64   `json:"total"`
			CostUSD *float64 `json:"costUsd"`
		} `json:"allowed"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	switch ev.Type {
	case execution.EventRunThrottled:
		return fmt.Sprintf("position %d (%s)", d.Position, d.Reason)
	case execution.EventRunAdmitted:
		return fmt.Sprintf("after %s", (time.Duration(d.WaitedMs) * time.Millisecond).String())
	}
	if d.Dimension == "costUsd" && d.Allowed.CostUSD != nil {
		return fmt.Sprintf("spent $%s of $%s", strconv.FormatFloat(d.Spent.CostUSD, 'f', -1, 64), strconv.FormatFloat(*d.Allowed.CostUSD, 'f', -1, 64))
	}
	if d.Allowed.Total != nil {
		return fmt.Sprintf("spent %d of %d tokens", d.Spent.Total, *d.Allowed.Total)
	}
	return ""
}

// toolDetail summarises a tool.* event of an agent node: the tool, and
// why a call was denied or failed, or how long it took.
func toolDetail(ev client.Event) string {
	var d struct {
		Tool       string `json:"tool"`
		Name       string `json:"name"`
		Reason     string `json:"reason"`
		Message    string `json:"message"`
		DurationMs *int64 `json:"durationMs"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	tool := d.Tool
	if tool == "" {
		tool = d.Name
	}
	switch {
	case d.Message != "" && strings.HasPrefix(d.Message, tool):
		return d.Reason + " " + d.Message
	case d.Message != "":
		return fmt.Sprintf("%s: %s %s", tool, d.Reason, d.Message)
	case d.DurationMs != nil:
		return fmt.Sprintf("%s in %dms", tool, *d.DurationMs)
	}
	return tool
}

// follow prints the run's events as they are appended until the run is
// terminal, then returns the run as it ended. It reads the run's event
// stream (GET /v1/runs/{id}/events/stream), which ends once the run is
// terminal, whether the interpreter or the reconciler closed it.
func follow(ctx context.Context, c *client.Client, r client.Run, out io.Writer, quiet bool) (client.Run, error) {
	p := newProgress(r)
	_, err := c.StreamEvents(ctx, r.RunID, 0, func(ev client.Event) error {
		p.apply(ev)
		if !quiet {
			fmt.Fprintln(out, p.line(ev))
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	// The stream ends once the run row is terminal, in the transaction of
	// its terminal event: the output and error are there.
	for {
		latest, err := c.GetRun(ctx, r.RunID)
		if err != nil {
			return r, err
		}
		if execution.Terminal(latest.Status) {
			return latest, nil
		}
		select {
		case <-ctx.Done():
			return latest, ctx.Err()
		case <-time.After(pollInterval / 2):
		}
	}
}

// runOutcome prints how a run ended and turns anything but success into
// exit status 1.
func runOutcome(out io.Writer, r client.Run, quiet bool) error {
	took := ""
	if r.StartedAt != nil && r.FinishedAt != nil {
		took = fmt.Sprintf(" in %s", r.FinishedAt.Sub(*r.StartedAt).Round(time.Millisecond))
	}
	switch r.Status {
	case execution.StatusSucceeded:
		fmt.Fprintf(out, "run %s succeeded%s: output %s\n", r.RunID, took, compactJSON(r.Output, 2000))
		return nil
	default:
		fmt.Fprintf(out, "run %s %s%s: %s\n", r.RunID, r.Status, took, compactJSON(r.Error, 2000))
		return &silentError{msg: fmt.Sprintf("run %s %s", r.RunID, r.Status)}
	}
}

// compactJSON renders raw JSON on one line, shortened to max bytes.
func compactJSON(raw json.RawMessage, max int) string {
	if len(raw) == 0 {
		return "null"
	}
	var v any
	s := string(raw)
	if json.Unmarshal(raw, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			s = string(b)
		}
	}
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

func newRunsCmd() *cobra.Command {
	var (
		f   client.RunFilter
		all bool
	)
	cmd := &cobra.Command{
		Use:   "runs [--key KEY] [--status STATUS]",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := apiClient()
			if err != nil {
				return err
			}
			header := "RUN ID\tWORKFLOW\tREVISION\tMODE\tSTATUS\tORIGIN\tCREATED"
			return printPages(cmd.OutOrStdout(), header, "no runs match", all, func(cursor string) ([]string, *string, error) {
				f.Cursor = cursor
				page, err := c.ListRuns(cmd.Context(), f)
				if err != nil {
					return nil, nil, fmt.Errorf("runs: %w", err)
				}
				rows := make([]string, 0, len(page.Runs))
				for _, r := range page.Runs {
					rows = append(rows, fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%s\t%s", r.RunID, r.WorkflowKey, r.Revision, r.Mode, statusText(r.Status, r.Position),
						r.Origin.Kind, r.CreatedAt.Local().Format(time.DateTime)))
				}
				return rows, page.NextCursor, nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.WorkflowKey, "key", "", "only runs of this workflow")
	fl.StringVar(&f.Status, "status", "", "only runs in this status: throttled, queued, running, succeeded, failed or cancelled")
	fl.IntVar(&f.Limit, "limit", 50, "runs per page")
	fl.BoolVar(&all, "all", false, "list every page, not only the first")
	return cmd
}

func newEventsCmd() *cobra.Command {
	var (
		follow bool
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "events RUN_ID [--follow]",
		Short: "Print a run's events in order",
		Long: `Prints the run's event log, one line per event (seq, time, type, node,
attempt, data), or the events as JSON lines with --json. With --follow it
follows the run's live event stream (GET /v1/runs/{id}/events/stream) until
the run ends.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c, err := apiClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			id := args[0]
			if _, err := c.GetRun(ctx, id); err != nil {
				return fmt.Errorf("events %s: %w", id, err)
			}
			printEvent := func(ev client.Event) error {
				if asJSON {
					b, _ := json.Marshal(ev)
					fmt.Fprintln(out, string(b))
					return nil
				}
				attempt := ""
				if ev.Attempt > 0 {
					attempt = fmt.Sprintf("#%d", ev.Attempt)
				}
				fmt.Fprintf(out, "%4d %s %-26s %-12s %-3s %s\n", ev.Seq, ev.At.Local().Format("15:04:05.000"),
					ev.Type, ev.NodeID, attempt, compactJSON(ev.Data, 300))
				return nil
			}
			if follow {
				// The live stream, until the run's terminal event; Ctrl-C stops.
				if _, err := c.StreamEvents(ctx, id, 0, printEvent); err != nil && ctx.Err() == nil {
					return fmt.Errorf("events %s: %w", id, err)
				}
				return nil
			}
			events, err := c.FollowEvents(id).Next(ctx)
			for _, ev := range events {
				_ = printEvent(ev)
			}
			if err != nil {
				return fmt.Errorf("events %s: %w", id, err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until the run ends")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each event as a JSON line")
	return cmd
}

func newCancelCmd() *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "cancel RUN_ID [--wait]",
		Short: "Ask a run to cancel",
		Long: `Requests cancellation: no new node starts, in-flight nodes are asked to stop,
and the run ends cancelled. With --wait the command waits until it has.
A run that already ended is RUN_NOT_ACTIVE.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c, err := apiClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			res, err := c.CancelRun(ctx, args[0])
			if err != nil {
				return fmt.Errorf("cancel %s: %w", args[0], err)
			}
			fmt.Fprintf(out, "cancel requested: run %s (was %s)\n", res.RunID, res.Status)
			if !wait {
				return nil
			}
			for {
				r, err := c.GetRun(ctx, res.RunID)
				if err != nil {
					return err
				}
				if execution.Terminal(r.Status) {
					fmt.Fprintf(out, "run %s %s\n", r.RunID, r.Status)
					if r.Status != execution.StatusCancelled {
						return errors.New("the run ended before the cancellation took effect")
					}
					return nil
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(pollInterval):
				}
			}
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the run has ended")
	return cmd
}

func newVerifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify RUN_ID",
		Short: "Check that a run's event chain is intact",
		Long: `Asks the server to recompute the run's hash-chained event log (each event's
hash = sha256(previous hash || canonical event)) and prints whether it is
intact. Exits 0 when it is, 1 when it is broken (printing the first seq that
does not match: an edited, deleted or reordered event) or cannot be checked
(EVENTS_DELETED: retention deleted the run's events).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			c, err := apiClient()
			if err != nil {
				return err
			}
			v, err := c.VerifyRun(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("verify %s: %w", args[0], err)
			}
			if v.Intact {
				fmt.Fprintf(out, "run %s: event chain intact (%d events)\n", v.RunID, v.Events)
				return nil
			}
			seq := int64(0)
			if v.FirstBrokenSeq != nil {
				seq = *v.FirstBrokenSeq
			}
			fmt.Fprintf(out, "run %s: event chain BROKEN at seq %d of %d: %s\n", v.RunID, seq, v.Events, v.Reason)
			return &silentError{msg: fmt.Sprintf("run %s: event chain broken at seq %d", v.RunID, seq)}
		},
	}
}
