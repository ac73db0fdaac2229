// Package config builds weft's configuration from the environment, with the
// defaults of SPEC §1. It is built once in main and passed explicitly.
package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// Config is every setting weft reads from the environment.
type Config struct {
	DatabaseURL string
	// DBPoolMaxConns is each process's PostgreSQL pool size when
	// DATABASE_URL sets no pool_max_conns (WEFT_DB_POOL_MAX_CONNS, default
	// 20): every enqueue and event append commits, and a commit waits for
	// its WAL flush, so concurrent requests need connections to wait on
	// (PostgreSQL flushes the commits waiting together at once).
	DBPoolMaxConns    int
	TemporalAddress   string
	TemporalNamespace string
	TemporalTLSCert   string // path; with TemporalTLSKey enables mTLS
	TemporalTLSKey    string
	TemporalAPIKey    string // Temporal Cloud API key; never logged
	HTTPAddr          string
	DataDir           string
	// JWTSecret signs and verifies API tokens. In dev it is generated into DataDir.
	JWTSecret string
	TaskQueue string
	// TemporalPort and TemporalUIPort are used by `weft dev` only.
	TemporalPort   int
	TemporalUIPort int
	// TemporalCLI is the `temporal` binary `weft dev` runs (WEFT_TEMPORAL_CLI, default bin/temporal).
	TemporalCLI string
	// TemporalUIURL is the Web UI base used for run links.
	TemporalUIURL string
	// OpenAI-compatible provider settings (agents). The key is never logged.
	OpenAIBaseURL string
	OpenAIAPIKey  string
	OpenAIModel   string
	// OpenAIPrices prices models for usage cost (WEFT_OPENAI_PRICES,
	// "model=IN,OUT;..." in USD per million input/output tokens; a model
	// without a price costs 0). Parsed by provider.ParsePrices.
	OpenAIPrices string
	// OpenAIMaxTokensField is the request field an agent call's
	// output-token limit is sent in (WEFT_OPENAI_MAX_TOKENS_FIELD):
	// max_completion_tokens (default) or max_tokens for endpoints that
	// only know the older name.
	OpenAIMaxTokensField string
	// WebhookKey encrypts webhook secrets at rest (hex, 32 bytes). Derived from JWTSecret when empty.
	WebhookKey string
	// EventRetentionDays deletes events of runs closed longer ago; 0 keeps them forever.
	EventRetentionDays int
	// RunRetentionDays deletes runs closed longer ago (WEFT_RUN_RETENTION_DAYS)
	// with their events, transcripts, claim-checked values and ledger
	// entries; their idempotency bindings are kept at least as long as the
	// Temporal namespace's retention. 0 keeps runs forever.
	RunRetentionDays int
	// ProviderProbeTTL is how long a model provider's readiness probe is
	// trusted before the next one (WEFT_PROVIDER_PROBE_TTL, default 15s):
	// /readyz reports it, and an agent node whose provider is known down
	// stops at once with PROVIDER_UNAVAILABLE.
	ProviderProbeTTL time.Duration
	// MetricsAddr is where `weft worker` serves GET /metrics
	// (WEFT_METRICS_ADDR; empty serves none). `weft api` and `weft dev`
	// serve /metrics on the API address.
	MetricsAddr string
	// History is the Temporal cluster's per-execution limits publication
	// checks revisions against (HISTORY_LIMIT_EXCEEDED) and dry-run
	// reports: WEFT_HISTORY_MAX_EVENTS (limit.historyCount.error),
	// WEFT_HISTORY_SUGGEST_CONTINUE_AS_NEW_AT
	// (limit.historyCount.suggestContinueAsNew) and
	// WEFT_HISTORY_MAX_PENDING_ACTIVITIES (limit.numPendingActivities.error),
	// defaulting to Temporal's defaults. Set them when the cluster's are lower.
	History graph.HistoryBudget
	// WorkerDrain is how long a stopping worker (SIGTERM, a deploy) lets
	// its running attempts finish before it hands the rest back as
	// WORKER_DRAINED (WEFT_WORKER_DRAIN, a Go duration, default 25s; the
	// SDK's WorkerStopTimeout). Keep it below the orchestrator's grace
	// period (Kubernetes: terminationGracePeriodSeconds, default 30 s).
	WorkerDrain time.Duration
	// Durability is carried in every run's parameters: the lease
	// (heartbeat) timeout of node attempts and how long an attempt keeps
	// being re-dispatched after infrastructure faults
	// (WEFT_LEASE_TIMEOUT, WEFT_INFRA_MAX_REDISPATCHES, WEFT_INFRA_MAX_WAIT).
	Durability execution.Durability
	// ReplayMaxRuns bounds how many recorded runs one replay may replay
	// (WEFT_REPLAY_MAX_RUNS, default 50): more is 422 REPLAY_TOO_MANY_RUNS.
	ReplayMaxRuns int
	// ReplayParallel bounds how many simulation runs one replay has going
	// at once (WEFT_REPLAY_PARALLEL, default 4).
	ReplayParallel int
	// RevocationCache makes a worker cache the scopes revoked from each
	// principal instead of reading them for every node attempt
	// (WEFT_REVOCATION_CACHE, on or off, default on; package revcache): a
	// revocation returns only once every live worker dropped it.
	RevocationCache bool
	// RevocationCacheLease is how long a worker answers from its cache
	// after a heartbeat, and so about the longest a revocation waits for a
	// worker that died (WEFT_REVOCATION_CACHE_LEASE, default 5s, 2s–30s).
	RevocationCacheLease time.Duration
	// LeanInputs makes the runs this process starts send their node
	// attempts lean inputs: without the run's constants (permissions,
	// checksum, actor, workflow key, mode, tenant name), which the
	// activity reads once per run and worker from the run's record
	// (WEFT_LEAN_INPUTS, on or off). It is carried in each run's
	// parameters when it starts (execution.RunParams.LeanInputs). Off by
	// default: a worker of a release before the one that reads lean inputs
	// would run such an attempt without permissions, revision or mode, so
	// switch it on once every worker runs that release (after the rolling
	// deploy), and switch it off before rolling back past it. `weft dev`,
	// one process and no older worker, turns it on unless it is set
	// (DefaultLeanInputs).
	LeanInputs bool
	// leanInputsSet: WEFT_LEAN_INPUTS was set (DefaultLeanInputs leaves it).
	leanInputsSet bool
}

