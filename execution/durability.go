package execution

import (
	"errors"
	"time"
)

// Infrastructure faults are failures of the machinery an attempt runs on,
// not of the node: the worker running it died or was partitioned (its
// lease, the heartbeat, lapsed), the worker was drained by a deploy, or a
// service every attempt depends on was down. They never count against the
// node's retry.maxAttempts: the interpreter re-dispatches the same attempt
// (same attempt number, same side-effect idempotency key) after a short
// backoff, records why, and gives up with ErrInfraUnavailable only past the
// run's Durability limits.
const (
	// InfraLeaseLost: the attempt's heartbeat timed out (its worker was
	// killed, lost its network, or stalled). Recorded as
	// EventNodeAttemptLeaseLost.
	InfraLeaseLost = "LEASE_LOST"
	// ErrWorkerDrained: the worker was shutting down (WEFT_WORKER_DRAIN
	// elapsed) and handed the attempt back unfinished.
	ErrWorkerDrained = "WORKER_DRAINED"
	// ErrStoreUnavailable: PostgreSQL could not be reached during the attempt.
	ErrStoreUnavailable = "STORE_UNAVAILABLE"
	// ErrProviderUnavailable: the agent's model provider could not be
	// reached or answered that it is unavailable.
	ErrProviderUnavailable = "PROVIDER_UNAVAILABLE"
	// ErrEventsGap: the attempt carried a suffix of the run's events
	// (NodeInput.Suffix, interpreter version 7) and had to wait for it to
	// be in the log before its effect, but the events before it did not
	// reach the log in time (an earlier carrier's append was lost or
	// stalled). Nothing ran; the attempt goes out again and, since it
	// failed, carries the whole unconfirmed prefix.
	ErrEventsGap = "EVENTS_GAP"
	// ErrInfraUnavailable fails a node whose attempt was re-dispatched more
	// often, or for longer, than the run's Durability allows.
	ErrInfraUnavailable = "INFRA_UNAVAILABLE"
)

// IsInfraError reports whether an activity ApplicationError type is an
// infrastructure fault the interpreter re-dispatches without spending an
// attempt.
func IsInfraError(typ string) bool {
	switch typ {
	case ErrWorkerDrained, ErrStoreUnavailable, ErrProviderUnavailable, ErrEventsGap:
		return true
	}
	return false
}

// Durability bounds how an interpreter execution treats infrastructure
// faults. It travels in RunParams so that replays decide exactly as the
// original execution did; zero fields take DefaultDurability's values.
type Durability struct {
	// LeaseTimeoutMs is the heartbeat timeout of every activity attempt: a
	// worker that stops heartbeating for this long has lost the attempt.
	LeaseTimeoutMs int64 `json:"leaseTimeoutMs,omitempty"`
	// MaxRedispatches bounds the re-dispatches of one node over the run.
	MaxRedispatches int `json:"maxRedispatches,omitempty"`
	// MaxRedispatchMs bounds, in workflow time, how long after its first
	// infrastructure fault a node may still be re-dispatched.
	MaxRedispatchMs int64 `json:"maxRedispatchMs,omitempty"`
	// EventDeferMs bounds, in workflow time, how long a workflow task that
	// only collects completions while siblings run may leave its events
	// unappended (interpreter version 5): a node's completion reaches the
	// log and the event stream at most about this long after it.
	EventDeferMs int64 `json:"eventDeferMs,omitempty"`
}

// DefaultDurability: a lost worker is noticed within 5 s, and a node keeps
// being re-dispatched for up to 20 faults or 30 minutes (a deploy, a
// database failover or a provider's bad minute fit well inside).
var DefaultDurability = Durability{
	LeaseTimeoutMs:  5_000,
	MaxRedispatches: 20,
	MaxRedispatchMs: (30 * time.Minute).Milliseconds(),
	EventDeferMs:    time.Second.Milliseconds(),
}

// MinLeaseTimeout bounds LeaseTimeoutMs from below: heartbeats go out three
// times per lease and the SDK batches them for up to a second.
const MinLeaseTimeout = time.Second

// WithDefaults fills zero fields from DefaultDurability.
func (d Durability) WithDefaults() Durability {
	if d.LeaseTimeoutMs <= 0 {
		d.LeaseTimeoutMs = DefaultDurability.LeaseTimeoutMs
	}
	if d.MaxRedispatches <= 0 {
		d.MaxRedispatches = DefaultDurability.MaxRedispatches
	}
	if d.MaxRedispatchMs <= 0 {
		d.MaxRedispatchMs = DefaultDurability.MaxRedispatchMs
	}
	if d.EventDeferMs <= 0 {
		d.EventDeferMs = DefaultDurability.EventDeferMs
	}
	return d
}

// Validate refuses limits that would make the lease meaningless.
func (d Durability) Validate() error {
	d = d.WithDefaults()
	if time.Duration(d.LeaseTimeoutMs)*time.Millisecond < MinLeaseTimeout {
		return errors.New("lease timeout must be at least 1s")
	}
	return nil
}

// LeaseTimeout is LeaseTimeoutMs as a Duration.
func (d Durability) LeaseTimeout() time.Duration {
	return time.Duration(d.WithDefaults().LeaseTimeoutMs) * time.Millisecond
}
