// Command weft runs user-authored DAG workflows durably on Temporal. The
// subcommands are thin: each reads config.Config from the environment and
// hands it to package app (processes) or package auth (tokens).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
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
		fmt.Fprintln(os.Stderr, "weft:", err)
		os.Exit(1)
	}
}