// DefaultLeanInputs turns LeanInputs on unless WEFT_LEAN_INPUTS set it:
// for a process that is the whole deployment (`weft dev`), whose workers
// all run its own release.
func (c *Config) DefaultLeanInputs() {
	if !c.leanInputsSet {
		c.LeanInputs = true
	}
}

// Revocation cache defaults and bounds (WEFT_REVOCATION_CACHE_LEASE).
const (
	DefaultRevocationCacheLease = 5 * time.Second
	MinRevocationCacheLease     = 2 * time.Second
	MaxRevocationCacheLease     = 30 * time.Second
)

// Replay defaults.
const (
	DefaultReplayMaxRuns  = 50
	DefaultReplayParallel = 4
)

// DefaultDBPoolMaxConns is DBPoolMaxConns's default: the 20 concurrent
// clients `make bench` enqueues from each hold a connection. pgxpool's own
// default, max(4, CPUs), left most of them queued for a connection while 4
// commits flushed (BenchmarkEnqueueRun20: about twice as long per enqueue).
// A smaller pool made weftbench's throughput runs cost PostgreSQL ~2 ms
// less CPU each, but mostly the connections' warm-up (each new backend
// plans the enqueue's statements afresh for its first five calls), which a
// long-lived process pays once per connection, and throughput did not move
// (docs/benchmarks.md, session 12). Any size from 1 makes progress: nothing
// holds a pooled connection while it waits for another, and the listener
// has its own (e2e TestOnePooledConnectionIsEnough).
const DefaultDBPoolMaxConns = 20

// DefaultWorkerDrain is WorkerDrain's default.
const DefaultWorkerDrain = 25 * time.Second

// DefaultProviderProbeTTL is ProviderProbeTTL's default.
const DefaultProviderProbeTTL = 15 * time.Second

