// Package devserver owns how weft runs the Temporal dev server (the
// `temporal` CLI in bin/): the latency tuning, the search attributes, and
// starting and stopping the process. `weft dev` and the integration tests use
// the same settings, so what the tests measure is what users run.
package devserver

import (
	"github.com/weftworks/weft/execution"
)

// TemporalCLIVersion is the `temporal` CLI weft builds into bin/.
const TemporalCLIVersion = "v1.5.1"

// DynamicConfig is the dev server tuning, one entry per setting, each passed
// as --dynamic-config-value. Measured on a 2-core machine: a stock dev server
// spends ~100 ms per sequential activity and stalls ~2 s at random; with these
// a 10-activity chain takes ~130 ms instead of ~1,050 ms.
var DynamicConfig = []Setting{
	{
		Key:   "history.transferProcessorMaxPollRPS",
		Value: "10000",
		Why:   "the transfer queue is polled at 20 RPS by default, which adds ~100 ms to every task hand-off; lift the cap",
	},
	{
		Key:   "matching.numTaskqueueReadPartitions",
		Value: "1",
		Why:   "with 4 partitions a poller can sit on an empty partition while a task waits on another (~2 s stalls); one partition on a dev server",
	},
	{
		Key:   "matching.numTaskqueueWritePartitions",
		Value: "1",
		Why:   "must match the read partitions so no task is written where nobody polls",
	},
	{
		Key: "history.timerProcessorMaxTimeShift",
		// Quoted: the CLI reads dynamic-config values as YAML/JSON and a
		// duration must be a string.
		Value: `"100ms"`,
		Why:   "the timer queue may fire a timer up to this late (default 1 s): five 100 ms sleeps took 5.03 s stock and 0.57 s with 100ms, so sub-second retry delays are kept",
	},
	{
		// The CLI sets it true so that a search attribute added at runtime
		// is usable at once. weft's servers get theirs with
		// --search-attribute before they serve, so only a server started
		// without them (TestRegisterSearchAttributes) notices: there a
		// start carrying attributes registered at runtime is refused for
		// about 2 s, until the namespace's mapping is refreshed (an
		// enqueue's refused start is left to the sweeper).
		Key:   "system.forceSearchAttributesCacheRefreshOnRead",
		Value: "false",
		Why:   "the CLI's default (true) reads the cluster metadata from SQLite on every search-attribute lookup, several per start carrying search attributes: ~0.3 ms of dev-server CPU per weft start (perf, 2026-12-02); the cache refreshes every 60 s instead",
	},
}

// SQLitePragmas are set on the dev server's SQLite file (--sqlite-pragma)
// whenever it keeps state on disk (weft dev, docker-compose.yml). Measured
// on a 2-core machine: the file alone made a hand-written 10-activity
// chain ~2x slower than the same server in memory (267 vs 138 ms); with
// these it ran 141 ms. A process crash loses nothing; an OS crash or power
// loss may lose the last transactions (synchronous=normal in WAL mode).
var SQLitePragmas = []Setting{
	{Key: "journal_mode", Value: "wal", Why: "a write-ahead log: a commit appends instead of rewriting pages through a rollback journal"},
	{Key: "synchronous", Value: "normal", Why: "sync the log at checkpoints, not at every commit; safe from process crashes, not from OS crashes"},
}

// PragmaArgs returns the --sqlite-pragma flags of SQLitePragmas.
func PragmaArgs() []string {
	args := make([]string, 0, 2*len(SQLitePragmas))
	for _, s := range SQLitePragmas {
		args = append(args, "--sqlite-pragma", s.Key+"="+s.Value)
	}
	return args
}

// Setting is one dynamic-config value with the reason weft sets it.
type Setting struct {
	Key   string
	Value string
	Why   string
}

// ExtraArgs returns the dev server flags for the tuning above.
func ExtraArgs() []string {
	args := make([]string, 0, 2*len(DynamicConfig))
	for _, s := range DynamicConfig {
		args = append(args, "--dynamic-config-value", s.Key+"="+s.Value)
	}
	return args
}

// SearchAttributeArgs returns the --search-attribute flags registering weft's attributes.
func SearchAttributeArgs() []string {
	args := make([]string, 0, 2*len(execution.SearchAttributeTypes))
	for _, a := range execution.SearchAttributeTypes {
		args = append(args, "--search-attribute", a.Name+"="+a.Type)
	}
	return args
}
