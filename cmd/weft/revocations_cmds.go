package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftworks/weft/client"
)

// newRevocationsCmd is `weft revocations list|add|remove`: the revocations
// of the token's tenant (docs/bridges.md). Each needs revocations.manage.
func newRevocationsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revocations",
		Short: "List, add and remove revocations (scopes withdrawn from a sub's runs, schedules and webhooks)",
		Long: `A revocation withdraws one scope from a sub in the token's tenant: from the
runs the sub started, those under way included, and from every schedule and
webhook service actor it configured. From the next enqueue, firing, delivery,
action attempt or agent tool call on they run without it (a denied tool call
is tool.denied and the agent goes on; a denied action attempt fails its node
with PERMISSION_DENIED). The token needs revocations.manage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRevocationsListCmd(), newRevocationsAddCmd(), newRevocationsRemoveCmd())
	return cmd
}

func newRevocationsListCmd() *cobra.Command {
	var f client.RevocationFilter
	cmd := &cobra.Command{
		Use:   "list [--sub S]",
		Short: "List the tenant's revocations, by sub then scope",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := apiClient()
			if err != nil {
				return err
			}
			return printPages(cmd.OutOrStdout(), "SUB\tSCOPE\tCREATED", "no revocations", true, func(cursor string) ([]string, *string, error) {
				f.Cursor = cursor
				page, err := c.ListRevocations(cmd.Context(), f)
				if err != nil {
					return nil, nil, fmt.Errorf("revocations list: %w", err)
				}
				rows := make([]string, 0, len(page.Revocations))
				for _, r := range page.Revocations {
					rows = append(rows, fmt.Sprintf("%s\t%s\t%s", r.Sub, r.Scope, r.CreatedAt.Local().Format(time.DateTime)))
				}
				return rows, page.NextCursor, nil
			})
		},
	}
	cmd.Flags().StringVar(&f.Sub, "sub", "", "only this sub's revocations")
	cmd.Flags().IntVar(&f.Limit, "limit", 200, "revocations per request (every page is listed)")
	return cmd
}

// subAndScope reads the required --sub and --scope flags.
func subAndScope(cmd *cobra.Command, sub, scope *string) {
	cmd.Flags().StringVar(sub, "sub", "", "the sub (user) whose schedules and webhooks are concerned (required)")
	cmd.Flags().StringVar(scope, "scope", "", "the scope, e.g. notes.write (required)")
	_ = cmd.MarkFlagRequired("sub")
	_ = cmd.MarkFlagRequired("scope")
}

func checkSubAndScope(sub, scope string) error {
	if strings.TrimSpace(sub) == "" || strings.TrimSpace(scope) == "" {
		return errors.New("--sub and --scope must not be empty")
	}
	return nil
}

func newRevocationsAddCmd() *cobra.Command {
	var sub, scope string
	cmd := &cobra.Command{
		Use:   "add --sub S --scope X",
		Short: "Withdraw scope X from S's runs and every schedule and webhook S configured",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSubAndScope(sub, scope); err != nil {
				return err
			}
			c, err := apiClient()
			if err != nil {
				return err
			}
			r, err := c.AddRevocation(cmd.Context(), sub, scope)
			if err != nil {
				return fmt.Errorf("revocations add: %w", err)
			}
			if r.Created {
				fmt.Fprintf(cmd.OutOrStdout(), "revoked %s from %s\n", r.Scope, r.Sub)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s was already revoked from %s (since %s)\n", r.Scope, r.Sub,
					r.CreatedAt.Local().Format(time.DateTime))
			}
			return nil
		},
	}
	subAndScope(cmd, &sub, &scope)
	return cmd
}

func newRevocationsRemoveCmd() *cobra.Command {
	var sub, scope string
	cmd := &cobra.Command{
		Use:   "remove --sub S --scope X",
		Short: "Give scope X back to S's runs, schedules and webhooks",
		Long: `Removes the revocation of X from S. A revocation that does not exist is
NOT_FOUND (exit status 1).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSubAndScope(sub, scope); err != nil {
				return err
			}
			c, err := apiClient()
			if err != nil {
				return err
			}
			if err := c.RemoveRevocation(cmd.Context(), sub, scope); err != nil {
				return fmt.Errorf("revocations remove: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed the revocation of %s from %s\n", scope, sub)
			return nil
		},
	}
	subAndScope(cmd, &sub, &scope)
	return cmd
}
