package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	want := Config{DatabaseURL: "postgres://localhost:5432/weft", TemporalAddress: "localhost:7233", TemporalNamespace: "default",
		HTTPAddr: ":8080", DataDir: ".weft", TaskQueue: "weft", TemporalPort: 7233, TemporalUIPort: 8233}
	require.Equal(t, want.DatabaseURL, c.DatabaseURL, "defaults differ from SPEC §1: %+v", c)
	require.Equal(t, want.TemporalAddress, c.TemporalAddress, "defaults differ from SPEC §1: %+v", c)
	require.Equal(t, want.TemporalNamespace, c.TemporalNamespace, "defaults differ from SPEC §1: %+v", c)
	require.Equal(t, want.HTTPAddr, c.HTTPAddr, "defaults differ from SPEC §1: %+v", c)
	require.Equal(t, want.DataDir, c.DataDir, "defaults differ from SPEC §1: %+v", c)
	require.Equal(t, want.TaskQueue, c.TaskQueue, "defaults differ from SPEC §1: %+v", c)
	require.Equal(t, want.TemporalPort, c.TemporalPort, "defaults differ from SPEC §1: %+v", c)
	require.Equal(t, want.TemporalUIPort, c.TemporalUIPort, "defaults differ from SPEC §1: %+v", c)
	require.Equal(t, "http://localhost:8233", c.TemporalUIURL, "UI URL = %q", c.TemporalUIURL)
	require.True(t, c.History == graph.DefaultHistoryBudget, "history budget = %+v, want Temporal's defaults", c.History)
	require.Equal(t, DefaultDBPoolMaxConns, c.DBPoolMaxConns, "pool size default")
}

func TestOverridesAndRefusals(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"WEFT_TEMPORAL_UI_PORT": "9233", "WEFT_TASK_QUEUE": "q2", "DATABASE_URL": " postgres://x/y "}))
	require.NoError(t, err)
	h, err := FromEnv(env(map[string]string{"WEFT_HISTORY_MAX_EVENTS": "10240", "WEFT_HISTORY_SUGGEST_CONTINUE_AS_NEW_AT": "1024",
		"WEFT_HISTORY_MAX_PENDING_ACTIVITIES": "100"}))
	require.NoError(t, err)
	want := (graph.HistoryBudget{MaxEvents: 10240, SuggestContinueAsNewAt: 1024, MaxPendingActivities: 100})
	require.True(t, h.History == want, "history budget = %+v, want %+v", h.History, want)
	require.Equal(t, 9233, c.TemporalUIPort, "overrides not applied: %+v", c)
	require.Equal(t, "http://localhost:9233", c.TemporalUIURL, "overrides not applied: %+v", c)
	require.Equal(t, "q2", c.TaskQueue, "overrides not applied: %+v", c)
	require.Equal(t, "postgres://x/y", c.DatabaseURL, "overrides not applied: %+v", c)
	p, err := FromEnv(env(map[string]string{"WEFT_DB_POOL_MAX_CONNS": "7"}))
	require.NoError(t, err)
	require.Equal(t, 7, p.DBPoolMaxConns, "WEFT_DB_POOL_MAX_CONNS not applied")
	for name, m := range map[string]map[string]string{
		"bad port":               {"WEFT_TEMPORAL_PORT": "seven"},
		"negative":               {"WEFT_EVENT_RETENTION_DAYS": "-1"},
		"tls cert alone":         {"TEMPORAL_TLS_CERT": "/c.pem"},
		"suggest above max":      {"WEFT_HISTORY_MAX_EVENTS": "1000", "WEFT_HISTORY_SUGGEST_CONTINUE_AS_NEW_AT": "1000"},
		"no pending activities":  {"WEFT_HISTORY_MAX_PENDING_ACTIVITIES": "0"},
		"history not a number":   {"WEFT_HISTORY_MAX_EVENTS": "lots"},
		"negative run retention": {"WEFT_RUN_RETENTION_DAYS": "-3"},
		"run retention not int":  {"WEFT_RUN_RETENTION_DAYS": "a month"},
		"probe ttl too short":    {"WEFT_PROVIDER_PROBE_TTL": "10ms"},
		"probe ttl not duration": {"WEFT_PROVIDER_PROBE_TTL": "15"},
		"empty pool":             {"WEFT_DB_POOL_MAX_CONNS": "0"},
		"pool not a number":      {"WEFT_DB_POOL_MAX_CONNS": "many"},
		"pool too large":         {"WEFT_DB_POOL_MAX_CONNS": "100000"},
	} {
		_, err = FromEnv(env(m))
		assert.Error(t, err, "%s: accepted", name)
	}
}

