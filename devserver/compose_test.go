package devserver_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/devserver"
	"github.com/weftworks/weft/internal/testinfra"
)

// loadCompose loads docker-compose.yml offline (no Docker, no network) with
// an empty environment, so the file's own defaults are what is checked.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root := testinfra.RepoRoot()
	opts, err := cli.NewProjectOptions(
		[]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root),
		cli.WithEnv(nil),
		cli.WithName("weft"),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("service %q: %v", name, err)
	}
	return s
}

// containsRun reports whether want appears in args as a contiguous run.
func containsRun(args, want []string) bool {
	for i := 0; i+len(want) <= len(args); i++ {
		if slices.Equal(args[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

func env(t *testing.T, s types.ServiceConfig, key string) string {
	t.Helper()
	v, ok := s.Environment[key]
	if !ok || v == nil {
		t.Fatalf("service %s: %s is not set", s.Name, key)
	}
	return *v
}

func publishes(s types.ServiceConfig, published string, target uint32) bool {
	for _, p := range s.Ports {
		if p.Published == published && p.Target == target {
			return true
		}
	}
	return false
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	var names []string
	for name := range p.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"api", "postgres", "temporal", "temporal-ui", "worker"}
	if !slices.Equal(names, want) {
		t.Fatalf("services = %v, want %v", names, want)
	}
}

// TestComposeTemporalMatchesDevServer: the temporal service runs the dev
// server with every tuning value and search attribute `weft dev` uses.
func TestComposeTemporalMatchesDevServer(t *testing.T) {
	p := loadCompose(t)
	tmp := service(t, p, "temporal")
	cmd := []string(tmp.Command)
	if !containsRun(cmd, []string{"server", "start-dev"}) {
		t.Fatalf("temporal command is not `server start-dev`: %v", cmd)
	}
	if !strings.HasPrefix(tmp.Image, "temporalio/temporal:") || !strings.HasSuffix(tmp.Image, strings.TrimPrefix(devserver.TemporalCLIVersion, "v")) {
		t.Errorf("temporal image %q is not the CLI %s that bin/temporal is built from", tmp.Image, devserver.TemporalCLIVersion)
	}
	extra := devserver.ExtraArgs()
	for i := 0; i < len(extra); i += 2 {
		if !containsRun(cmd, extra[i:i+2]) {
			t.Errorf("temporal command lacks %v (devserver.DynamicConfig)", extra[i:i+2])
		}
	}
	if n := strings.Count(strings.Join(cmd, " "), "--dynamic-config-value"); n != len(devserver.DynamicConfig) {
		t.Errorf("temporal command has %d dynamic config values, devserver has %d", n, len(devserver.DynamicConfig))
	}
	sa := devserver.SearchAttributeArgs()
	for i := 0; i < len(sa); i += 2 {
		if !containsRun(cmd, sa[i:i+2]) {
			t.Errorf("temporal command lacks %v (execution.SearchAttributeTypes)", sa[i:i+2])
		}
	}
	if !containsRun(cmd, []string{"--port", "7233"}) || !publishes(tmp, "7233", 7233) {
		t.Errorf("temporal must serve and publish 7233: command %v ports %v", cmd, tmp.Ports)
	}
	if !containsRun(cmd, []string{"--ip", "0.0.0.0"}) {
		t.Errorf("temporal must listen beyond its container's loopback: %v", cmd)
	}
	db := slices.Index(cmd, "--db-filename")
	if db < 0 || db+1 >= len(cmd) {
		t.Fatalf("temporal must persist to SQLite (--db-filename): %v", cmd)
	}
	persisted := false
	for _, v := range tmp.Volumes {
		if strings.HasPrefix(cmd[db+1], v.Target+"/") {
			persisted = true
		}
	}
	if !persisted {
		t.Errorf("the SQLite file %s is not on a volume: %v", cmd[db+1], tmp.Volumes)
	}
	if pragmas := devserver.PragmaArgs(); !containsRun(cmd, pragmas) {
		t.Errorf("temporal lacks the SQLite pragmas of weft dev %v: %v", pragmas, cmd)
	}

	ui := service(t, p, "temporal-ui")
	if got := env(t, ui, "TEMPORAL_ADDRESS"); got != "temporal:7233" {
		t.Errorf("temporal-ui TEMPORAL_ADDRESS = %q", got)
	}
	if !publishes(ui, "8233", 8080) {
		t.Errorf("temporal-ui must publish the Web UI on 8233 like `weft dev`: %v", ui.Ports)
	}
}

// TestComposeWeftServices: api and worker run the weft image with weft's
// defaults, against the compose postgres and temporal services.
func TestComposeWeftServices(t *testing.T) {
	p := loadCompose(t)
	defaults, err := config.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	root := testinfra.RepoRoot()
	if _, err := os.Stat(filepath.Join(root, "Dockerfile")); err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	api, worker := service(t, p, "api"), service(t, p, "worker")
	for _, tc := range []struct {
		s    types.ServiceConfig
		verb string
	}{{api, "api"}, {worker, "worker"}} {
		s := tc.s
		if len(s.Command) == 0 || s.Command[0] != tc.verb {
			t.Errorf("%s command = %v, want `weft %s ...`", s.Name, s.Command, tc.verb)
		}
		if s.Build == nil || filepath.Clean(s.Build.Context) != root {
			t.Errorf("%s must build the weft image from the repository: %+v", s.Name, s.Build)
		}
		if got := env(t, s, "TEMPORAL_NAMESPACE"); got != defaults.TemporalNamespace {
			t.Errorf("%s TEMPORAL_NAMESPACE = %q, want %q", s.Name, got, defaults.TemporalNamespace)
		}
		if got := env(t, s, "WEFT_TASK_QUEUE"); got != defaults.TaskQueue {
			t.Errorf("%s WEFT_TASK_QUEUE = %q, want %q", s.Name, got, defaults.TaskQueue)
		}
		if got := env(t, s, "TEMPORAL_ADDRESS"); got != "temporal:7233" {
			t.Errorf("%s TEMPORAL_ADDRESS = %q", s.Name, got)
		}
		u, err := url.Parse(env(t, s, "DATABASE_URL"))
		if err != nil || u.Hostname() != "postgres" {
			t.Errorf("%s DATABASE_URL must point at the postgres service: %v %v", s.Name, u, err)
		}
		if len(env(t, s, "WEFT_JWT_SECRET")) < 16 {
			t.Errorf("%s WEFT_JWT_SECRET must have a usable default", s.Name)
		}
		for _, dep := range []string{"postgres", "temporal"} {
			if _, ok := s.DependsOn[dep]; !ok {
				t.Errorf("%s must depend on %s", s.Name, dep)
			}
		}
	}
	// Both sides of the same deployment share every setting.
	for k, v := range api.Environment {
		if w := worker.Environment[k]; w == nil || v == nil || *w != *v {
			t.Errorf("api and worker disagree on %s", k)
		}
	}
	// A deploy's SIGTERM must leave the worker its whole drain window.
	drain, err := time.ParseDuration(env(t, worker, "WEFT_WORKER_DRAIN"))
	if err != nil || drain != defaults.WorkerDrain {
		t.Errorf("worker WEFT_WORKER_DRAIN = %v (%v), want the default %v", drain, err, defaults.WorkerDrain)
	}
	if worker.StopGracePeriod == nil || time.Duration(*worker.StopGracePeriod) <= drain {
		t.Errorf("worker stop_grace_period %v must exceed WEFT_WORKER_DRAIN %v", worker.StopGracePeriod, drain)
	}
	if got := env(t, api, "WEFT_HTTP_ADDR"); got != defaults.HTTPAddr {
		t.Errorf("api WEFT_HTTP_ADDR = %q, want %q", got, defaults.HTTPAddr)
	}
	if !publishes(api, "8080", 8080) {
		t.Errorf("api must publish 8080: %v", api.Ports)
	}
}
