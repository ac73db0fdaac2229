// Package metrics owns weft's Prometheus registry and the collectors on it.
// Nothing registers globally: New builds a registry and the collectors, and
// the result is passed explicitly to whoever observes or serves them.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the registry and weft's own collectors.
type Metrics struct {
	Registry *prometheus.Registry
	// HTTPRequestDuration observes API request latency by route template,
	// method and status code.
	HTTPRequestDuration *prometheus.HistogramVec
	// NodeDuration observes one node attempt (an activity or local
	// activity) by node kind and outcome (succeeded, failed, cancelled).
	NodeDuration *prometheus.HistogramVec

	sdkRoot *sdkHandler // the Temporal SDK's handler (Temporal); its metrics are created on first use
}

// New builds a registry with the Go runtime and process collectors, weft's
// API latency histogram and its node duration histogram. The runs-by-status
// gauge needs PostgreSQL: add it with RegisterRuns.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		HTTPRequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "weft",
			Subsystem: "api",
			Name:      "request_duration_seconds",
			Help:      "API request latency by route template, method and status code.",
			Buckets:   []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method", "status"}),
		NodeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "weft",
			Name:      "node_duration_seconds",
			Help:      "Duration of one node attempt on this worker, by node kind and outcome (succeeded, failed, cancelled).",
			// Local nodes take ~1 ms, actions and agents up to minutes.
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 600},
		}, []string{"kind", "outcome"}),
	}
	m.sdkRoot = newSDKHandler(newSDKMetrics(reg), map[string]string{})
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.HTTPRequestDuration,
		m.NodeDuration,
	)
	return m
}

// Node attempt outcomes (the outcome label of weft_node_duration_seconds).
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// ObserveNode records one node attempt. It is safe on a nil *Metrics (no
// metrics configured), so callers need not check.
func (m *Metrics) ObserveNode(kind, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.NodeDuration.WithLabelValues(kind, outcome).Observe(d.Seconds())
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
