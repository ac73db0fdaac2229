package starter

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/weftworks/weft/store"
)

// The dispatcher (issue 19). A live run over its workflow's or tenant's
// caps is accepted and stored throttled; the ONE decision of who gets a
// slot is store.admit, made in PostgreSQL under the tenant's admission
// lock, so every replica of the API and the worker may call it at once
// and the caps still hold. What calls it, and so starts admitted runs:
//
//   - an enqueue (its admission pass runs in the enqueue's transaction);
//   - a change of limits (SetWorkflowLimits, SetTenantLimits);
//   - the settlement of a run that held a slot, whoever settles it (the
//     interpreter, the reconciler, a cancel): its transaction notifies
//     store.SlotsChannel and every RunDispatcher wakes and dispatches the
//     tenant, within milliseconds;
//   - a timer RunDispatcher arms when runs wait only for a start rate (an
//     enqueue or a change of limits that leaves such a run notifies
//     store.SlotsChannel too, so a dispatcher learns when even if no run
//     of the tenant settles afterwards);
//   - a repeated enqueue of a throttled run, and the sweeper (every tenant
//     with throttled runs, each pass) as the safety net for notifications
//     lost while no dispatcher listened.
//
// Whoever admits a run starts it; a start that fails leaves it queued for
// the sweeper, like any other.

// dispatchStartTimeout bounds the starts of runs an enqueue or a change of
// limits admitted besides its own: they are not the caller's request, so
// they outlive it (a client hanging up must not leave them to the sweeper).
const dispatchStartTimeout = 30 * time.Second

// Dispatch admits the tenant's throttled runs that fit their limits now,
// first in first out, and starts them.
func (s *Starter) Dispatch(ctx context.Context, tenantID string) (store.Admission, error) {
	adm, err := s.store.Dispatch(ctx, tenantID)
	if err != nil {
		return adm, fmt.Errorf("starter: dispatch: %w", err)
	}
	s.startAdmitted(ctx, adm.Admitted)
	return adm, nil
}

// startAdmitted starts admitted runs in their queue order. A failed start
// is logged: the run is queued, and the sweeper starts it.
func (s *Starter) startAdmitted(ctx context.Context, runs []store.Run) {
	if len(runs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dispatchStartTimeout)
	defer cancel()
	for _, r := range runs {
		if _, err := s.start(ctx, r); err != nil {
			s.log.Warn("start of an admitted run failed; the sweeper will retry", "run", r.RunID, "workflowId", r.WorkflowID, "err", err)
			continue
		}
		s.log.Info("run admitted and started", "run", r.RunID, "workflowId", r.WorkflowID, "tenant", r.TenantID,
			"workflowKey", r.WorkflowKey)
	}
}

// RunDispatcher dispatches, until ctx ends, every tenant whose runs
// released a slot (store.SlotsChannel, notified at the settlement's
// commit), every tenant with throttled runs after each (re)connection of
// its listener (notifications are lost while disconnected), and a tenant
// whose runs wait for a start rate when its window has room again. Every
// API and worker replica may run it: admissions are decided under the
// tenant's lock, so dispatchers never need to coordinate.
func (s *Starter) RunDispatcher(ctx context.Context) {
	d := &dispatcher{s: s, pending: map[string]bool{}, due: map[string]time.Time{}, kick: make(chan struct{}, 1)}
	go s.store.ListenSlots(ctx, s.log, d.wake, func() {
		tenants, err := s.store.ThrottledTenants(ctx, sweepBatch)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("dispatcher: list throttled tenants", "err", err)
			}
			return
		}
		for _, t := range tenants {
			d.wake(t)
		}
	})
	d.loop(ctx)
}

// dispatcher coalesces wake-ups per tenant and runs one dispatch at a time.
type dispatcher struct {
	s       *Starter
	mu      sync.Mutex
	pending map[string]bool
	// due holds, per tenant, when runs waiting for a start rate may go.
	due  map[string]time.Time
	kick chan struct{}
}

func (d *dispatcher) wake(tenantID string) {
	d.mu.Lock()
	d.pending[tenantID] = true
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *dispatcher) loop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		d.mu.Lock()
		now := time.Now()
		next := time.Duration(math.MaxInt64)
		for t, at := range d.due {
			if !at.After(now) {
				d.pending[t] = true
				delete(d.due, t)
			} else if wait := at.Sub(now); wait < next {
				next = wait
			}
		}
		var batch []string
		for t := range d.pending {
			batch = append(batch, t)
		}
		clear(d.pending)
		d.mu.Unlock()
		for _, t := range batch {
			adm, err := d.s.Dispatch(ctx, t)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				d.s.log.Warn("dispatcher: dispatch failed; the sweeper will retry", "tenant", t, "err", err)
				continue
			}
			if adm.RetryAt != nil {
				d.mu.Lock()
				if at, ok := d.due[t]; !ok || adm.RetryAt.Before(at) {
					// A little after the window opens: the database's
					// clock decides, and the two may differ slightly.
					d.due[t] = adm.RetryAt.Add(50 * time.Millisecond)
				}
				d.mu.Unlock()
			}
		}
		if len(batch) > 0 {
			continue // recompute the timers with what this round armed
		}
		if next == time.Duration(math.MaxInt64) {
			next = time.Hour
		}
		timer.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// SetWorkflowLimits replaces the limits of workflow l.WorkflowKey and
// starts the runs they make room for.
func (s *Starter) SetWorkflowLimits(ctx context.Context, l store.WorkflowLimits) (store.WorkflowLimits, error) {
	out, adm, err := s.store.SetWorkflowLimits(ctx, l)
	if err != nil {
		return out, err
	}
	s.startAdmitted(ctx, adm.Admitted)
	s.log.Info("workflow limits set", "tenant", l.TenantID, "workflowKey", l.WorkflowKey, "by", l.UpdatedBy,
		"admitted", len(adm.Admitted))
	return out, nil
}

// SetTenantLimits replaces the tenant's limits and starts the runs they
// make room for.
func (s *Starter) SetTenantLimits(ctx context.Context, l store.TenantLimits) (store.TenantLimits, error) {
	out, adm, err := s.store.SetTenantLimits(ctx, l)
	if err != nil {
		return out, err
	}
	s.startAdmitted(ctx, adm.Admitted)
	s.log.Info("tenant limits set", "tenant", l.TenantID, "by", l.UpdatedBy, "admitted", len(adm.Admitted))
	return out, nil
}

// checkBudget validates an enqueue's budget; an empty one is none (nil).
func checkBudget(b *store.Budget) (*store.Budget, error) {
	if b == nil || b.IsZero() {
		return nil, nil
	}
	if err := b.Validate("budget"); err != nil {
		return nil, err
	}
	return b, nil
}

// sameBudget compares the budgets two enqueues asked for (nil: none).
func sameBudget(bound, req *store.Budget) bool {
	if bound == nil || req == nil {
		return bound == nil && req == nil
	}
	return bound.Equal(*req)
}
