package metrics

import (
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// SDKLatencyBuckets are the buckets (seconds) of the Temporal SDK's
// timers on weft's registry: a local activity or a workflow task takes
// about a millisecond, a schedule-to-start under load tens of
// milliseconds, an agent's attempt minutes.
var SDKLatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 600}

// validName is what Prometheus accepts as a metric or label name. The
// SDK's names and tags all are; anything else is dropped, never a panic.
var validName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// sdkMetrics holds the Temporal SDK's metrics on weft's registry, created
// on first use: the SDK names a metric and its tags only when it records.
//
// Names follow Prometheus' conventions, as the SDK's OpenTelemetry
// exporter writes them: a counter gets "_total", a timer becomes a
// histogram in seconds with "_seconds" (temporal_workflow_task_execution_latency_seconds),
// a gauge keeps its name.
//
// A metric's label names are the tags it was first recorded with. The SDK
// records each metric with the same tag keys every time; a later record
// with other keys keeps the first ones (a missing tag is ""), so a scrape
// never fails on a metric whose labels changed.
type sdkMetrics struct {
	reg prometheus.Registerer

	mu   sync.Mutex
	vecs map[sdkKey]*sdkVec
}

// sdkKey names a metric as the SDK records it: no string is built per
// record to find it.
type sdkKey struct {
	kind sdkKind
	name string // the SDK's
}

// sdkVec is one exported metric: its labels and its collector, nil when
// it could not be registered (then records are dropped).
type sdkVec struct {
	labels    []string
	counter   *prometheus.CounterVec
	gauge     *prometheus.GaugeVec
	histogram *prometheus.HistogramVec
}

func newSDKMetrics(reg prometheus.Registerer) *sdkMetrics {
	return &sdkMetrics{reg: reg, vecs: map[sdkKey]*sdkVec{}}
}

type sdkKind int

const (
	sdkCounter sdkKind = iota
	sdkGauge
	sdkTimer
)

// vec returns the metric the SDK calls sdkName, of kind, creating and
// registering it with tags' keys as its labels on first use; nil when the
// name or a label is not a valid Prometheus name, or the registry refused
// it (another collector has the name). Only a handler's first record of a
// metric asks (sdkHandler.record caches the answer), so it takes the lock
// without a read-locked look first.
func (s *sdkMetrics) vec(kind sdkKind, sdkName string, tags map[string]string) *sdkVec {
	key := sdkKey{kind, sdkName}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vecs[key]
	if ok {
		return v
	}
	name := sdkName
	switch kind {
	case sdkCounter:
		name += "_total"
	case sdkTimer:
		name += "_seconds"
	}
	if validName.MatchString(name) {
		labels := make([]string, 0, len(tags))
		for k := range tags {
			if !validName.MatchString(k) {
				labels = nil
				break
			}
			labels = append(labels, k)
		}
		if labels != nil {
			slices.Sort(labels)
			v = &sdkVec{labels: labels}
			help := "Temporal SDK metric " + name + " (go.temporal.io/sdk)."
			var c prometheus.Collector
			switch kind {
			case sdkCounter:
				v.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
				c = v.counter
			case sdkGauge:
				v.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
				c = v.gauge
			case sdkTimer:
				v.histogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: SDKLatencyBuckets}, labels)
				c = v.histogram
			}
			if err := s.reg.Register(c); err != nil {
				v = nil
			}
		}
	}
	s.vecs[key] = v // nil too: refused once, dropped after
	return v
}

// values are tags' values in v's label order ("" for a tag not given).
func (v *sdkVec) values(tags map[string]string) []string {
	out := make([]string, len(v.labels))
	for i, l := range v.labels {
		out[i] = tags[l]
	}
	return out
}

// sdkHandler is a client.MetricsHandler on sdkMetrics with a tag set.
//
// The SDK derives handlers from long-lived ones for every task and
// request (WithTags with the task's type, the request's operation) and
// asks them for the same few metrics each time. Both are cached on the
// handler they come from, so a record after the first finds its metric
// without allocating: without the caches, recording cost each chain10
// run of `make bench` about 1,200 allocations and 116 KiB.
type sdkHandler struct {
	m    *sdkMetrics
	tags map[string]string

	mu       sync.RWMutex
	children map[tagKey]*sdkHandler // WithTags of at most three tags
	records  map[sdkKey]any         // the counters, gauges and timers asked of it
}

