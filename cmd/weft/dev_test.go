package main_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
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

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/devserver"
	"github.com/weftworks/weft/internal/testinfra"
)

// weftBin is the binary under test, built once by TestMain.
var weftBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		os.Exit(m.Run()) // listing tests needs no binary
	}
	dir, err := os.MkdirTemp("", "weft-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	weftBin = filepath.Join(dir, "weft")
	build := exec.Command("go", "build", "-o", weftBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build weft:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// portFree reports whether nothing listens on port any more.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// processGone reports whether pid has exited (a zombie waiting for its
// reaper counts as gone: it runs nothing and holds no port).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// Format: pid (comm) state ...; comm may contain spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		require.False(t, time.Now().After(deadline), "timed out after %s waiting for %s", timeout, what)
		time.Sleep(100 * time.Millisecond)
	}
}

// freshDatabaseURL names a database that does not exist yet and drops it
// (if weft created it) when the test ends.
func freshDatabaseURL(t *testing.T) string {
	t.Helper()
	admin, err := pgx.ParseConfig(testinfra.AdminURL())
	require.NoError(t, err)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "weft_devtest_" + hex.EncodeToString(b)
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, admin)
	require.NoError(t, err, "PostgreSQL is required")
	defer conn.Close(ctx)
	var exists bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists)
	require.NoError(t, err, "database %s: exists=%v err", name, exists)
	require.False(t, exists, "database %s: exists=%v err=%v", name, exists, err)
	t.Cleanup(func() {
		c, err := pgx.ConnectConfig(context.Background(), admin)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", admin.User, admin.Host, admin.Port, name)
}

// devInstance is one running `weft dev`.
type devInstance struct {
	t        *testing.T
	cmd      *exec.Cmd
	dataDir  string
	apiURL   string
	dbURL    string
	tempPort int
	uiPort   int
	httpPort int
	token    string
	devPID   int
	exited   chan struct{}
	exitErr  error
	mu       sync.Mutex
	stdout   strings.Builder
	stderr   *os.File
}

func startDev(t *testing.T) *devInstance {
	t.Helper()
	d := &devInstance{t: t, dataDir: t.TempDir(), tempPort: testinfra.FreePort(t), uiPort: testinfra.FreePort(t), httpPort: testinfra.FreePort(t), exited: make(chan struct{})}
	d.apiURL = fmt.Sprintf("http://127.0.0.1:%d", d.httpPort)
	d.dbURL = freshDatabaseURL(t)
	var stdout io.ReadCloser
	d.launch(append(os.Environ(),
		"DATABASE_URL="+d.dbURL,
		"WEFT_DATA_DIR="+d.dataDir,
		"WEFT_HTTP_ADDR=127.0.0.1:"+strconv.Itoa(d.httpPort),
		"WEFT_TEMPORAL_PORT="+strconv.Itoa(d.tempPort),
		"WEFT_TEMPORAL_UI_PORT="+strconv.Itoa(d.uiPort),
		"WEFT_TEMPORAL_CLI="+testinfra.TemporalBinary(),
		"WEFT_JWT_SECRET=", "TEMPORAL_ADDRESS=", "TEMPORAL_API_KEY=",
	), func(cmd *exec.Cmd) (err error) {
		stdout, err = cmd.StdoutPipe()
		return err
	})
	tokens := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.stdout.WriteString(line + "\n")
			d.mu.Unlock()
			if tok, ok := strings.CutPrefix(line, "export WEFT_TOKEN="); ok {
				tokens <- tok
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case d.token = <-tokens:
	case <-d.exited:
		d.dump()
		t.Fatalf("weft dev exited during start: %v", d.exitErr)
	case <-time.After(3 * time.Minute):
		d.dump()
		t.Fatal("weft dev printed no token within 3 minutes")
	}
	b, err := os.ReadFile(devserver.PIDFile(d.dataDir))
	require.NoError(t, err, "dev server pid file")
	d.devPID, err = strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return d
}

// killDevServer is the test's own safety net: should the parent death
// signal ever fail, the test still leaves no dev server behind (TestDev
// checks the signal itself before this runs).
func (d *devInstance) killDevServer() {
	if d.devPID == 0 {
		if b, err := os.ReadFile(devserver.PIDFile(d.dataDir)); err == nil {
			d.devPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if d.devPID > 0 && !processGone(d.devPID) {
		_ = syscall.Kill(-d.devPID, syscall.SIGKILL)
	}
}

func (d *devInstance) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stdout.String()
}

func (d *devInstance) dump() {
	out := d.output()
	logs, _ := os.ReadFile(d.stderr.Name())
	if len(logs) > 16<<10 {
		logs = logs[len(logs)-16<<10:]
	}
	d.t.Logf("weft dev stdout:\n%s\nstderr (tail):\n%s", out, logs)
}

func (d *devInstance) get(path, token string) int {
	d.t.Helper()
	req, err := http.NewRequest(http.MethodGet, d.apiURL+path, nil)
	require.NoError(d.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func (d *devInstance) waitReady() {
	d.t.Helper()
	waitFor(d.t, "/readyz 200", 60*time.Second, func() bool { return d.get("/readyz", "") == http.StatusOK })
}

// TestDev runs two `weft dev` side by side on their own ports, data dirs
// and not-yet-existing databases; checks readiness, the printed tokens, the
// Web UI and `weft token`; then stops one with SIGTERM and kills the other
// with SIGKILL, and checks neither leaves its dev server behind.
func TestDev(t *testing.T) {
	a, b := startDev(t), startDev(t)
	a.waitReady()
	b.waitReady()

	for _, d := range []*devInstance{a, b} {
		out := d.output()
		for _, want := range []string{
			fmt.Sprintf("http://localhost:%d", d.uiPort),
			fmt.Sprintf("http://localhost:%d", d.httpPort),
			"curl -H \"Authorization: Bearer $WEFT_TOKEN\"",
		} {
			assert.Contains(t, out, want, "banner lacks %q:\n%s", want, out)
		}
		// The Web UI answers.
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", d.uiPort))
		require.NoError(t, err, "web ui")
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "web ui status %d", resp.StatusCode)
		// The printed token authenticates; a missing or forged one does not.
		code := d.get("/v1/workflows", "")
		assert.Equal(t, http.StatusUnauthorized, code, "no token: %d, want 401", code)
		code = d.get("/v1/workflows", d.token+"x")
		assert.Equal(t, http.StatusUnauthorized, code, "forged token: %d, want 401", code)
		code = d.get("/v1/workflows", d.token)
		assert.Equal(t, http.StatusOK, code, "GET /v1/workflows with the dev token: %d, want 200", code)
	}
	// Each instance has its own secret in its data dir.
	code := a.get("/v1/workflows", b.token)
	assert.Equal(t, http.StatusUnauthorized, code, "b's token on a: %d, want 401", code)

	// `weft token` signs with the same secret weft dev generated.
	tok := runWeft(t, []string{"WEFT_DATA_DIR=" + a.dataDir, "WEFT_JWT_SECRET="},
		"token", "--tenant", "acme", "--sub", "alice", "--scope", auth.ScopeWorkflowsRead,
		"--name", "Alice", "--email", "alice@example.com", "--tenant-name", "Acme Corp")
	code = a.get("/v1/workflows", tok)
	assert.Equal(t, http.StatusOK, code, "GET /v1/workflows with a `weft token` token: %d, want 200", code)
	secret, err := os.ReadFile(filepath.Join(a.dataDir, "jwt-secret"))
	require.NoError(t, err)
	keys, err := auth.NewKeys(strings.TrimSpace(string(secret)))
	require.NoError(t, err)
	p, err := keys.Verify(tok)
	require.NoError(t, err)
	assert.False(t, p.Tenant != "acme" || p.Sub != "alice" || p.Name != "Alice" || p.Email != "alice@example.com" || p.TenantName != "Acme Corp" ||
		len(p.Scopes) != 1 || p.Scopes[0] != auth.ScopeWorkflowsRead, "claims = %+v", p)

	// SIGTERM: an orderly stop, exit 0, dev server gone, ports released.
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-a.exited:
		assert.NoError(t, a.exitErr, "weft dev after SIGTERM")
	case <-time.After(60 * time.Second):
		t.Fatal("weft dev did not exit within 60 s of SIGTERM")
	}
	waitFor(t, "a's dev server to exit", 5*time.Second, func() bool { return processGone(a.devPID) })
	for _, port := range []int{a.httpPort, a.tempPort, a.uiPort} {
		assert.True(t, portFree(port), "port %d still in use after SIGTERM", port)
	}
	_, err = os.Stat(devserver.PIDFile(a.dataDir))
	assert.True(t, os.IsNotExist(err), "pid file left behind: %v", err)

	// b was untouched by a's shutdown.
	code = b.get("/readyz", "")
	assert.Equal(t, http.StatusOK, code, "b /readyz after a stopped: %d", code)

	// SIGKILL: weft gets no chance to clean up; the kernel's parent death
	// signal still takes the dev server down.
	require.NoError(t, b.cmd.Process.Kill())
	<-b.exited
	waitFor(t, "b's dev server to die with its parent", 10*time.Second, func() bool { return processGone(b.devPID) })
	waitFor(t, "b's temporal port to be released", 10*time.Second, func() bool { return portFree(b.tempPort) })
}

// TestDevRestartKeepsState restarts `weft dev` on the same data dir: the
// SQLite file, the JWT secret (so old tokens still work) and the database
// are reused.
func TestDevRestartKeepsState(t *testing.T) {
	a := startDev(t)
	a.waitReady()
	first := a.token
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-a.exited:
		require.NoError(t, a.exitErr, "weft dev after SIGINT")
	case <-time.After(60 * time.Second):
		t.Fatal("weft dev did not exit within 60 s of SIGINT")
	}
	_, err := os.Stat(devserver.DBFile(a.dataDir))
	require.NoError(t, err, "SQLite file")

	restarted := restartDev(t, a)
	restarted.waitReady()
	code := restarted.get("/v1/workflows", first)
	assert.Equal(t, http.StatusOK, code, "token from the first start: %d, want 200 after restart", code)
}

// restartDev starts weft dev again with a's data dir, ports and database.
func restartDev(t *testing.T, a *devInstance) *devInstance {
	t.Helper()
	d := &devInstance{t: t, dataDir: a.dataDir, tempPort: a.tempPort, uiPort: a.uiPort, httpPort: a.httpPort, apiURL: a.apiURL, exited: make(chan struct{})}
	d.launch(a.cmd.Env, func(cmd *exec.Cmd) error {
		cmd.Stdout = io.Discard
		return nil
	})
	return d
}

// launch starts `weft dev` with env in the repository root, its stderr to a
// file and its stdout as wire sets it up; a goroutine records its exit, and
// at cleanup it is killed (SIGKILL takes the dev server down too, by the
// parent death signal) and, if the test failed, its output dumped.
func (d *devInstance) launch(env []string, wire func(*exec.Cmd) error) {
	t := d.t
	t.Helper()
	var err error
	d.stderr, err = os.Create(filepath.Join(t.TempDir(), "stderr.log"))
	require.NoError(t, err)
	d.cmd = exec.Command(weftBin, "dev")
	d.cmd.Dir = testinfra.RepoRoot()
	d.cmd.Env = env
	d.cmd.Stderr = d.stderr
	require.NoError(t, wire(d.cmd))
	require.NoError(t, d.cmd.Start())
	go func() {
		d.exitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		// Whatever happened, leave nothing running: SIGKILL takes the dev
		// server down too (parent death signal).
		_ = d.cmd.Process.Kill()
		<-d.exited
		d.killDevServer()
		if t.Failed() {
			d.dump()
		}
	})
}

