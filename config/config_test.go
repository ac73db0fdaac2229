package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{DatabaseURL: "postgres://localhost:5432/weft", TemporalAddress: "localhost:7233", TemporalNamespace: "default",
		HTTPAddr: ":8080", DataDir: ".weft", TaskQueue: "weft", TemporalPort: 7233, TemporalUIPort: 8233}
	if c.DatabaseURL != want.DatabaseURL || c.TemporalAddress != want.TemporalAddress || c.TemporalNamespace != want.TemporalNamespace ||
		c.HTTPAddr != want.HTTPAddr || c.DataDir != want.DataDir || c.TaskQueue != want.TaskQueue ||
		c.TemporalPort != want.TemporalPort || c.TemporalUIPort != want.TemporalUIPort {
		t.Fatalf("defaults differ from SPEC §1: %+v", c)
	}
	if c.TemporalUIURL != "http://localhost:8233" {
		t.Fatalf("UI URL = %q", c.TemporalUIURL)
	}
	if c.History != graph.DefaultHistoryBudget {
		t.Fatalf("history budget = %+v, want Temporal's defaults", c.History)
	}
}

func TestOverridesAndRefusals(t *testing.T) {
	c, err := FromEnv(env(map[string]string{"WEFT_TEMPORAL_UI_PORT": "9233", "WEFT_TASK_QUEUE": "q2", "DATABASE_URL": " postgres://x/y "}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := FromEnv(env(map[string]string{"WEFT_HISTORY_MAX_EVENTS": "10240", "WEFT_HISTORY_SUGGEST_CONTINUE_AS_NEW_AT": "1024",
		"WEFT_HISTORY_MAX_PENDING_ACTIVITIES": "100"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (graph.HistoryBudget{MaxEvents: 10240, SuggestContinueAsNewAt: 1024, MaxPendingActivities: 100}); h.History != want {
		t.Fatalf("history budget = %+v, want %+v", h.History, want)
	}
	if c.TemporalUIPort != 9233 || c.TemporalUIURL != "http://localhost:9233" || c.TaskQueue != "q2" || c.DatabaseURL != "postgres://x/y" {
		t.Fatalf("overrides not applied: %+v", c)
	}
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
	} {
		if _, err := FromEnv(env(m)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestEnsureJWTSecretIsGeneratedOnceAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	a := Config{DataDir: dir}
	if err := a.EnsureJWTSecret(); err != nil {
		t.Fatal(err)
	}
	b := Config{DataDir: dir}
	if err := b.EnsureJWTSecret(); err != nil {
		t.Fatal(err)
	}
	if a.JWTSecret == "" || a.JWTSecret != b.JWTSecret {
		t.Fatalf("secret not reused: %q vs %q", a.JWTSecret, b.JWTSecret)
	}
	info, err := os.Stat(filepath.Join(dir, "jwt-secret"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v, want 0600", info.Mode().Perm())
	}
	set := Config{DataDir: dir, JWTSecret: "from-env"}
	if err := set.EnsureJWTSecret(); err != nil || set.JWTSecret != "from-env" {
		t.Fatalf("an explicit secret was replaced: %q %v", set.JWTSecret, err)
	}
}

func TestDurabilitySettings(t *testing.T) {
	c, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerDrain != DefaultWorkerDrain || c.Durability != execution.DefaultDurability {
		t.Fatalf("defaults: drain %v, durability %+v", c.WorkerDrain, c.Durability)
	}
	c, err = FromEnv(env(map[string]string{"WEFT_WORKER_DRAIN": "90s", "WEFT_LEASE_TIMEOUT": "2s",
		"WEFT_INFRA_MAX_REDISPATCHES": "5", "WEFT_INFRA_MAX_WAIT": "10m"}))
	if err != nil {
		t.Fatal(err)
	}
	want := execution.Durability{LeaseTimeoutMs: 2000, MaxRedispatches: 5, MaxRedispatchMs: 600_000}
	if c.WorkerDrain != 90*time.Second || c.Durability != want {
		t.Fatalf("drain %v, durability %+v", c.WorkerDrain, c.Durability)
	}
	for name, m := range map[string]map[string]string{
		"drain not a duration":  {"WEFT_WORKER_DRAIN": "25"},
		"negative drain":        {"WEFT_WORKER_DRAIN": "-1s"},
		"lease below 1s":        {"WEFT_LEASE_TIMEOUT": "500ms"},
		"zero re-dispatches":    {"WEFT_INFRA_MAX_REDISPATCHES": "0"},
		"zero re-dispatch wait": {"WEFT_INFRA_MAX_WAIT": "0s"},
	} {
		if _, err := FromEnv(env(m)); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
}

func TestRetentionAndProbeSettings(t *testing.T) {
	c, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.RunRetentionDays != 0 || c.EventRetentionDays != 0 || c.ProviderProbeTTL != DefaultProviderProbeTTL {
		t.Fatalf("defaults: runs %d, events %d, probe ttl %s", c.RunRetentionDays, c.EventRetentionDays, c.ProviderProbeTTL)
	}
	c, err = FromEnv(env(map[string]string{"WEFT_RUN_RETENTION_DAYS": "90", "WEFT_EVENT_RETENTION_DAYS": "30", "WEFT_PROVIDER_PROBE_TTL": "1m"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.RunRetentionDays != 90 || c.EventRetentionDays != 30 || c.ProviderProbeTTL != time.Minute {
		t.Fatalf("overrides: %+v", c)
	}
}