// FromEnv reads the configuration with defaults. getenv is os.Getenv in main
// and a map lookup in tests.
func FromEnv(getenv func(string) string) (Config, error) {
	get := func(k, def string) string {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
		return def
	}
	c := Config{
		DatabaseURL:          get("DATABASE_URL", "postgres://localhost:5432/weft"),
		TemporalAddress:      get("TEMPORAL_ADDRESS", "localhost:7233"),
		TemporalNamespace:    get("TEMPORAL_NAMESPACE", "default"),
		TemporalTLSCert:      get("TEMPORAL_TLS_CERT", ""),
		TemporalTLSKey:       get("TEMPORAL_TLS_KEY", ""),
		TemporalAPIKey:       get("TEMPORAL_API_KEY", ""),
		HTTPAddr:             get("WEFT_HTTP_ADDR", ":8080"),
		DataDir:              get("WEFT_DATA_DIR", ".weft"),
		JWTSecret:            get("WEFT_JWT_SECRET", ""),
		TaskQueue:            get("WEFT_TASK_QUEUE", "weft"),
		TemporalUIURL:        get("WEFT_TEMPORAL_UI_URL", ""),
		TemporalCLI:          get("WEFT_TEMPORAL_CLI", "bin/temporal"),
		OpenAIBaseURL:        get("WEFT_OPENAI_BASE_URL", "https://api.openai.com/v1"),
		OpenAIAPIKey:         get("WEFT_OPENAI_API_KEY", ""),
		OpenAIModel:          get("WEFT_OPENAI_MODEL", ""),
		OpenAIPrices:         get("WEFT_OPENAI_PRICES", ""),
		OpenAIMaxTokensField: get("WEFT_OPENAI_MAX_TOKENS_FIELD", "max_completion_tokens"),
		WebhookKey:           get("WEFT_WEBHOOK_KEY", ""),
		MetricsAddr:          get("WEFT_METRICS_ADDR", ""),
	}
	var err error
	if c.DBPoolMaxConns, err = intEnv(get, "WEFT_DB_POOL_MAX_CONNS", DefaultDBPoolMaxConns); err != nil {
		return Config{}, err
	}
	if c.DBPoolMaxConns < 1 || c.DBPoolMaxConns > 1000 {
		return Config{}, fmt.Errorf("config: WEFT_DB_POOL_MAX_CONNS must be between 1 and 1000, got %d", c.DBPoolMaxConns)
	}
	if c.TemporalPort, err = intEnv(get, "WEFT_TEMPORAL_PORT", 7233); err != nil {
		return Config{}, err
	}
	if c.TemporalUIPort, err = intEnv(get, "WEFT_TEMPORAL_UI_PORT", 8233); err != nil {
		return Config{}, err
	}
	if c.EventRetentionDays, err = intEnv(get, "WEFT_EVENT_RETENTION_DAYS", 0); err != nil {
		return Config{}, err
	}
	if c.RunRetentionDays, err = intEnv(get, "WEFT_RUN_RETENTION_DAYS", 0); err != nil {
		return Config{}, err
	}
	if c.EventRetentionDays < 0 || c.RunRetentionDays < 0 {
		return Config{}, errors.New("config: WEFT_EVENT_RETENTION_DAYS and WEFT_RUN_RETENTION_DAYS must not be negative")
	}
	if c.ProviderProbeTTL, err = durationEnv(get, "WEFT_PROVIDER_PROBE_TTL", DefaultProviderProbeTTL); err != nil {
		return Config{}, err
	}
	if c.ProviderProbeTTL < time.Second {
		return Config{}, fmt.Errorf("config: WEFT_PROVIDER_PROBE_TTL must be at least 1s, got %s", c.ProviderProbeTTL)
	}
	d := graph.DefaultHistoryBudget
	if c.History.MaxEvents, err = intEnv(get, "WEFT_HISTORY_MAX_EVENTS", d.MaxEvents); err != nil {
		return Config{}, err
	}
	if c.History.SuggestContinueAsNewAt, err = intEnv(get, "WEFT_HISTORY_SUGGEST_CONTINUE_AS_NEW_AT", d.SuggestContinueAsNewAt); err != nil {
		return Config{}, err
	}
	if c.History.MaxPendingActivities, err = intEnv(get, "WEFT_HISTORY_MAX_PENDING_ACTIVITIES", d.MaxPendingActivities); err != nil {
		return Config{}, err
	}
	if h := c.History; h.SuggestContinueAsNewAt < 1 || h.MaxEvents <= h.SuggestContinueAsNewAt || h.MaxPendingActivities < 1 {
		return Config{}, fmt.Errorf("config: WEFT_HISTORY_SUGGEST_CONTINUE_AS_NEW_AT (%d) must be at least 1 and below WEFT_HISTORY_MAX_EVENTS (%d), and WEFT_HISTORY_MAX_PENDING_ACTIVITIES (%d) at least 1",
			h.SuggestContinueAsNewAt, h.MaxEvents, h.MaxPendingActivities)
	}
	if c.WorkerDrain, err = durationEnv(get, "WEFT_WORKER_DRAIN", DefaultWorkerDrain); err != nil {
		return Config{}, err
	}
	dd := execution.DefaultDurability
	lease, err := durationEnv(get, "WEFT_LEASE_TIMEOUT", time.Duration(dd.LeaseTimeoutMs)*time.Millisecond)
	if err != nil {
		return Config{}, err
	}
	if lease < execution.MinLeaseTimeout {
		return Config{}, fmt.Errorf("config: WEFT_LEASE_TIMEOUT must be at least %s, got %s", execution.MinLeaseTimeout, lease)
	}
	maxWait, err := durationEnv(get, "WEFT_INFRA_MAX_WAIT", time.Duration(dd.MaxRedispatchMs)*time.Millisecond)
	if err != nil {
		return Config{}, err
	}
	deferFor, err := durationEnv(get, "WEFT_EVENT_DEFER", time.Duration(dd.EventDeferMs)*time.Millisecond)
	if err != nil {
		return Config{}, err
	}
	if deferFor < time.Millisecond {
		return Config{}, fmt.Errorf("config: WEFT_EVENT_DEFER must be at least 1ms, got %s", deferFor)
	}
	c.Durability = execution.Durability{LeaseTimeoutMs: lease.Milliseconds(), MaxRedispatchMs: maxWait.Milliseconds(),
		EventDeferMs: deferFor.Milliseconds()}
	if c.Durability.MaxRedispatches, err = intEnv(get, "WEFT_INFRA_MAX_REDISPATCHES", dd.MaxRedispatches); err != nil {
		return Config{}, err
	}
	if c.Durability.MaxRedispatches < 1 || c.Durability.MaxRedispatchMs < 1 {
		return Config{}, errors.New("config: WEFT_INFRA_MAX_REDISPATCHES and WEFT_INFRA_MAX_WAIT must be positive")
	}
	if c.ReplayMaxRuns, err = intEnv(get, "WEFT_REPLAY_MAX_RUNS", DefaultReplayMaxRuns); err != nil {
		return Config{}, err
	}
	if c.ReplayParallel, err = intEnv(get, "WEFT_REPLAY_PARALLEL", DefaultReplayParallel); err != nil {
		return Config{}, err
	}
	if c.ReplayMaxRuns < 1 || c.ReplayParallel < 1 {
		return Config{}, errors.New("config: WEFT_REPLAY_MAX_RUNS and WEFT_REPLAY_PARALLEL must be positive")
	}
	switch v := strings.ToLower(get("WEFT_REVOCATION_CACHE", "on")); v {
	case "on":
		c.RevocationCache = true
	case "off":
	default:
		return Config{}, fmt.Errorf("config: WEFT_REVOCATION_CACHE must be on or off, got %q", v)
	}
	switch v := strings.ToLower(get("WEFT_LEAN_INPUTS", "")); v {
	case "on":
		c.LeanInputs, c.leanInputsSet = true, true
	case "off":
		c.leanInputsSet = true
	case "":
	default:
		return Config{}, fmt.Errorf("config: WEFT_LEAN_INPUTS must be on or off, got %q", v)
	}
	if c.RevocationCacheLease, err = durationEnv(get, "WEFT_REVOCATION_CACHE_LEASE", DefaultRevocationCacheLease); err != nil {
		return Config{}, err
	}
	if c.RevocationCacheLease < MinRevocationCacheLease || c.RevocationCacheLease > MaxRevocationCacheLease {
		return Config{}, fmt.Errorf("config: WEFT_REVOCATION_CACHE_LEASE must be between %s and %s, got %s",
			MinRevocationCacheLease, MaxRevocationCacheLease, c.RevocationCacheLease)
	}
	if c.TemporalUIURL == "" {
		c.TemporalUIURL = fmt.Sprintf("http://localhost:%d", c.TemporalUIPort)
	}
	if (c.TemporalTLSCert == "") != (c.TemporalTLSKey == "") {
		return Config{}, errors.New("config: TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY must be set together")
	}
	return c, nil
}

