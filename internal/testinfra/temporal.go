package testinfra

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/weftworks/weft/devserver"
)

// RepoRoot returns the module root (the directory holding go.mod).
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("testinfra: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// TemporalBinary is bin/temporal at the module root.
func TemporalBinary() string { return filepath.Join(RepoRoot(), "bin", "temporal") }

// Temporal is a dev server shared by one test binary.
type Temporal struct {
	Server   *testsuite.DevServer
	HostPort string
}

var (
	temporalOnce sync.Once
	temporalSrv  *Temporal
	temporalErr  error
)

// SharedTemporal starts (once per test binary) a dev server from bin/temporal
// with weft's tuning and search attributes. Call StopTemporal from TestMain
// (Main does). It returns an error, never skips, when the binary is missing.
func SharedTemporal() (*Temporal, error) {
	temporalOnce.Do(func() {
		srv, err := startDevServer(true)
		if err != nil {
			temporalErr = err
			return
		}
		temporalSrv = &Temporal{Server: srv, HostPort: srv.FrontendHostPort()}
	})
	return temporalSrv, temporalErr
}

// OwnTemporal starts a dev server for t alone, with weft's tuning and search
// attributes, and stops it when the test ends.
func OwnTemporal(t testing.TB) *testsuite.DevServer {
	t.Helper()
	return ownDevServer(t, true)
}

// BareTemporal starts a dev server for t alone with weft's tuning but
// WITHOUT its search attributes, as a fresh self-hosted cluster would be,
// and stops it when the test ends.
func BareTemporal(t testing.TB) *testsuite.DevServer {
	t.Helper()
	return ownDevServer(t, false)
}

// OwnTemporalWith is OwnTemporal with extra dev-server arguments (for
// example a lower limit.historyCount.suggestContinueAsNew).
func OwnTemporalWith(t testing.TB, extra ...string) *testsuite.DevServer {
	t.Helper()
	return ownDevServer(t, true, extra...)
}

func ownDevServer(t testing.TB, searchAttributes bool, extra ...string) *testsuite.DevServer {
	t.Helper()
	srv, err := startDevServer(searchAttributes, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// startDevServer starts bin/temporal with weft's tuning and, when asked, its
// search attributes.
func startDevServer(searchAttributes bool, extra ...string) (*testsuite.DevServer, error) {
	bin := TemporalBinary()
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("testinfra: %s is required (run `make bin/temporal`): %w", bin, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := devserver.ExtraArgs()
	if searchAttributes {
		args = append(args, devserver.SearchAttributeArgs()...)
	}
	args = append(args, extra...)
	// The frontend port comes from FreePort, not the SDK's ":0" pick: see
	// FreePort for why.
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:  bin,
		ClientOptions: &client.Options{Namespace: "default", HostPort: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))},
		LogLevel:      "error",
		ExtraArgs:     args,
		Stdout:        os.Stderr,
		Stderr:        os.Stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("testinfra: start dev server: %w", err)
	}
	return srv, nil
}

// Main runs the package's tests, stops the shared dev server and exits with
// the tests' code: the whole TestMain of a package using SharedTemporal.
func Main(m *testing.M) {
	code := m.Run()
	StopTemporal()
	os.Exit(code)
}

// StopTemporal stops the shared dev server if it was started.
func StopTemporal() {
	if temporalSrv != nil {
		_ = temporalSrv.Server.Stop()
	}
}

// NewClient dials the shared dev server.
func (t *Temporal) NewClient() (client.Client, error) {
	return client.Dial(client.Options{HostPort: t.HostPort, Namespace: "default"})
}

// SharedClient is the shared dev server (SharedTemporal) and a client on it,
// closed when the test ends. It fails the test when the server cannot start.
func SharedClient(t testing.TB) (*Temporal, client.Client) {
	t.Helper()
	srv, err := SharedTemporal()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := srv.NewClient()
	if err != nil {
		t.Fatalf("testinfra: dial dev server: %v", err)
	}
	t.Cleanup(tc.Close)
	return srv, tc
}
