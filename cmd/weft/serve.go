package main

import (
	"github.com/spf13/cobra"

	"github.com/weftworks/weft/cmd/weft/internal/app"
)

func newDevCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "Run a Temporal dev server, the API and a worker in one process",
		Long: `Starts a Temporal dev server from WEFT_TEMPORAL_CLI (default bin/temporal) on
WEFT_TEMPORAL_PORT with its Web UI on WEFT_TEMPORAL_UI_PORT, storing its state
in WEFT_DATA_DIR/temporal.db; creates and migrates DATABASE_URL; serves the API
on WEFT_HTTP_ADDR (the canvas under /ui/) and runs a worker; prints the Web UI
address, a dev token and a canvas link signed in with it. Ctrl-C or SIGTERM
stops everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			return app.RunDev(cmd.Context(), cfg, cmd.OutOrStdout(), newLogger())
		},
	}
}

func newAPICmd() *cobra.Command {
	var migrate bool
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Serve the HTTP API (stateless; run as many replicas as needed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			return app.RunAPI(cmd.Context(), cfg, migrate, newLogger())
		},
	}
	cmd.Flags().BoolVar(&migrate, "migrate", false, "apply pending database migrations before serving")
	return cmd
}

func newWorkerCmd() *cobra.Command {
	var migrate bool
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a Temporal worker on WEFT_TASK_QUEUE (stateless; run as many replicas as needed)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			return app.RunWorker(cmd.Context(), cfg, migrate, newLogger())
		},
	}
	cmd.Flags().BoolVar(&migrate, "migrate", false, "apply pending database migrations before starting")
	return cmd
}

func newMigrateCmd() *cobra.Command {
	var create bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending database migrations to DATABASE_URL",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			return app.Migrate(cmd.Context(), cfg, create, newLogger())
		},
	}
	cmd.Flags().BoolVar(&create, "create-database", false, "create the database first when it does not exist")
	return cmd
}
