package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/devserver"
	"github.com/weftworks/weft/metrics"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/temporalclient"
	"github.com/weftworks/weft/worker"
)

// Dev token printed by `weft dev`.
const (
	DevTenant   = "dev"
	DevSub      = "dev-user"
	DevTokenTTL = 24 * time.Hour
	devTokenTTL = "24h" // as printed
)

// RunDev is `weft dev`: it starts a Temporal dev server from cfg.TemporalCLI
// on WEFT_TEMPORAL_PORT / WEFT_TEMPORAL_UI_PORT (SQLite in the data dir),
// creates and migrates the database, serves the API and runs the worker in
// this process, and prints the addresses and a dev token to out. When ctx is
// done it stops the HTTP server, then the worker, then the dev server.
//
// TEMPORAL_ADDRESS and Temporal credentials are ignored: dev always talks to
// the dev server it started.
func RunDev(ctx context.Context, cfg config.Config, out io.Writer, logger *slog.Logger) (err error) {
	if err := cfg.EnsureJWTSecret(); err != nil {
		return err
	}
	keys, err := auth.NewKeys(cfg.JWTSecret)
	if err != nil {
		return err
	}
	token, err := keys.Mint(auth.Principal{Tenant: DevTenant, Sub: DevSub, Scopes: auth.AllScopes, Name: "Dev User"}, DevTokenTTL)
	if err != nil {
		return err
	}

	// Claim the API's port before anything else: a busy port fails in
	// milliseconds instead of after a dev server start, and nothing the
	// dev server binds while starting can take it.
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("dev: listen on %s (WEFT_HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	serving := false
	defer func() {
		if !serving {
			ln.Close()
		}
	}()

	dev, err := devserver.Start(ctx, devserver.Options{
		Binary:    cfg.TemporalCLI,
		DataDir:   cfg.DataDir,
		Port:      cfg.TemporalPort,
		UIPort:    cfg.TemporalUIPort,
		Namespace: cfg.TemporalNamespace,
		Output:    os.Stderr,
		Logger:    logger,
	})
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := dev.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	// If the dev server dies, stop everything else too.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-dev.Done():
			cancel(dev.Err())
		case <-ctx.Done():
		}
	}()

	cfg.TemporalAddress = dev.HostPort()
	// One process, so no worker of an earlier release: lean inputs unless
	// WEFT_LEAN_INPUTS says off.
	cfg.DefaultLeanInputs()
	cfg.TemporalTLSCert, cfg.TemporalTLSKey, cfg.TemporalAPIKey = "", "", ""

	if err := store.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	st, err := store.OpenWith(ctx, cfg.DatabaseURL, store.Options{MaxConns: cfg.DBPoolMaxConns})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := store.Migrate(ctx, st.Pool); err != nil {
		return err
	}
	// One registry for the whole process: API latency, the worker's node
	// metrics and the Temporal SDK's are served together at /metrics.
	m := metrics.New()
	tc, err := temporalclient.Dial(ctx, cfg, logger, m.Temporal())
	if err != nil {
		return err
	}
	defer tc.Close()

	w, err := wire(cfg, st, tc, logger, true) // the worker below polls through tc: eager starts
	if err != nil {
		return err
	}
	a, err := newAPI(cfg, st, tc, keys, m, logger, w)
	if err != nil {
		return err
	}

	// The worker and the HTTP server each get their own context so they stop
	// in order: HTTP first (no new runs), then the worker, then the dev server.
	workerCtx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorker()
	workerErr := make(chan error, 1)
	go func() {
		workerErr <- worker.Serve(workerCtx, worker.Deps{Config: cfg, Store: st, Temporal: tc, Logger: logger, Metrics: m,
			Variables: w.variables, Starter: w.starter})
	}()
	httpCtx, stopHTTP := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHTTP()
	httpErr := make(chan error, 1)
	serving = true // serveHTTP closes ln
	go func() { httpErr <- serveHTTP(httpCtx, ln, a.handler, a.streams.Close, logger) }()
	go a.starter.RunSweeper(httpCtx, 0)
	go a.replays.RunSweeper(httpCtx, 0)
	go a.starter.RunDispatcher(httpCtx)
	go func() { _ = a.feed.Run(httpCtx) }()

	printBanner(out, bannerInfo{
		API:       httpURL(ln.Addr()),
		Temporal:  dev.HostPort(),
		Namespace: cfg.TemporalNamespace,
		UI:        dev.UIURL(),
		DataDir:   cfg.DataDir,
		Token:     token,
		Versions:  temporalVersions(ctx, cfg.TemporalCLI),
	})

	// Run until asked to stop or until a component fails.
	var failed error
	httpStopped, workerStopped := false, false
	select {
	case <-ctx.Done():
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			failed = cause
		}
	case failed = <-httpErr:
		httpStopped = true
	case failed = <-workerErr:
		workerStopped = true
		if failed == nil {
			failed = errors.New("dev: worker stopped unexpectedly")
		}
	}
	if failed != nil {
		logger.Error("dev: shutting down after a failure", "err", failed)
	} else {
		logger.Info("dev: shutting down")
	}
	stopHTTP()
	if !httpStopped {
		if err := <-httpErr; err != nil {
			logger.Error("dev: api shutdown", "err", err)
		}
	}
	stopWorker()
	if !workerStopped {
		if err := <-workerErr; err != nil {
			logger.Error("dev: worker shutdown", "err", err)
		}
	}
	return failed // the deferred calls close the clients and stop the dev server
}

type bannerInfo struct {
	API, Temporal, Namespace, UI, DataDir, Token string
	// Versions is what the dev server runs, e.g. "CLI v1.5.1, Server
	// 1.29.1, UI 2.42.1".
	Versions string
}

// temporalVersions names the Temporal CLI weft pins and the server and Web
// UI versions it carries (read from `temporal --version`: a CLI built with
// go install calls itself 0.0.0-DEV, so its own version is the pin).
func temporalVersions(ctx context.Context, cli string) string {
	v := "CLI " + devserver.TemporalCLIVersion
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, "--version").Output()
	if err != nil {
		return v
	}
	if _, inner, ok := strings.Cut(string(out), "("); ok {
		if inner, _, ok := strings.Cut(inner, ")"); ok {
			return v + ", " + inner
		}
	}
	return v
}

// printBanner tells the user where everything is and how to call the API.
func printBanner(out io.Writer, b bannerInfo) {
	fmt.Fprintf(out, `
weft dev is running. Ctrl-C stops the API, the worker and the Temporal dev server.

  API             %s
  Canvas          %s/ui/
  Temporal        %s (namespace %s; %s)
  Temporal Web UI %s
  Data dir        %s

Dev token (tenant %s, sub %s, all scopes, valid %s):

export WEFT_TOKEN=%s

  curl -H "Authorization: Bearer $WEFT_TOKEN" %s/v1/workflows

Open the canvas signed in with the dev token:

  %s

`, b.API, b.API, b.Temporal, b.Namespace, b.Versions, b.UI, b.DataDir, DevTenant, DevSub, devTokenTTL, b.Token, b.API, CanvasLink(b.API, b.Token))
}

// CanvasLink is the canvas address signed in with token: the token rides in
// the URL fragment, which browsers never send to a server; the canvas moves
// it to session storage and clears it from the address bar.
func CanvasLink(api, token string) string { return api + "/ui/#token=" + token }

// httpURL turns a listener address into a URL a browser or curl can use.
func httpURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() || ip.IsLoopback() {
		host = "localhost"
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	p, _ := strconv.Atoi(port)
	return fmt.Sprintf("http://%s:%d", host, p)
}
