package app

import (
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/replay"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

// wiring is what a weft process builds once from its connections and
// passes down to the API, the worker and the bridges: no constructor below
// builds or defaults any of it.
type wiring struct {
	// variables is the one variable registry: templates, agent
	// instructions, /v1/variables and schedule input resolve against it.
	variables *variables.Registry
	// publication dry-runs and publishes drafts with resolver.
	publication *publication.Service
	// resolver (and its compile cache) serves both publication and the
	// starter, so a draft simulates exactly as it would publish.
	resolver *publication.Resolver
	// starter is the one execution capability of the process: the run
	// routes, webhooks, schedule firings and the dispatcher use it.
	starter *starter.Starter
	// replays starts replays of recorded runs through drafts (issue 21);
	// the worker's replay activities do the work.
	replays *replay.Engine
}

// wire builds the process's wiring over st and tc. eagerStart is for
// `weft dev` only, whose worker polls the task queue through tc (see
// starter.Deps.EagerStart).
func wire(cfg config.Config, st *store.Store, tc client.Client, logger *slog.Logger, eagerStart bool) (*wiring, error) {
	vars, err := variables.Builtin(st)
	if err != nil {
		return nil, fmt.Errorf("wiring: variables: %w", err)
	}
	resolver, err := publication.NewResolver(st, vars)
	if err != nil {
		return nil, fmt.Errorf("wiring: %w", err)
	}
	resolver.HistoryBudget = &cfg.History
	pub, err := publication.NewService(st, resolver)
	if err != nil {
		return nil, fmt.Errorf("wiring: %w", err)
	}
	runs, err := starter.New(starter.Deps{
		Store: st, Temporal: tc, TaskQueue: cfg.TaskQueue,
		UIURL: cfg.TemporalUIURL, Namespace: cfg.TemporalNamespace, Logger: logger,
		Resolver: resolver, Durability: cfg.Durability, EagerStart: eagerStart, LeanInputs: cfg.LeanInputs,
	})
	if err != nil {
		return nil, fmt.Errorf("wiring: %w", err)
	}
	replays, err := replay.New(replay.Deps{Store: st, Starter: runs, Temporal: tc, TaskQueue: cfg.TaskQueue,
		MaxRuns: cfg.ReplayMaxRuns, Parallel: cfg.ReplayParallel, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("wiring: %w", err)
	}
	return &wiring{variables: vars, publication: pub, resolver: resolver, starter: runs, replays: replays}, nil
}