// TestDevExitsWhenDevServerDies: weft dev does not limp on without
// Temporal; it shuts down and exits non-zero.
func TestDevExitsWhenDevServerDies(t *testing.T) {
	d := startDev(t)
	d.waitReady()
	require.NoError(t, syscall.Kill(d.devPID, syscall.SIGKILL))
	select {
	case <-d.exited:
		require.Error(t, d.exitErr, "weft dev exited 0 after its dev server died")
	case <-time.After(60 * time.Second):
		t.Fatal("weft dev still running 60 s after its dev server died")
	}
	waitFor(t, "the API port to be released", 5*time.Second, func() bool { return portFree(d.httpPort) })
}

func runWeft(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(weftBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "weft %v: %v\n%s", args, err, stderr.String())
	return strings.TrimSpace(string(out))
}

func TestTokenCommand(t *testing.T) {
	const secret = "token-test-secret-0123456789"
	env := []string{"WEFT_JWT_SECRET=" + secret, "WEFT_DATA_DIR=" + t.TempDir()}
	tok := runWeft(t, env, "token", "--tenant", "t1", "--sub", "svc", "--scope", "runs.read,runs.execute", "--scope", "workflows.read", "--ttl", "2h")
	keys, err := auth.NewKeys(secret)
	require.NoError(t, err)
	p, err := keys.Verify(tok)
	require.NoError(t, err)
	assert.False(t, p.Tenant != "t1" || p.Sub != "svc" || strings.Join(p.Scopes, " ") != "runs.read runs.execute workflows.read", "claims = %+v", p)

	for _, args := range [][]string{
		{"token", "--sub", "s"},                                  // no tenant
		{"token", "--tenant", "t"},                               // no sub
		{"token", "--tenant", "t", "--sub", "s", "--ttl", "-1h"}, // bad ttl
	} {
		cmd := exec.Command(weftBin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		assert.Error(t, err, "weft %v succeeded: %s", args, out)
	}
}

// TestDevRefusesABusyAPIPortAtOnce: weft dev claims its API port before it
// starts anything, so a busy port fails at once and no dev server starts.
func TestDevRefusesABusyAPIPortAtOnce(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	addr := l.Addr().String()
	d := &devInstance{t: t, dataDir: t.TempDir(), exited: make(chan struct{})}
	d.launch(append(os.Environ(),
		"DATABASE_URL="+freshDatabaseURL(t),
		"WEFT_DATA_DIR="+d.dataDir,
		"WEFT_HTTP_ADDR="+addr,
		"WEFT_TEMPORAL_PORT="+strconv.Itoa(testinfra.FreePort(t)),
		"WEFT_TEMPORAL_UI_PORT="+strconv.Itoa(testinfra.FreePort(t)),
		"WEFT_TEMPORAL_CLI="+testinfra.TemporalBinary(),
		"WEFT_JWT_SECRET=", "TEMPORAL_ADDRESS=", "TEMPORAL_API_KEY=",
	), func(cmd *exec.Cmd) error {
		cmd.Stdout = io.Discard
		return nil
	})
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("weft dev still running 30 s after its API port was found busy")
	}
	require.Error(t, d.exitErr, "weft dev exited 0 on a busy API port")
	logs, err := os.ReadFile(d.stderr.Name())
	require.NoError(t, err)
	want := "dev: listen on " + addr + " (WEFT_HTTP_ADDR)"
	assert.False(t, !strings.Contains(string(logs), want) || !strings.Contains(string(logs), "address already in use"), "stderr lacks %q and the cause:\n%s", want, logs)
	for _, f := range []string{devserver.PIDFile(d.dataDir), devserver.DBFile(d.dataDir)} {
		_, err = os.Stat(f)
		assert.True(t, os.IsNotExist(err), "%s exists (err %v): a dev server was started", f, err)
	}
}
