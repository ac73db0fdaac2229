package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weftworks/weft/client"
)

// newLimitsCmd is `weft limits [set]`: caps on running work per tenant and
// per workflow, and workflows' default budgets (docs/limits.md).
func newLimitsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Show the tenant's and its workflows' limits and what runs hold of them",
		Long: `Prints the tenant's cap on concurrent runs and, per workflow with limits or
runs holding or waiting for a slot, its caps (concurrent runs, starts per
minute), its default budget and its runs: RUNNING holds slots (queued or
running), THROTTLED waits for one, STARTS/MIN were admitted in the last
minute. The token needs workflows.read; setting limits (weft limits set)
needs limits.manage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := apiClient()
			if err != nil {
				return err
			}
			l, err := c.GetLimits(cmd.Context())
			if err != nil {
				return fmt.Errorf("limits: %w", err)
			}
			printLimits(cmd.OutOrStdout(), l)
			return nil
		},
	}
	cmd.AddCommand(newLimitsSetCmd())
	return cmd
}

func printLimits(w io.Writer, l client.Limits) {
	fmt.Fprintf(w, "tenant: max concurrent runs %s; %d running, %d throttled\n",
		capText(l.Tenant.MaxConcurrentRuns), l.Tenant.Running, l.Tenant.Throttled)
	if len(l.Workflows) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tMAX CONCURRENT\tMAX STARTS/MIN\tBUDGET\tRUNNING\tTHROTTLED\tSTARTS/MIN")
	for _, wl := range l.Workflows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\n", wl.WorkflowKey, capText(wl.MaxConcurrentRuns),
			capText(wl.MaxStartsPerMinute), budgetText(wl.Budget), wl.Running, wl.Throttled, wl.StartsLastMinute)
	}
	_ = tw.Flush()
}

func capText(v *int) string {
	if v == nil {
		return "none"
	}
	return strconv.Itoa(*v)
}

// limitValue is a flag set to a positive integer, or "none" to remove.
type limitValue struct {
	set  bool
	none bool
	n    int64
}

func (v *limitValue) String() string {
	switch {
	case !v.set:
		return ""
	case v.none:
		return "none"
	}
	return strconv.FormatInt(v.n, 10)
}

func (v *limitValue) Set(s string) error {
	v.set = true
	if strings.EqualFold(strings.TrimSpace(s), "none") {
		v.none = true
		return nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 1 {
		return fmt.Errorf("%q is not a positive integer or none", s)
	}
	v.n = n
	return nil
}

func (v *limitValue) Type() string { return "N|none" }

// apply returns the new value of a limit: unchanged when the flag was not
// given, nil for none.
func (v *limitValue) apply(current *int) *int {
	switch {
	case !v.set:
		return current
	case v.none:
		return nil
	}
	n := int(v.n)
	return &n
}

// costValue is a flag set to a positive dollar amount, or "none".
type costValue struct {
	set  bool
	none bool
	usd  float64
}

func (v *costValue) String() string {
	switch {
	case !v.set:
		return ""
	case v.none:
		return "none"
	}
	return strconv.FormatFloat(v.usd, 'f', -1, 64)
}

func (v *costValue) Set(s string) error {
	v.set = true
	if strings.EqualFold(strings.TrimSpace(s), "none") {
		v.none = true
		return nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(f > 0) {
		return fmt.Errorf("%q is not a positive amount or none", s)
	}
	v.usd = f
	return nil
}

func (v *costValue) Type() string { return "USD|none" }

func newLimitsSetCmd() *cobra.Command {
	var (
		key                       string
		concurrent, rate, budgetT limitValue
		budgetC                   costValue
	)
	cmd := &cobra.Command{
		Use:   "set [--workflow KEY] [--max-concurrent-runs N|none] [--max-starts-per-minute N|none] [--budget-tokens N|none] [--budget-usd X|none]",
		Short: "Change the tenant's cap, or a workflow's caps and default budget",
		Long: `Without --workflow, sets the tenant's cap on concurrent runs (across all its
workflows). With --workflow KEY, sets that workflow's caps and the default
budget of its runs. Only the limits named change; "none" removes one. Runs
waiting that the new limits make room for start at once; a cap lowered
below what runs hold stops none of them. The token needs limits.manage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := apiClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			if key == "" {
				if rate.set || budgetT.set || budgetC.set {
					return fmt.Errorf("--max-starts-per-minute and budgets are set per workflow: add --workflow KEY")
				}
				if !concurrent.set {
					return fmt.Errorf("nothing to set: give --max-concurrent-runs (or --workflow KEY with its limits)")
				}
				cur, err := c.GetLimits(ctx)
				if err != nil {
					return fmt.Errorf("limits set: %w", err)
				}
				t, err := c.SetTenantLimits(ctx, concurrent.apply(cur.Tenant.MaxConcurrentRuns))
				if err != nil {
					return fmt.Errorf("limits set: %w", err)
				}
				fmt.Fprintf(out, "tenant: max concurrent runs %s; %d running, %d throttled\n", capText(t.MaxConcurrentRuns), t.Running, t.Throttled)
				return nil
			}
			if !concurrent.set && !rate.set && !budgetT.set && !budgetC.set {
				return fmt.Errorf("nothing to set for workflow %s", key)
			}
			cur, err := c.GetWorkflowLimits(ctx, key)
			if err != nil {
				return fmt.Errorf("limits set: %w", err)
			}
			budget := cur.Budget
			if budgetT.set {
				budget.MaxTokens = nil
				if !budgetT.none {
					budget.MaxTokens = &budgetT.n
				}
			}
			if budgetC.set {
				budget.MaxCostUSD = nil
				if !budgetC.none {
					budget.MaxCostUSD = &budgetC.usd
				}
			}
			wl, err := c.SetWorkflowLimits(ctx, key, client.WorkflowLimitsRequest{
				MaxConcurrentRuns: concurrent.apply(cur.MaxConcurrentRuns), MaxStartsPerMinute: rate.apply(cur.MaxStartsPerMinute),
				Budget: &budget})
			if err != nil {
				return fmt.Errorf("limits set: %w", err)
			}
			fmt.Fprintf(out, "workflow %s: max concurrent runs %s, max starts per minute %s, budget %s; %d running, %d throttled\n",
				wl.WorkflowKey, capText(wl.MaxConcurrentRuns), capText(wl.MaxStartsPerMinute), budgetText(wl.Budget), wl.Running, wl.Throttled)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&key, "workflow", "", "the workflow whose limits change (default: the tenant's)")
	f.Var(&concurrent, "max-concurrent-runs", "live runs queued or running at once")
	f.Var(&rate, "max-starts-per-minute", "runs of the workflow started in any minute")
	f.Var(&budgetT, "budget-tokens", "default budget of the workflow's runs, in tokens")
	f.Var(&budgetC, "budget-usd", "default budget of the workflow's runs, in US dollars")
	return cmd
}
