package testinfra

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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
// with weft's tuning and search attributes. Call StopTemporal from TestMain.
// It returns an error, never skips, when the binary is missing.
func SharedTemporal() (*Temporal, error) {
	temporalOnce.Do(func() {
		bin := TemporalBinary()
		if _, err := os.Stat(bin); err != nil {
			temporalErr = fmt.Errorf("testinfra: %s is required (run `make bin/temporal`): %w", bin, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		args := append(devserver.ExtraArgs(), devserver.SearchAttributeArgs()...)
		srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
			ExistingPath:  bin,
			ClientOptions: &client.Options{Namespace: "default"},
			LogLevel:      "error",
			ExtraArgs:     args,
			Stdout:        os.Stderr,
			Stderr:        os.Stderr,
		})
		if err != nil {
			temporalErr = fmt.Errorf("testinfra: start dev server: %w", err)
			return
		}
		temporalSrv = &Temporal{Server: srv, HostPort: srv.FrontendHostPort()}
	})
	return temporalSrv, temporalErr
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