func TestEnsureJWTSecretIsGeneratedOnceAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	a := Config{DataDir: dir}
	require.NoError(t, a.EnsureJWTSecret())
	b := Config{DataDir: dir}
	require.NoError(t, b.EnsureJWTSecret())
	require.NotEmpty(t, a.JWTSecret, "secret not reused: %q vs %q", a.JWTSecret, b.JWTSecret)
	require.Equal(t, b.JWTSecret, a.JWTSecret, "secret not reused: %q vs %q", a.JWTSecret, b.JWTSecret)
	info, err := os.Stat(filepath.Join(dir, "jwt-secret"))
	require.NoError(t, err)
	require.True(t, info.Mode().Perm() == 0o600, "secret file mode %v, want 0600", info.Mode().Perm())
	set := Config{DataDir: dir, JWTSecret: "from-env"}
	err = set.EnsureJWTSecret()
	require.NoError(t, err, "an explicit secret was replaced: %q", set.JWTSecret)
	require.Equal(t, "from-env", set.JWTSecret, "an explicit secret was replaced: %q %v", set.JWTSecret, err)
}

func TestDurabilitySettings(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	require.Equal(t, DefaultWorkerDrain, c.WorkerDrain, "defaults: drain %v, durability %+v", c.WorkerDrain, c.Durability)
	require.True(t, c.Durability == execution.DefaultDurability, "defaults: drain %v, durability %+v", c.WorkerDrain, c.Durability)
	c, err = FromEnv(env(map[string]string{"WEFT_WORKER_DRAIN": "90s", "WEFT_LEASE_TIMEOUT": "2s",
		"WEFT_INFRA_MAX_REDISPATCHES": "5", "WEFT_INFRA_MAX_WAIT": "10m", "WEFT_EVENT_DEFER": "250ms"}))
	require.NoError(t, err)
	want := execution.Durability{LeaseTimeoutMs: 2000, MaxRedispatches: 5, MaxRedispatchMs: 600_000, EventDeferMs: 250}
	require.Equal(t, time.Duration(90*time.Second), c.WorkerDrain, "drain %v, durability %+v", c.WorkerDrain, c.Durability)
	require.True(t, c.Durability == want, "drain %v, durability %+v", c.WorkerDrain, c.Durability)
	for name, m := range map[string]map[string]string{
		"drain not a duration":  {"WEFT_WORKER_DRAIN": "25"},
		"no event deferral":     {"WEFT_EVENT_DEFER": "0s"},
		"negative drain":        {"WEFT_WORKER_DRAIN": "-1s"},
		"lease below 1s":        {"WEFT_LEASE_TIMEOUT": "500ms"},
		"zero re-dispatches":    {"WEFT_INFRA_MAX_REDISPATCHES": "0"},
		"zero re-dispatch wait": {"WEFT_INFRA_MAX_WAIT": "0s"},
	} {
		_, err = FromEnv(env(m))
		require.Error(t, err, "%s: accepted", name)
	}
}

