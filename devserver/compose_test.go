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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, err)
	p, err := opts.LoadProject(context.Background())
	require.NoError(t, err, "docker-compose.yml does not load")
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	require.NoError(t, err, "service %q", name)
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
	require.True(t, ok, "service %s: %s is not set", s.Name, key)
	require.NotNil(t, v, "service %s: %s is not set", s.Name, key)
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
	require.True(t, slices.Equal(names, want), "services = %v, want %v", names, want)
}

// TestComposeTemporalMatchesDevServer: the temporal service runs the dev
// server with every tuning value and search attribute `weft dev` uses.
func TestComposeTemporalMatchesDevServer(t *testing.T) {
	p := loadCompose(t)
	tmp := service(t, p, "temporal")
	cmd := []string(tmp.Command)
	require.True(t, containsRun(cmd, []string{"server", "start-dev"}), "temporal command is not `server start-dev`: %v", cmd)
	assert.False(t, !strings.HasPrefix(tmp.Image, "temporalio/temporal:") || !strings.HasSuffix(tmp.Image, strings.TrimPrefix(devserver.TemporalCLIVersion, "v")), "temporal image %q is not the CLI %s that bin/temporal is built from", tmp.Image, devserver.TemporalCLIVersion)
	extra := devserver.ExtraArgs()
	for i := 0; i < len(extra); i += 2 {
		assert.True(t, containsRun(cmd, extra[i:i+2]), "temporal command lacks %v (devserver.DynamicConfig)", extra[i:i+2])
	}
	n := strings.Count(strings.Join(cmd, " "), "--dynamic-config-value")
	assert.Equal(t, len(devserver.DynamicConfig), n, "temporal command has %d dynamic config values, devserver has %d", n, len(devserver.DynamicConfig))
	sa := devserver.SearchAttributeArgs()
	for i := 0; i < len(sa); i += 2 {
		assert.True(t, containsRun(cmd, sa[i:i+2]), "temporal command lacks %v (execution.SearchAttributeTypes)", sa[i:i+2])
	}
	assert.False(t, !containsRun(cmd, []string{"--port", "7233"}) || !publishes(tmp, "7233", 7233), "temporal must serve and publish 7233: command %v ports %v", cmd, tmp.Ports)
	assert.True(t, containsRun(cmd, []string{"--ip", "0.0.0.0"}), "temporal must listen beyond its container's loopback: %v", cmd)
	db := slices.Index(cmd, "--db-filename")
	require.GreaterOrEqual(t, db, 0, "temporal must persist to SQLite (--db-filename): %v", cmd)
	require.Less(t, db+1, len(cmd), "temporal must persist to SQLite (--db-filename): %v", cmd)
	persisted := false
	for _, v := range tmp.Volumes {
		if strings.HasPrefix(cmd[db+1], v.Target+"/") {
			persisted = true
		}
	}
	assert.True(t, persisted, "the SQLite file %s is not on a volume: %v", cmd[db+1], tmp.Volumes)
	pragmas := devserver.PragmaArgs()
	assert.True(t, containsRun(cmd, pragmas), "temporal lacks the SQLite pragmas of weft dev %v: %v", pragmas, cmd)

	ui := service(t, p, "temporal-ui")
	got := env(t, ui, "TEMPORAL_ADDRESS")
	assert.Equal(t, "temporal:7233", got, "temporal-ui TEMPORAL_ADDRESS = %q", got)
	assert.True(t, publishes(ui, "8233", 8080), "temporal-ui must publish the Web UI on 8233 like `weft dev`: %v", ui.Ports)
}

// TestComposeWeftServices: api and worker run the weft image with weft's
// defaults, against the compose postgres and temporal services.
func TestComposeWeftServices(t *testing.T) {
	p := loadCompose(t)
	defaults, err := config.FromEnv(func(string) string { return "" })
	require.NoError(t, err)
	root := testinfra.RepoRoot()
	_, err = os.Stat(filepath.Join(root, "Dockerfile"))
	require.NoError(t, err, "Dockerfile")
	api, worker := service(t, p, "api"), service(t, p, "worker")
	for _, tc := range []struct {
		s    types.ServiceConfig
		verb string
	}{{api, "api"}, {worker, "worker"}} {
		s := tc.s
		assert.False(t, len(s.Command) == 0 || s.Command[0] != tc.verb, "%s command = %v, want `weft %s ...`", s.Name, s.Command, tc.verb)
		assert.False(t, s.Build == nil || filepath.Clean(s.Build.Context) != root, "%s must build the weft image from the repository: %+v", s.Name, s.Build)
		got := env(t, s, "TEMPORAL_NAMESPACE")
		assert.Equal(t, defaults.TemporalNamespace, got, "%s TEMPORAL_NAMESPACE = %q, want %q", s.Name, got, defaults.TemporalNamespace)
		got = env(t, s, "WEFT_TASK_QUEUE")
		assert.Equal(t, defaults.TaskQueue, got, "%s WEFT_TASK_QUEUE = %q, want %q", s.Name, got, defaults.TaskQueue)
		got = env(t, s, "TEMPORAL_ADDRESS")
		assert.Equal(t, "temporal:7233", got, "%s TEMPORAL_ADDRESS = %q", s.Name, got)
		u, err := url.Parse(env(t, s, "DATABASE_URL"))
		assert.False(t, err != nil || u.Hostname() != "postgres", "%s DATABASE_URL must point at the postgres service: %v %v", s.Name, u, err)
		assert.GreaterOrEqual(t, len(env(t, s, "WEFT_JWT_SECRET")), 16, "%s WEFT_JWT_SECRET must have a usable default", s.Name)
		for _, dep := range []string{"postgres", "temporal"} {
			_, ok := s.DependsOn[dep]
			assert.True(t, ok, "%s must depend on %s", s.Name, dep)
		}
	}
	// Both sides of the same deployment share every setting.
	for k, v := range api.Environment {
		w := worker.Environment[k]
		assert.False(t, w == nil || v == nil || *w != *v, "api and worker disagree on %s", k)
	}
	// A deploy's SIGTERM must leave the worker its whole drain window.
	drain, err := time.ParseDuration(env(t, worker, "WEFT_WORKER_DRAIN"))
	assert.False(t, err != nil || drain != defaults.WorkerDrain, "worker WEFT_WORKER_DRAIN = %v (%v), want the default %v", drain, err, defaults.WorkerDrain)
	assert.False(t, worker.StopGracePeriod == nil || time.Duration(*worker.StopGracePeriod) <= drain, "worker stop_grace_period %v must exceed WEFT_WORKER_DRAIN %v", worker.StopGracePeriod, drain)
	got := env(t, api, "WEFT_HTTP_ADDR")
	assert.Equal(t, defaults.HTTPAddr, got, "api WEFT_HTTP_ADDR = %q, want %q", got, defaults.HTTPAddr)
	assert.True(t, publishes(api, "8080", 8080), "api must publish 8080: %v", api.Ports)
}