// tagKey is up to three tags, sorted by key: a comparable key built
// without allocating.
type tagKey [6]string

// keyOf is tags' key; ok is false for more than three tags.
func keyOf(tags map[string]string) (k tagKey, ok bool) {
	if len(tags) > 3 {
		return k, false
	}
	n := 0
	for key, v := range tags {
		i := n
		for ; i > 0 && k[2*(i-1)] > key; i-- { // insertion sort: at most three
			k[2*i], k[2*i+1] = k[2*(i-1)], k[2*(i-1)+1]
		}
		k[2*i], k[2*i+1] = key, v
		n++
	}
	return k, true
}

func newSDKHandler(m *sdkMetrics, tags map[string]string) *sdkHandler {
	return &sdkHandler{m: m, tags: tags, children: map[tagKey]*sdkHandler{}, records: map[sdkKey]any{}}
}

// Temporal is the Temporal SDK's metrics handler (client.Options.MetricsHandler)
// on m's registry, so /metrics serves the SDK's worker and client metrics
// beside weft's own: workflow and activity task schedule-to-start and
// execution latencies, poller and slot counts, sticky cache hits, request
// failures (docs: "Temporal SDK metrics reference"). A nil m records nothing.
func (m *Metrics) Temporal() client.MetricsHandler {
	if m == nil {
		return client.MetricsNopHandler
	}
	return m.sdkRoot
}

// WithTags implements client.MetricsHandler.
func (h *sdkHandler) WithTags(tags map[string]string) client.MetricsHandler {
	key, cacheable := keyOf(tags)
	if cacheable {
		h.mu.RLock()
		c, ok := h.children[key]
		h.mu.RUnlock()
		if ok {
			return c
		}
	}
	merged := make(map[string]string, len(h.tags)+len(tags))
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	c := newSDKHandler(h.m, merged)
	if cacheable {
		h.mu.Lock()
		if old, ok := h.children[key]; ok {
			c = old
		} else {
			h.children[key] = c
		}
		h.mu.Unlock()
	}
	return c
}

// record returns the metric kind/name on h's tags (an sdkCounterOf,
// sdkGaugeOf or sdkTimerOf; nil when Prometheus refused it), made on
// first use and cached on h.
func (h *sdkHandler) record(kind sdkKind, name string) any {
	key := sdkKey{kind, name}
	h.mu.RLock()
	r, ok := h.records[key]
	h.mu.RUnlock()
	if ok {
		return r
	}
	if v := h.m.vec(kind, name, h.tags); v != nil {
		switch lvs := v.values(h.tags); kind {
		case sdkCounter:
			r = sdkCounterOf{v.counter.WithLabelValues(lvs...)}
		case sdkGauge:
			r = sdkGaugeOf{v.gauge.WithLabelValues(lvs...)}
		case sdkTimer:
			r = sdkTimerOf{v.histogram.WithLabelValues(lvs...)}
		}
	}
	h.mu.Lock()
	h.records[key] = r
	h.mu.Unlock()
	return r
}

// Counter implements client.MetricsHandler.
func (h *sdkHandler) Counter(name string) client.MetricsCounter {
	if c, ok := h.record(sdkCounter, name).(client.MetricsCounter); ok {
		return c
	}
	return client.MetricsNopHandler.Counter(name)
}

// Gauge implements client.MetricsHandler.
func (h *sdkHandler) Gauge(name string) client.MetricsGauge {
	if g, ok := h.record(sdkGauge, name).(client.MetricsGauge); ok {
		return g
	}
	return client.MetricsNopHandler.Gauge(name)
}

// Timer implements client.MetricsHandler.
func (h *sdkHandler) Timer(name string) client.MetricsTimer {
	if t, ok := h.record(sdkTimer, name).(client.MetricsTimer); ok {
		return t
	}
	return client.MetricsNopHandler.Timer(name)
}

type sdkCounterOf struct{ c prometheus.Counter }

func (c sdkCounterOf) Inc(n int64) {
	if n > 0 { // a Prometheus counter only goes up; the SDK never decrements one
		c.c.Add(float64(n))
	}
}

type sdkGaugeOf struct{ g prometheus.Gauge }

func (g sdkGaugeOf) Update(v float64) { g.g.Set(v) }

type sdkTimerOf struct{ o prometheus.Observer }

func (t sdkTimerOf) Record(d time.Duration) { t.o.Observe(d.Seconds()) }