func TestRetentionAndProbeSettings(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	require.Equal(t, 0, c.RunRetentionDays, "defaults: runs %d, events %d, probe ttl %s", c.RunRetentionDays, c.EventRetentionDays, c.ProviderProbeTTL)
	require.Equal(t, 0, c.EventRetentionDays, "defaults: runs %d, events %d, probe ttl %s", c.RunRetentionDays, c.EventRetentionDays, c.ProviderProbeTTL)
	require.Equal(t, DefaultProviderProbeTTL, c.ProviderProbeTTL, "defaults: runs %d, events %d, probe ttl %s", c.RunRetentionDays, c.EventRetentionDays, c.ProviderProbeTTL)
	c, err = FromEnv(env(map[string]string{"WEFT_RUN_RETENTION_DAYS": "90", "WEFT_EVENT_RETENTION_DAYS": "30", "WEFT_PROVIDER_PROBE_TTL": "1m"}))
	require.NoError(t, err)
	require.Equal(t, 90, c.RunRetentionDays, "overrides: %+v", c)
	require.Equal(t, 30, c.EventRetentionDays, "overrides: %+v", c)
	require.Equal(t, time.Minute, c.ProviderProbeTTL, "overrides: %+v", c)
}

func TestReplaySettings(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	require.Equal(t, DefaultReplayMaxRuns, c.ReplayMaxRuns)
	require.Equal(t, DefaultReplayParallel, c.ReplayParallel)
	c, err = FromEnv(env(map[string]string{"WEFT_REPLAY_MAX_RUNS": "200", "WEFT_REPLAY_PARALLEL": "8"}))
	require.NoError(t, err)
	require.Equal(t, 200, c.ReplayMaxRuns)
	require.Equal(t, 8, c.ReplayParallel)
	for _, m := range []map[string]string{{"WEFT_REPLAY_MAX_RUNS": "0"}, {"WEFT_REPLAY_PARALLEL": "-1"}, {"WEFT_REPLAY_MAX_RUNS": "many"}} {
		_, err = FromEnv(env(m))
		require.Error(t, err, "%v accepted", m)
	}
}

func TestRevocationCacheSettings(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	require.True(t, c.RevocationCache, "the revocation cache is on by default")
	require.Equal(t, DefaultRevocationCacheLease, c.RevocationCacheLease)
	c, err = FromEnv(env(map[string]string{"WEFT_REVOCATION_CACHE": "OFF", "WEFT_REVOCATION_CACHE_LEASE": "10s"}))
	require.NoError(t, err)
	require.False(t, c.RevocationCache)
	require.Equal(t, 10*time.Second, c.RevocationCacheLease)
	for _, m := range []map[string]string{{"WEFT_REVOCATION_CACHE": "yes"}, {"WEFT_REVOCATION_CACHE_LEASE": "1s"},
		{"WEFT_REVOCATION_CACHE_LEASE": "31s"}, {"WEFT_REVOCATION_CACHE_LEASE": "soon"}} {
		_, err = FromEnv(env(m))
		require.Error(t, err, "%v accepted", m)
	}
}

// Lean inputs are off unless asked for: a worker of an earlier release
// cannot read them. `weft dev` turns them on (DefaultLeanInputs) unless
// WEFT_LEAN_INPUTS says otherwise.
func TestLeanInputsSettings(t *testing.T) {
	c, err := FromEnv(env(nil))
	require.NoError(t, err)
	require.False(t, c.LeanInputs, "lean inputs are off by default (rolling deploys)")
	c.DefaultLeanInputs()
	require.True(t, c.LeanInputs, "weft dev's default turns them on when unset")

	c, err = FromEnv(env(map[string]string{"WEFT_LEAN_INPUTS": "Off"}))
	require.NoError(t, err)
	c.DefaultLeanInputs()
	require.False(t, c.LeanInputs, "an explicit off stays off in weft dev")

	c, err = FromEnv(env(map[string]string{"WEFT_LEAN_INPUTS": "on"}))
	require.NoError(t, err)
	require.True(t, c.LeanInputs)

	_, err = FromEnv(env(map[string]string{"WEFT_LEAN_INPUTS": "yes"}))
	require.ErrorContains(t, err, "WEFT_LEAN_INPUTS")
}
