package devserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/weftworks/weft/temporalclient"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// Options say how to run the dev server.
type Options struct {
	// Binary is the temporal CLI (bin/temporal).
	Binary string
	// DataDir holds the SQLite file (DataDir/temporal.db), so runs survive a
	// restart, and the pid file (DataDir/temporal.pid) while it runs.
	DataDir string
	// Port is the frontend gRPC port (WEFT_TEMPORAL_PORT); UIPort the Web UI
	// port (WEFT_TEMPORAL_UI_PORT). The HTTP API and metrics ports are left to
	// the CLI, which picks free ones, so two instances never collide on them.
	Port   int
	UIPort int
	// Namespace is created at launch when it is not "default" (which always exists).
	Namespace string
	// Output receives the server's own output (JSON logs at level warn); nil discards it.
	Output io.Writer
	// Logger receives weft's messages about the process; nil uses slog.Default().
	Logger *slog.Logger
	// StartTimeout bounds the wait for the frontend and the search attributes; default 60 s.
	StartTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL; default 10 s.
	StopGrace time.Duration
}

// DBFile is the SQLite file under dataDir.
func DBFile(dataDir string) string { return filepath.Join(dataDir, "temporal.db") }

// PIDFile is where a running dev server's pid is recorded under dataDir.
func PIDFile(dataDir string) string { return filepath.Join(dataDir, "temporal.pid") }

// Args returns the full `temporal` argument list for o: start-dev with the
// SQLite file, the ports, the namespace, the tuning of DynamicConfig and
// weft's search attributes.
func Args(o Options) []string {
	args := []string{
		"server", "start-dev",
		"--db-filename", DBFile(o.DataDir),
	}
	args = append(args, PragmaArgs()...)
	args = append(args,
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(o.Port),
		"--ui-port", strconv.Itoa(o.UIPort),
		"--log-level", "warn",
		"--log-format", "json",
	)
	if o.Namespace != "" && o.Namespace != "default" {
		args = append(args, "--namespace", o.Namespace)
	}
	args = append(args, ExtraArgs()...)
	return append(args, SearchAttributeArgs()...)
}

// Process is a running dev server.
type Process struct {
	cmd      *exec.Cmd
	opts     Options
	log      *slog.Logger
	done     chan struct{} // closed when the process has exited
	waitErr  error         // set before done is closed
	stopOnce sync.Once
	stopErr  error
	stopping chan struct{}
	tail     *tailBuffer
	out      *outputWriter
}

