// Package app wires weft's long-running processes from a config.Config:
// `weft api` (RunAPI), `weft worker` (RunWorker), `weft migrate` (Migrate)
// and `weft dev` (RunDev: dev server, database, API and worker in one
// process). Each function runs until its context is done, then shuts down in
// order and returns.
//
// This is the one place the shared wiring is built (wiring.go: the variable
// registry, the publication resolver and service, the starter); the API,
// the worker and the bridges receive it and default none of it.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/metrics"
	"github.com/weftworks/weft/replay"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/temporalclient"
	"github.com/weftworks/weft/web"
	"github.com/weftworks/weft/worker"
)

// shutdownTimeout bounds the graceful HTTP shutdown.
const shutdownTimeout = 10 * time.Second

// NewLogger returns weft's JSON logger writing to w.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// Migrate applies the embedded migrations to cfg.DatabaseURL, creating the
// database first when create is set.
func Migrate(ctx context.Context, cfg config.Config, create bool, logger *slog.Logger) error {
	if create {
		if err := store.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
			return err
		}
	}
	st, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := store.Migrate(ctx, st.Pool); err != nil {
		return err
	}
	logger.Info("database migrated")
	return nil
}

// RunAPI is `weft api`: a stateless HTTP server on cfg.HTTPAddr, as many
// replicas as needed behind a load balancer. With migrate set it applies
// pending migrations first (goose serialises concurrent migrators).
func RunAPI(ctx context.Context, cfg config.Config, migrate bool, logger *slog.Logger) error {
	keys, err := signingKeys(&cfg, logger)
	if err != nil {
		return err
	}
	st, err := store.OpenWith(ctx, cfg.DatabaseURL, store.Options{MaxConns: cfg.DBPoolMaxConns})
	if err != nil {
		return err
	}
	defer st.Close()
	if migrate {
		if err := store.Migrate(ctx, st.Pool); err != nil {
			return err
		}
	}
	m := metrics.New()
	tc, err := temporalclient.Dial(ctx, cfg, logger, m.Temporal())
	if err != nil {
		return err
	}
	defer tc.Close()
	w, err := wire(cfg, st, tc, logger, false)
	if err != nil {
		return err
	}
	a, err := newAPI(cfg, st, tc, keys, m, logger, w)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("api: listen on %s (WEFT_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	logger.Info("api listening", "addr", ln.Addr().String())
	go a.starter.RunSweeper(ctx, 0)
	go a.replays.RunSweeper(ctx, 0)
	go a.starter.RunDispatcher(ctx)
	feedCtx, stopFeed := context.WithCancel(context.WithoutCancel(ctx))
	defer stopFeed()
	go func() { _ = a.feed.Run(feedCtx) }()
	return serveHTTP(ctx, ln, a.handler, a.streams.Close, logger)
}

// apiParts is what newAPI builds: the HTTP handler (API and canvas), the
// starter its run routes enqueue through, and the event feed and stream
// registry behind GET /v1/runs/{id}/events/stream.
type apiParts struct {
	handler http.Handler
	starter *starter.Starter
	// replays' sweeper re-issues replay starts that were lost.
	replays *replay.Engine
	// feed must be Run for streams to be woken by PostgreSQL notifications.
	feed *store.EventFeed
	// streams.Close ends open event streams; serveHTTP calls it when the
	// server starts shutting down.
	streams *api.Streams
}

// newAPI builds the HTTP handler (the API, and the canvas under /ui/) over
// the process's wiring w, and the schedule and webhook service beside it.
// The caller runs the starter's sweeper and dispatcher (every API replica
// may) and the event feed. m is served at /metrics; `weft dev` shares it
// with its worker.
func newAPI(cfg config.Config, st *store.Store, tc client.Client, keys *auth.Keys, m *metrics.Metrics, logger *slog.Logger, w *wiring) (apiParts, error) {
	// weft_runs{status}: read from PostgreSQL at scrape time.
	if err := m.RegisterRuns(st, 0, logger); err != nil {
		return apiParts{}, err
	}
	feed := st.NewEventFeed(logger)
	streams := api.NewStreams(feed, 0)
	// The configured model providers, probed for /readyz (never for work:
	// the workers call them).
	providers, err := agents.ProvidersFromConfig(cfg)
	if err != nil {
		return apiParts{}, err
	}
	handler, err := api.New(api.Deps{
		Config: cfg, Store: st, Keys: keys, Temporal: tc, Logger: logger,
		Metrics: m, Starter: w.starter, Replays: w.replays, Variables: w.variables, Publication: w.publication, Streams: streams,
		Bridges:   newBridges(cfg, st, tc, keys, logger, w),
		Providers: provider.NewReadiness(providers, provider.ReadinessOptions{TTL: cfg.ProviderProbeTTL, Logger: logger}),
	})
	if err != nil {
		return apiParts{}, err
	}
	return apiParts{handler: web.Mount(handler), starter: w.starter, replays: w.replays, feed: feed, streams: streams}, nil
}

// newBridges is the schedule and webhook service: the webhook key is
// WEFT_WEBHOOK_KEY, else derived from the JWT secret. When it cannot be
// built (a malformed key) the API still serves, its bridge routes answer
// 503 and the log says why.
func newBridges(cfg config.Config, st *store.Store, tc client.Client, keys *auth.Keys, logger *slog.Logger, w *wiring) *bridges.Service {
	key, err := bridges.WebhookKey(cfg.WebhookKey, string(keys.Secret()))
	var svc *bridges.Service
	if err == nil {
		svc, err = bridges.New(bridges.Deps{
			Store: st, Starter: w.starter, Variables: w.variables, Temporal: tc,
			TaskQueue: cfg.TaskQueue, WebhookKey: key, Logger: logger,
		})
	}
	if err != nil {
		logger.Error("schedules and webhooks are unavailable", "err", err)
		return nil
	}
	return svc
}

// RunWorker is `weft worker`: a stateless Temporal worker on cfg.TaskQueue.
// It opens the pool and the Temporal client from cfg, builds the process's
// wiring, serves until ctx is done, and closes them. With migrate set it
// applies pending migrations first.
func RunWorker(ctx context.Context, cfg config.Config, migrate bool, logger *slog.Logger) error {
	if migrate {
		if err := Migrate(ctx, cfg, false, logger); err != nil {
			return err
		}
	}
	st, err := store.OpenWith(ctx, cfg.DatabaseURL, store.Options{MaxConns: cfg.DBPoolMaxConns})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Ping(ctx); err != nil {
		return fmt.Errorf("worker: postgres: %w", err)
	}
	var m *metrics.Metrics
	if cfg.MetricsAddr != "" {
		m = metrics.New()
		stop, err := worker.ServeMetrics(cfg.MetricsAddr, m, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	tc, err := temporalclient.Dial(ctx, cfg, logger, m.Temporal()) // nil m: the SDK records nothing
	if err != nil {
		return err
	}
	defer tc.Close()
	w, err := wire(cfg, st, tc, logger, false)
	if err != nil {
		return err
	}
	return worker.Serve(ctx, worker.Deps{Config: cfg, Store: st, Temporal: tc, Logger: logger, Metrics: m,
		Variables: w.variables, Starter: w.starter})
}

// signingKeys loads the JWT secret (WEFT_JWT_SECRET, else the file in the
// data dir, generated on first use) and builds the token keys.
func signingKeys(cfg *config.Config, logger *slog.Logger) (*auth.Keys, error) {
	fromEnv := cfg.JWTSecret != ""
	if err := cfg.EnsureJWTSecret(); err != nil {
		return nil, err
	}
	if !fromEnv {
		logger.Warn("WEFT_JWT_SECRET is not set; using the secret in the data dir (set WEFT_JWT_SECRET when running more than one replica)", "dataDir", cfg.DataDir)
	}
	return auth.NewKeys(cfg.JWTSecret)
}

// serveHTTP serves handler on ln until ctx is done, then shuts down
// gracefully within shutdownTimeout. onShutdown (may be nil) runs when the
// shutdown starts: it ends long-lived responses (event streams), which
// Shutdown would otherwise wait for until its deadline.
func serveHTTP(ctx context.Context, ln net.Listener, handler http.Handler, onShutdown func(), logger *slog.Logger) error {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if onShutdown != nil {
		srv.RegisterOnShutdown(onShutdown)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("api: serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("api: serve: %w", err)
	}
	logger.Info("api stopped")
	return nil
}