func intEnv(get func(string, string) string, key string, def int) (int, error) {
	v := get(key, "")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("config: %s must be a non-negative integer, got %q", key, v)
	}
	return n, nil
}

// durationEnv reads a Go duration ("25s", "1m30s"); 0 is allowed.
func durationEnv(get func(string, string) string, key string, def time.Duration) (time.Duration, error) {
	v := get(key, "")
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("config: %s must be a non-negative duration such as 25s, got %q", key, v)
	}
	return d, nil
}

// EnsureJWTSecret fills JWTSecret from DataDir/jwt-secret, generating the
// file on first use. Production deployments set WEFT_JWT_SECRET instead.
func (c *Config) EnsureJWTSecret() error {
	if c.JWTSecret != "" {
		return nil
	}
	path := filepath.Join(c.DataDir, "jwt-secret")
	if b, err := os.ReadFile(path); err == nil {
		c.JWTSecret = strings.TrimSpace(string(b))
		if c.JWTSecret == "" {
			return fmt.Errorf("config: %s is empty", path)
		}
		return nil
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("config: create data dir: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	secret := hex.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another process won the race
		return c.EnsureJWTSecret()
	}
	if err != nil {
		return fmt.Errorf("config: write jwt secret: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(secret + "\n"); err != nil {
		return err
	}
	c.JWTSecret = secret
	return nil
}
