package provider

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// Prober is a provider that can tell, with one cheap bounded call, whether
// its endpoint is reachable (openai: GET /models). Probe returns nil when
// it is, a *Error with CodeUnavailable or CodeTimeout when it cannot be
// reached or answers it is unavailable, and CodeRefused when it answers but
// refuses the credentials. The error never holds a credential.
type Prober interface {
	Provider
	Probe(ctx context.Context) error
}

// Readiness defaults.
const (
	// DefaultProbeTTL is how long a probe's verdict is trusted.
	DefaultProbeTTL = 15 * time.Second
	// DefaultProbeTimeout bounds one probe.
	DefaultProbeTimeout = 2 * time.Second
)

// Provider states a probe reports.
const (
	// StateUp: the endpoint answered.
	StateUp = "up"
	// StateDown: the endpoint could not be reached, timed out or answered
	// that it is unavailable (5xx): a call now would fail with
	// PROVIDER_UNAVAILABLE.
	StateDown = "down"
	// StateRefused: the endpoint answered but refused the credentials
	// (401/403): a configuration problem, which a call reports itself
	// (PROVIDER_REFUSED, not retried).
	StateRefused = "refused"
)

// Status is a provider's readiness as last probed or observed.
type Status struct {
	State string
	// Detail says why (client-safe: never a credential); empty when up.
	Detail    string
	CheckedAt time.Time
}

// Down reports whether the provider is known to be unavailable.
func (s Status) Down() bool { return s.State == StateDown }

// Readiness probes the providers that can be probed and caches each
// verdict for a short time, so /readyz and every agent node can ask
// without each costing a call. Only one probe per provider runs at a time;
// concurrent askers wait for it. A real model call's outcome updates the
// verdict too (Observe). Safe for concurrent use.
type Readiness struct {
	probers map[string]Prober
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time
	log     *slog.Logger

	mu      sync.Mutex
	entries map[string]*readinessEntry
}

type readinessEntry struct {
	status   Status
	known    bool
	inflight chan struct{} // closed when the running probe finishes
}

// ReadinessOptions tune a Readiness; zero fields take the defaults.
type ReadinessOptions struct {
	TTL     time.Duration
	Timeout time.Duration
	Logger  *slog.Logger
	// Now is the clock verdicts age by (time.Now when nil).
	Now func() time.Time
}

// NewReadiness watches those of providers that implement Prober (sim does
// not: it has no endpoint and is always ready).
func NewReadiness(providers []Provider, o ReadinessOptions) *Readiness {
	r := &Readiness{probers: map[string]Prober{}, ttl: o.TTL, timeout: o.Timeout, now: o.Now, log: o.Logger,
		entries: map[string]*readinessEntry{}}
	for _, p := range providers {
		if pr, ok := p.(Prober); ok && p != nil {
			r.probers[p.Name()] = pr
		}
	}
	if r.ttl <= 0 {
		r.ttl = DefaultProbeTTL
	}
	if r.timeout <= 0 {
		r.timeout = DefaultProbeTimeout
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// Names lists the watched providers, sorted.
func (r *Readiness) Names() []string {
	if r == nil {
		return nil
	}
	names := slices.Sorted(maps.Keys(r.probers))
	return names
}

// Check returns provider name's readiness: the cached verdict while it is
// younger than the TTL, else a fresh probe (bounded by the probe timeout).
// ok is false for a provider that is not watched (sim, or one not
// configured) and when ctx ended before any verdict was known.
func (r *Readiness) Check(ctx context.Context, name string) (Status, bool) {
	if r == nil {
		return Status{}, false
	}
	p, watched := r.probers[name]
	if !watched {
		return Status{}, false
	}
	for {
		r.mu.Lock()
		e := r.entries[name]
		if e == nil {
			e = &readinessEntry{}
			r.entries[name] = e
		}
		if e.known && r.now().Sub(e.status.CheckedAt) < r.ttl {
			st := e.status
			r.mu.Unlock()
			return st, true
		}
		if wait := e.inflight; wait != nil {
			r.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return r.cached(name)
			}
		}
		done := make(chan struct{})
		e.inflight = done
		r.mu.Unlock()

		st := r.probe(ctx, p)
		r.mu.Lock()
		e.inflight = nil
		if ctx.Err() == nil || st.State == StateUp {
			r.set(name, e, st)
		}
		r.mu.Unlock()
		close(done)
		if ctx.Err() != nil && st.State != StateUp {
			return r.cached(name) // cut short by the caller: not a verdict
		}
		return st, true
	}
}

// cached returns the last verdict, however old.
func (r *Readiness) cached(name string) (Status, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[name]; e != nil && e.known {
		return e.status, true
	}
	return Status{}, false
}

// set records a verdict (r.mu held), logging a change of state.
func (r *Readiness) set(name string, e *readinessEntry, st Status) {
	if !e.known || e.status.State != st.State {
		if st.State == StateUp {
			r.log.Info("model provider ready", "provider", name)
		} else {
			r.log.Warn("model provider not ready", "provider", name, "state", st.State, "detail", st.Detail)
		}
	}
	e.status, e.known = st, true
}

// probe runs one bounded probe and classifies its outcome.
func (r *Readiness) probe(ctx context.Context, p Prober) Status {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return classify(p.Probe(ctx), r.now())
}

func classify(err error, at time.Time) Status {
	if err == nil {
		return Status{State: StateUp, CheckedAt: at}
	}
	var pe *Error
	if errors.As(err, &pe) {
		if pe.Code == CodeRefused || pe.Code == CodeNotConfigured {
			return Status{State: StateRefused, Detail: pe.Error(), CheckedAt: at}
		}
		return Status{State: StateDown, Detail: pe.Error(), CheckedAt: at}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Status{State: StateDown, Detail: "the probe timed out", CheckedAt: at}
	}
	return Status{State: StateDown, Detail: "the probe failed", CheckedAt: at}
}

// Observe updates provider name's verdict from a real call: nil (the
// endpoint answered) marks it up, an *Error with CodeUnavailable marks it
// down, so the next agent node stops at once instead of waiting for its
// own call to fail. Other outcomes change nothing.
func (r *Readiness) Observe(name string, err error) {
	if r == nil {
		return
	}
	if _, watched := r.probers[name]; !watched {
		return
	}
	var st Status
	switch pe, ok := AsError(err); {
	case err == nil:
		st = Status{State: StateUp, CheckedAt: r.now()}
	case ok && pe.Code == CodeUnavailable:
		st = Status{State: StateDown, Detail: pe.Error(), CheckedAt: r.now()}
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[name]
	if e == nil {
		e = &readinessEntry{}
		r.entries[name] = e
	}
	r.set(name, e, st)
}

// Report checks every watched provider at once (each bounded by the probe
// timeout) and returns their verdicts by name; a provider whose verdict
// could not be known is absent.
func (r *Readiness) Report(ctx context.Context) map[string]Status {
	out := map[string]Status{}
	if r == nil {
		return out
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range r.Names() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, ok := r.Check(ctx, name); ok {
				mu.Lock()
				out[name] = st
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}