// Start launches the dev server in its own process group (so a terminal's
// Ctrl-C reaches weft, which stops it in order) and, on Linux, with a parent
// death signal so it dies with weft even when weft is SIGKILLed. It returns
// once the frontend answers and weft's search attributes are registered on
// the namespace. ctx bounds the start only; Stop ends the process.
func Start(ctx context.Context, o Options) (*Process, error) {
	if o.Binary == "" {
		return nil, errors.New("devserver: no temporal binary configured")
	}
	if _, err := os.Stat(o.Binary); err != nil {
		return nil, fmt.Errorf("devserver: temporal CLI %s not found (run `make bin/temporal`): %w", o.Binary, err)
	}
	if o.Port <= 0 || o.UIPort <= 0 {
		return nil, fmt.Errorf("devserver: ports must be positive, got %d and %d", o.Port, o.UIPort)
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 10 * time.Second
	}
	// A busy port most likely means another dev server; without this check the
	// readiness probe below would happily talk to that one.
	for _, port := range []int{o.Port, o.UIPort} {
		if err := portFree(port); err != nil {
			return nil, fmt.Errorf("devserver: port %d is in use (another `weft dev`? set WEFT_TEMPORAL_PORT / WEFT_TEMPORAL_UI_PORT): %w", port, err)
		}
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("devserver: create data dir: %w", err)
	}

	tail := &tailBuffer{max: 8 << 10}
	out := &outputWriter{to: o.Output, tail: tail}
	cmd := exec.Command(o.Binary, Args(o)...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devserver: start %s: %w", o.Binary, err)
	}
	p := &Process{
		cmd: cmd, opts: o, log: o.Logger, tail: tail, out: out,
		done: make(chan struct{}), stopping: make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := os.WriteFile(PIDFile(o.DataDir), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		_ = p.Stop()
		return nil, fmt.Errorf("devserver: write pid file: %w", err)
	}
	p.log.Info("temporal dev server starting", "pid", cmd.Process.Pid, "address", p.HostPort(), "ui", p.UIURL(), "db", DBFile(o.DataDir))

	waitCtx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	if err := p.waitReady(waitCtx); err != nil {
		_ = p.Stop()
		return nil, err
	}
	p.log.Info("temporal dev server ready", "pid", cmd.Process.Pid, "address", p.HostPort())
	return p, nil
}

// HostPort is the frontend address clients dial.
func (p *Process) HostPort() string { return net.JoinHostPort("localhost", strconv.Itoa(p.opts.Port)) }

// UIURL is the Web UI address.
func (p *Process) UIURL() string { return fmt.Sprintf("http://localhost:%d", p.opts.UIPort) }

// Pid is the dev server's process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited, for whatever reason.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err reports why the process exited; valid once Done is closed.
func (p *Process) Err() error {
	select {
	case <-p.done:
		select {
		case <-p.stopping:
			return nil
		default:
		}
		return fmt.Errorf("devserver: exited unexpectedly: %v; last output: %s", p.waitErr, p.tail.String())
	default:
		return nil
	}
}

// Stop sends SIGTERM to the dev server's process group, waits up to
// StopGrace, then SIGKILLs the group. It is safe to call more than once.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		close(p.stopping)
		// What the server prints while shutting down is noise (pollers
		// losing their connection); keep it in the tail only.
		p.out.mute()
		defer os.Remove(PIDFile(p.opts.DataDir))
		select {
		case <-p.done:
			return
		default:
		}
		if err := signalGroup(p.cmd.Process, terminate); err != nil {
			p.log.Warn("temporal dev server: SIGTERM failed", "pid", p.Pid(), "err", err)
		}
		select {
		case <-p.done:
			p.log.Info("temporal dev server stopped", "pid", p.Pid())
			return
		case <-time.After(p.opts.StopGrace):
		}
		p.log.Warn("temporal dev server did not stop in time; killing it", "pid", p.Pid(), "grace", p.opts.StopGrace)
		if err := signalGroup(p.cmd.Process, kill); err != nil {
			p.stopErr = fmt.Errorf("devserver: kill: %w", err)
		}
		<-p.done
	})
	return p.stopErr
}

// waitReady polls the frontend health check, then the namespace's search
// attributes, until both answer or ctx ends or the process exits.
func (p *Process) waitReady(ctx context.Context) error {
	c, err := client.NewLazyClient(client.Options{
		HostPort:  p.HostPort(),
		Namespace: p.opts.Namespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return fmt.Errorf("devserver: client: %w", err)
	}
	defer c.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("devserver: exited during start: %v; last output: %s", p.waitErr, p.tail.String())
		case <-ctx.Done():
			return fmt.Errorf("devserver: not ready after %s: %v (last check: %v); last output: %s", p.opts.StartTimeout, ctx.Err(), last, p.tail.String())
		case <-tick.C:
		}
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		last = ready(attempt, c, p.opts.Namespace)
		cancel()
		if last == nil {
			return nil
		}
	}
}

func ready(ctx context.Context, c client.Client, namespace string) error {
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	missing, err := temporalclient.MissingSearchAttributes(ctx, c, namespace)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("search attributes not registered yet: %v", missing)
	}
	return nil
}

func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// outputWriter forwards the server's output to Output until muted, and
// always keeps its tail for error messages.
type outputWriter struct {
	mu    sync.Mutex
	to    io.Writer
	muted bool
	tail  *tailBuffer
}

func (w *outputWriter) Write(b []byte) (int, error) {
	_, _ = w.tail.Write(b)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.to != nil && !w.muted {
		_, _ = w.to.Write(b)
	}
	return len(b), nil
}

func (w *outputWriter) mute() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.muted = true
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(b)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
