package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/weftworks/weft/cmd/weft/internal/app"
	"github.com/weftworks/weft/config"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "weft",
		Short:         "Run user-authored DAG workflows durably on Temporal",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newDevCmd(),
		newAPICmd(),
		newWorkerCmd(),
		newMigrateCmd(),
		newTokenCmd(),
	)
	root.AddCommand(clientCommands()...)
	return root
}

// loadConfig reads the configuration from the process environment.
func loadConfig() (config.Config, error) { return config.FromEnv(os.Getenv) }

// newLogger is the JSON logger every long-running subcommand logs to (stderr).
func newLogger() *slog.Logger { return app.NewLogger(os.Stderr, slog.LevelInfo) }
