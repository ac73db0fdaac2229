package devserver_test

import (
	"context"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/devserver"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/temporalclient"
)

func requireBinary(t *testing.T) string {
	t.Helper()
	bin := testinfra.TemporalBinary()
	_, err := os.Stat(bin)
	require.NoError(t, err, "%s is required (run `make bin/temporal`)", bin)
	return bin
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestArgs(t *testing.T) {
	args := devserver.Args(devserver.Options{DataDir: "/d", Port: 7300, UIPort: 8300, Namespace: "team"})
	joined := strings.Join(args, " ")
	for _, want := range []string{
		"server start-dev", "--db-filename /d/temporal.db", "--port 7300", "--ui-port 8300",
		"--sqlite-pragma journal_mode=wal", "--sqlite-pragma synchronous=normal",
		"--namespace team", "--log-level warn",
		"--dynamic-config-value history.transferProcessorMaxPollRPS=10000",
		"--search-attribute WeftRevision=Int",
	} {
		assert.Contains(t, joined, want, "args lack %q: %s", want, joined)
	}
	// The default namespace always exists; asking for it again is noise.
	assert.False(t, slices.Contains(devserver.Args(devserver.Options{Namespace: "default"}), "--namespace"), "default namespace passed as --namespace")
}

func TestStartStop(t *testing.T) {
	bin := requireBinary(t)
	dir := t.TempDir()
	port, uiPort := testinfra.FreePort(t), testinfra.FreePort(t)
	ctx := context.Background()
	p, err := devserver.Start(ctx, devserver.Options{
		Binary: bin, DataDir: dir, Port: port, UIPort: uiPort, Namespace: "weft-test",
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })

	b, err := os.ReadFile(devserver.PIDFile(dir))
	require.NoError(t, err, "pid file = %q, %v; want %d", b, err, p.Pid())
	require.Equal(t, strconv.Itoa(p.Pid()), strings.TrimSpace(string(b)), "pid file = %q, %v; want %d", b, err, p.Pid())
	_, err = os.Stat(devserver.DBFile(dir))
	require.NoError(t, err, "SQLite file")
	// The namespace asked for exists and carries weft's search attributes.
	c, err := client.Dial(client.Options{HostPort: p.HostPort(), Namespace: "weft-test"})
	require.NoError(t, err)
	defer c.Close()
	missing, err := temporalclient.MissingSearchAttributes(ctx, c, "weft-test")
	require.NoError(t, err, "missing search attributes %v, err", missing)
	require.Empty(t, missing, "missing search attributes %v, err %v", missing, err)
	// The Web UI answers on its port.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(uiPort)), time.Second)
	require.NoError(t, err, "web ui port")
	conn.Close()

	require.NoError(t, p.Stop())
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned before the process exited")
	}
	require.False(t, alive(p.Pid()), "dev server %d still alive after Stop", p.Pid())
	err = p.Err()
	require.NoError(t, err, "Err after Stop = %v, want nil", err)
	_, err = os.Stat(devserver.PIDFile(dir))
	require.ErrorIs(t, err, os.ErrNotExist, "pid file left behind: %v", err)
	require.NoError(t, p.Stop()) // idempotent
}

func TestStartRefusesBusyPort(t *testing.T) {
	bin := requireBinary(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	_, err = devserver.Start(context.Background(), devserver.Options{
		Binary: bin, DataDir: t.TempDir(), Port: busy, UIPort: testinfra.FreePort(t),
	})
	require.Error(t, err, "Start on a busy port: err = %v, want a port-in-use error", err)
	require.Contains(t, err.Error(), "in use", "Start on a busy port: err = %v, want a port-in-use error", err)
}

func TestStartMissingBinary(t *testing.T) {
	_, err := devserver.Start(context.Background(), devserver.Options{
		Binary: "/nonexistent/temporal", DataDir: t.TempDir(), Port: testinfra.FreePort(t), UIPort: testinfra.FreePort(t),
	})
	require.Error(t, err, "err = %v, want a hint to build bin/temporal", err)
	require.Contains(t, err.Error(), "make bin/temporal", "err = %v, want a hint to build bin/temporal", err)
}

func TestStartReportsEarlyExit(t *testing.T) {
	// A file that is not a temporal CLI exits at once; Start must say so
	// quickly instead of waiting for the timeout.
	start := time.Now()
	_, err := devserver.Start(context.Background(), devserver.Options{
		Binary: "/bin/false", DataDir: t.TempDir(), Port: testinfra.FreePort(t), UIPort: testinfra.FreePort(t),
		StartTimeout: 30 * time.Second,
	})
	require.Error(t, err, "err = %v, want an early-exit error", err)
	require.Contains(t, err.Error(), "exited during start", "err = %v, want an early-exit error", err)
	require.LessOrEqual(t, time.Since(start), time.Duration(10*time.Second), "early exit took %s to report", time.Since(start))
}

// TestRegisterSearchAttributes runs a dev server started WITHOUT weft's
// search attributes, as a self-hosted cluster would be, and checks the
// worker's path: missing ones are reported, then registered.
func TestRegisterSearchAttributes(t *testing.T) {
	srv := testinfra.BareTemporal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := srv.Client()

	missing, err := temporalclient.MissingSearchAttributes(ctx, c, "default")
	require.NoError(t, err)
	require.Len(t, missing, len(execution.SearchAttributeTypes), "missing = %v, want all four", missing)
	added, err := temporalclient.RegisterSearchAttributes(ctx, c, "default")
	require.NoError(t, err)
	require.Len(t, added, len(execution.SearchAttributeTypes), "added = %v", added)
	missing, err = temporalclient.MissingSearchAttributes(ctx, c, "default")
	require.NoError(t, err, "after register: missing %v, err", missing)
	require.Empty(t, missing, "after register: missing %v, err %v", missing, err)
	// Registering again is a no-op.
	added, err = temporalclient.RegisterSearchAttributes(ctx, c, "default")
	require.NoError(t, err, "second register: added %v, err", added)
	require.Empty(t, added, "second register: added %v, err %v", added, err)

	// The attributes registered at runtime become usable: weft's tuning
	// keeps the dev server's search-attribute cache
	// (system.forceSearchAttributesCacheRefreshOnRead=false), so a start
	// carrying them may be refused until the namespace's mapping is
	// refreshed (~2 s measured; an enqueue's refused start is left to the
	// sweeper), then it is accepted and listed by them.
	id := "registered-at-runtime"
	opts := client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls",
		TypedSearchAttributes: temporal.NewSearchAttributes(
			execution.KeyTenant.ValueSet("t1"), execution.KeyWorkflowKey.ValueSet("wf"),
			execution.KeyMode.ValueSet("live"), execution.KeyRevision.ValueSet(3))}
	require.Eventually(t, func() bool {
		_, err := c.ExecuteWorkflow(ctx, opts, "anything")
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "a start carrying the search attributes registered at runtime is still refused")
	query := execution.SearchAttrTenant + " = 't1' AND " + execution.SearchAttrRevision + " = 3"
	require.Eventually(t, func() bool {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query})
		return err == nil && len(resp.GetExecutions()) == 1 && resp.GetExecutions()[0].GetExecution().GetWorkflowId() == id
	}, 30*time.Second, 50*time.Millisecond, "the workflow is not listed by %s", query)
}
