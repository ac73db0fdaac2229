// Package canvas_test drives the canvas in a real headless Chromium
// (Debian's chromium, through chromedp) against a real `weft dev`: the
// binary built from this tree, its own Temporal dev server, a fresh
// database. One server and one browser serve every test of the package;
// each test opens its own tab.
//
// A missing /usr/bin/chromium fails these tests (apt-get install
// chromium); they never skip. With WEFT_CANVAS_SCREENSHOTS=1 the tests
// write the README's screenshots to docs/img.
package canvas_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/internal/testinfra"
)

// chromiumPath is the browser the tests drive: Debian's package.
const chromiumPath = "/usr/bin/chromium"

// jwtSecret signs the tokens the tests mint; weft dev verifies with it.
const jwtSecret = "canvas-browser-test-secret-0123456789"

// world is the shared server and browser.
type world struct {
	api        string // http://127.0.0.1:port
	devToken   string // printed by weft dev
	canvasLink string // printed by weft dev
	keys       *auth.Keys
	browser    context.Context
}

var (
	setupOnce sync.Once
	shared    *world
	setupErr  error
	teardown  []func()
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	for i := len(teardown) - 1; i >= 0; i-- {
		teardown[i]()
	}
	os.Exit(code)
}

// env returns the shared world, starting it on first use; a failure to
// start (no chromium, no bin/temporal, no PostgreSQL) fails every test.
func env(t *testing.T) *world {
	t.Helper()
	setupOnce.Do(func() { shared, setupErr = start() })
	require.NoError(t, setupErr)
	return shared
}

func start() (*world, error) {
	if _, err := os.Stat(chromiumPath); err != nil {
		return nil, fmt.Errorf("the canvas browser tests need Debian's chromium at %s: apt-get install chromium (%v)", chromiumPath, err)
	}
	w := &world{}
	var err error
	if w.keys, err = auth.NewKeys(jwtSecret); err != nil {
		return nil, err
	}
	if err := w.startWeftDev(); err != nil {
		return nil, err
	}
	if err := w.startBrowser(); err != nil {
		return nil, err
	}
	return w, nil
}

