package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftworks/weft/client"
	"github.com/weftworks/weft/execution"
)

// newDecideCmd is `weft approve` or `weft reject`: a decision on what a
// run's node waits for, through POST /v1/runs/{id}/approvals/{nodeId}.
func newDecideCmd(verb, decision string) *cobra.Command {
	var comment string
	cmd := &cobra.Command{
		Use:   verb + " RUN_ID NODE_ID [--comment TEXT]",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " what a run's node waits for",
		Long: `Decides the approval node NODE_ID of run RUN_ID, or the tool call its agent
node waits to make, as you (your token needs runs.approve). The decision is
recorded in the run's events with you as its actor. A node that is not
waiting is APPROVAL_NOT_WAITING; one decided already APPROVAL_ALREADY_DECIDED
(exit 1 either way). weft approvals --status pending lists what waits.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := apiClient()
			if err != nil {
				return err
			}
			a, err := c.Decide(cmd.Context(), args[0], args[1], decision, comment)
			if err != nil {
				return fmt.Errorf("%s %s %s: %w", verb, args[0], args[1], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "run %s node %s: request %d %s\n", args[0], a.NodeID, a.Request, a.Status)
			return nil
		},
	}
	cmd.Flags().StringVar(&comment, "comment", "", "a comment recorded with the decision (at most 1000 characters)")
	return cmd
}

func newApprovalsCmd() *cobra.Command {
	var status, runID string
	var all bool
	cmd := &cobra.Command{
		Use:   "approvals [--status pending] [--run RUN_ID] [--all]",
		Short: "List approval requests (what runs wait for, and what was decided)",
		Long: `Lists the tenant's approval requests, newest first: RUN, NODE, REQUEST,
STATUS (pending, approved, rejected, timed_out, cancelled), what waits (the
node, or the tool call of an agent), its deadline and who decided. --all
reads every page (default: the first).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := apiClient()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tNODE\tREQUEST\tSTATUS\tWAITS FOR\tDEADLINE\tDECIDED BY")
			cursor := ""
			for {
				page, next, err := c.Approvals(cmd.Context(), status, runID, cursor)
				if err != nil {
					return err
				}
				for _, a := range page {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.RunID, a.NodeID, a.Request, a.Status, waitsFor(a),
						timeOrDash(a.DeadlineAt), decider(a.Actor))
				}
				if next == "" || !all {
					break
				}
				cursor = next
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "pending, approved, rejected, timed_out or cancelled")
	cmd.Flags().StringVar(&runID, "run", "", "one run's requests")
	cmd.Flags().BoolVar(&all, "all", false, "read every page")
	return cmd
}

func waitsFor(a client.Approval) string {
	if a.Call != nil {
		return fmt.Sprintf("tool call %d: %s", a.Call.Ordinal, a.Call.Tool)
	}
	return "approval node"
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func decider(a *execution.Actor) string {
	switch {
	case a == nil:
		return "-"
	case a.Kind == execution.ActorOperator:
		return "operator " + a.Identity
	case a.Sub != "":
		return a.Sub
	}
	return a.Kind
}
