// Package metrics owns weft's Prometheus registry and the collectors on it.
// Nothing registers globally: New builds a registry and the collectors, and
// the result is passed explicitly to whoever observes or serves them.
package metrics

import (
	"net/http"

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
}

// New builds a registry with the Go runtime and process collectors and
// weft's API latency histogram.
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
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.HTTPRequestDuration,
	)
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