// startWeftDev builds bin/weft from this tree and runs `weft dev` on free
// ports with a data dir and a database of its own.
func (w *world) startWeftDev() error {
	dir, err := os.MkdirTemp("", "weft-canvas-")
	if err != nil {
		return err
	}
	teardown = append(teardown, func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "weft")
	build := exec.Command("go", "build", "-o", bin, "./cmd/weft")
	build.Dir = testinfra.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build weft: %v\n%s", err, out)
	}
	dbURL, err := freshDatabase()
	if err != nil {
		return err
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = testinfra.FreePortE(); err != nil {
			return err
		}
	}
	if _, err := os.Stat(testinfra.TemporalBinary()); err != nil {
		return fmt.Errorf("%s is required (run `make bin/temporal`): %w", testinfra.TemporalBinary(), err)
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "dev")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"WEFT_DATA_DIR="+filepath.Join(dir, ".weft"),
		"WEFT_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(ports[0]),
		"WEFT_TEMPORAL_PORT="+strconv.Itoa(ports[1]),
		"WEFT_TEMPORAL_UI_PORT="+strconv.Itoa(ports[2]),
		"WEFT_TEMPORAL_CLI="+testinfra.TemporalBinary(),
		"WEFT_JWT_SECRET="+jwtSecret,
		"TEMPORAL_ADDRESS=", "TEMPORAL_API_KEY=",
	)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	teardown = append(teardown, func() {
		// SIGTERM: an orderly stop (open event streams end at once).
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	banner := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var token string
		for sc.Scan() {
			line := sc.Text()
			if t, ok := strings.CutPrefix(line, "export WEFT_TOKEN="); ok {
				token = t
			}
			if l := strings.TrimSpace(line); strings.Contains(l, "/ui/#token=") {
				banner <- [2]string{token, l}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	tail := func() string {
		b, _ := os.ReadFile(stderr.Name())
		if len(b) > 8<<10 {
			b = b[len(b)-8<<10:]
		}
		return string(b)
	}
	select {
	case b := <-banner:
		w.devToken, w.canvasLink = b[0], b[1]
	case <-exited:
		return fmt.Errorf("weft dev exited during start:\n%s", tail())
	case <-time.After(3 * time.Minute):
		return fmt.Errorf("weft dev printed no canvas link within 3 minutes:\n%s", tail())
	}
	w.api = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	deadline := time.Now().Add(2 * time.Minute)
	for {
		res, err := http.Get(w.api + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("weft dev not ready within 2 minutes:\n%s", tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freshDatabase names a database weft dev creates, dropped at teardown.
func freshDatabase() (string, error) {
	admin, err := pgx.ParseConfig(testinfra.AdminURL())
	if err != nil {
		return "", err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "weft_canvas_" + hex.EncodeToString(b)
	teardown = append(teardown, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.ConnectConfig(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", admin.User, admin.Host, admin.Port, name), nil
}

// startBrowser starts one headless Chromium with a fresh profile.
func (w *world) startBrowser() error {
	profile, err := os.MkdirTemp("", "weft-chromium-")
	if err != nil {
		return err
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 1000),
	)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	teardown = append(teardown, func() {
		cancelBrowser()
		cancelAlloc()
		os.RemoveAll(profile)
	})
	// The first Run starts the browser; it lives as long as this context.
	if err := chromedp.Do(browser); err != nil {
		return fmt.Errorf("start %s: %w", chromiumPath, err)
	}
	w.browser = browser
	return nil
}

// tab opens a new tab of the shared browser for t, closed at cleanup.
func (w *world) tab(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(w.browser)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx), "open a tab")
	return ctx
}

// mint returns a token of tenant dev holding scopes.
func (w *world) mint(t *testing.T, scopes ...string) string {
	t.Helper()
	return testinfra.TokenFor(t, w.keys, auth.Principal{Tenant: "dev", Sub: "canvas-tester", Name: "Canvas Tester", Scopes: scopes})
}

func (w *world) do(t *testing.T, method, path string, body any) testinfra.Response {
	t.Helper()
	return testinfra.Do(t, w.api, method, path, w.devToken, body)
}

// publish creates workflow key with graph and publishes revision 1.
func (w *world) publish(t *testing.T, key, graph string) {
	t.Helper()
	res := w.do(t, http.MethodPost, "/v1/workflows", map[string]any{"key": key, "graph": json.RawMessage(graph)})
	require.Equal(t, http.StatusCreated, res.Status, "create %s: %d %s", key, res.Status, res.Body)
	res = w.do(t, http.MethodPost, "/v1/workflows/"+key+"/publish", map[string]any{"expectedRevision": 1})
	require.Equal(t, http.StatusCreated, res.Status, "publish %s: %d %s", key, res.Status, res.Body)
}

// run enqueues key with input and returns the run id.
func (w *world) run(t *testing.T, key string, input any) string {
	t.Helper()
	res := w.do(t, http.MethodPost, "/v1/workflows/"+key+"/runs", map[string]any{"input": input, "idempotencyKey": uuid.NewString()})
	require.Equal(t, http.StatusAccepted, res.Status, "run %s: %d %s", key, res.Status, res.Body)
	return res.JSON(t)["runId"].(string)
}

// runStatus is the run's status as the API answers it.
func (w *world) runStatus(t *testing.T, id string) string {
	t.Helper()
	res := w.do(t, http.MethodGet, "/v1/runs/"+id, nil)
	require.Equal(t, http.StatusOK, res.Status, "get run %s: %d %s", id, res.Status, res.Body)
	return res.JSON(t)["status"].(string)
}

// waitRunStatus polls the API until the run has status.
func (w *world) waitRunStatus(t *testing.T, id, status string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		got := w.runStatus(t, id)
		if got == status {
			return
		}
		require.False(t, time.Now().After(deadline), "run %s is %s after 90 s, want %s", id, got, status)
		time.Sleep(50 * time.Millisecond)
	}
}

// open navigates the tab to path signed in with token (in the fragment, as
// weft dev's link does).
func (w *world) open(t *testing.T, ctx context.Context, path, token string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(w.api+path+"#token="+token)), "open %s", path)
}

// waitFor waits until the JavaScript predicate is true in the page.
func waitFor(t *testing.T, ctx context.Context, what, predicate string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate, chromedp.WithPollingTimeout(90*time.Second),
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		body, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ''`))
		t.Fatalf("waiting for %s: %v\npage text:\n%s", what, err, body)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, "evaluate %s", expr)
	return v
}

// nodeStatus is the predicate "node id shows status".
func nodeStatus(id, status string) string {
	return fmt.Sprintf(`document.querySelector('[data-node-id=%q]')?.dataset.status === %q`, id, status)
}

// screenshot writes docs/img/name.png when WEFT_CANVAS_SCREENSHOTS is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("WEFT_CANVAS_SCREENSHOTS") == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err, "screenshot %s", name)
	dir := filepath.Join(testinfra.RepoRoot(), "docs", "img")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}
