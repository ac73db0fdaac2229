// Command weft runs user-authored DAG workflows durably on Temporal. The
// subcommands are thin: each reads config.Config from the environment and
// hands it to package app (processes) or package auth (tokens).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"syscall"

	"github.com/weftworks/weft/client"
)

func main() {
	// The first SIGINT/SIGTERM cancels ctx and starts an orderly shutdown;
	// after that the default handling is restored, so a second Ctrl-C kills
	// weft at once (the dev server still dies with it: see devserver).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "weft:", describeError(err))
		os.Exit(1)
	}
}

// describeError is err as the user reads it: an unreachable API names the
// address and the variable that sets it; an API refusal adds its details
// (graph issues are printed as lines by the commands that get them).
func describeError(err error) string {
	var unreachable *client.UnreachableError
	if errors.As(err, &unreachable) {
		return fmt.Sprintf("%v\n  The API address comes from WEFT_URL (default %s): is `make dev` (or weft api) running there?", err, defaultAPIURL)
	}
	var apiErr *client.Error
	if errors.As(err, &apiErr) && len(apiErr.Details) > 0 {
		details := maps.Clone(apiErr.Details)
		delete(details, "issues")
		if len(details) > 0 {
			if b, merr := json.MarshalIndent(details, "  ", "  "); merr == nil {
				return fmt.Sprintf("%v\n  details: %s", err, b)
			}
		}
	}
	return err.Error()
}
