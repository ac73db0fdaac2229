package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weftworks/weft/execution"
)

// DefaultRunsTimeout bounds the runs query of one scrape.
const DefaultRunsTimeout = 2 * time.Second

// RunCounter is what the runs collector reads through (*store.Store): the
// number of runs of every tenant by status, read once per scrape.
type RunCounter interface {
	RunsByStatus(ctx context.Context) (map[string]int64, error)
}

// runsCollector reports weft_runs{status} from PostgreSQL at scrape time,
// and weft_runs_collector_up (1 when the query answered within the
// timeout). A failed query never fails the whole scrape: the other
// metrics are still served and the failure is logged.
type runsCollector struct {
	db      RunCounter
	timeout time.Duration
	log     *slog.Logger
	runs    *prometheus.Desc
	up      *prometheus.Desc
}

// RegisterRuns adds the runs-by-status gauge, read from db at scrape time
// with at most timeout (DefaultRunsTimeout when 0). Register it in the
// processes that serve the API: every replica reports the same totals.
func (m *Metrics) RegisterRuns(db RunCounter, timeout time.Duration, logger *slog.Logger) error {
	if timeout <= 0 {
		timeout = DefaultRunsTimeout
	}
	if logger == nil {
		logger = slog.Default()
	}
	return m.Registry.Register(&runsCollector{
		db: db, timeout: timeout, log: logger,
		runs: prometheus.NewDesc("weft_runs", "Runs by status, all tenants (read from PostgreSQL at scrape time).",
			[]string{"status"}, nil),
		up: prometheus.NewDesc("weft_runs_collector_up", "1 when the last scrape read run counts from PostgreSQL, 0 when it failed or timed out.",
			nil, nil),
	})
}

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.runs
	ch <- c.up
}

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.count()
	if err != nil {
		c.log.Warn("metrics: counting runs by status", "err", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	// Every known status is reported (0 when none), so a series never
	// disappears when its last run changes status.
	for _, s := range execution.RunStatuses() {
		ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(counts[s]), s)
		delete(counts, s)
	}
	for s, n := range counts { // a status added later still shows
		ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(n), s)
	}
}

func (c *runsCollector) count() (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	return c.db.RunsByStatus(ctx)
}
