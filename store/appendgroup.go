package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
)

// AppendRequest is one run's part of AppendEventsGroup: what AppendEvents
// takes, and for an append an attempt carries (AppendCarried) the
// interpreter ordinals that order it against the run's other carriers.
type AppendRequest struct {
	TenantID, RunID string
	Events          []execution.EventDraft
	Update          *execution.RunUpdate
	// After, when positive, makes the request a suffix: its events follow
	// those through ordinal After, which an earlier carrier was given. It
	// is refused (ErrEventsGap, nothing written) unless appends that
	// vouched for it (Through) already logged every event through After.
	After int
	// Through, when positive, is the ordinal of the request's last event:
	// the request vouches that, once its events are in the log, every
	// event of the run through Through is (it holds the interpreter's
	// whole unconfirmed prefix, or is a suffix that passes the check).
	// Only an append whose ordinals are the ones the run's history keeps
	// may vouch: an attempt's, never a flush's (migration 00026).
	Through int
}

// CodeEventsGap is the code of ErrEventsGap.
const CodeEventsGap = "EVENTS_GAP"

// ErrEventsGap refuses a suffix (AppendRequest.After) whose preceding
// events the log is not known to hold: an earlier carrier's append has not
// committed yet, or was lost. Nothing of the request was written; the
// interpreter still holds its events and the ones before them.
var ErrEventsGap = failure.New(CodeEventsGap, "the events before this batch are not yet in the run's log; nothing was appended")

// AppendCarried appends one batch an attempt carries: AppendEvents with
// the request's After check and Through vouch (ErrEventsGap when refused).
func (s *Store) AppendCarried(ctx context.Context, r AppendRequest) error {
	call, err := s.prepareAppend(ctx, r, false)
	if err != nil {
		return err
	}
	return s.sendAppend(ctx, call)
}

// AppendEventsGroup appends several runs' events in one transaction, so
// they share one commit: one round trip and one WAL flush instead of one
// of each per run. Each request is exactly AppendEvents (same statement,
// row lock, keys skipped, hash chain, run update); the result holds one
// error per request, in order.
//
// Requests are sent in run order, so two groups lock the runs they share
// in the same order. If the group's transaction fails as a whole (a
// request the database refuses, a deadlock with a writer locking runs in
// another order, a lost connection), nothing of it was committed and each
// request is then appended on its own, so a request's error is its own.
// Requests of one run are appended in the order given.
func (s *Store) AppendEventsGroup(ctx context.Context, reqs []AppendRequest) []error {
	errs := make([]error, len(reqs))
	type prepared struct {
		i    int
		call *appendCall
	}
	var group []prepared
	for i, r := range reqs {
		call, err := s.prepareAppend(ctx, r, false)
		if err != nil {
			errs[i] = err
			continue
		}
		group = append(group, prepared{i, call})
	}
	if len(group) == 0 {
		return errs
	}
	if len(group) == 1 {
		errs[group[0].i] = s.sendAppend(ctx, group[0].call)
		return errs
	}
	slices.SortStableFunc(group, func(a, b prepared) int { return strings.Compare(a.call.runID, b.call.runID) })
	// A batch outside an explicit transaction runs in one implicit
	// transaction (one Sync): all of it commits, or none of it.
	calls := make([]*appendCall, len(group))
	for k, p := range group {
		calls[k] = p.call
	}
	outs, err := execAppendBatch(ctx, s.Pool, calls)
	if err != nil {
		for _, p := range group {
			errs[p.i] = s.sendAppend(ctx, p.call)
		}
		return errs
	}
	for k, p := range group {
		switch {
		case !outs[k].found:
			errs[p.i] = fmt.Errorf("store: append events to run %s: %w", p.call.runID, failure.ErrNotFound)
		case outs[k].gap:
			errs[p.i] = fmt.Errorf("store: append events to run %s: %w", p.call.runID, ErrEventsGap)
		}
	}
	return errs
}

// prepareAppend validates, redacts and lays out r as one
// weft_append_events call (see appendEvents for onlyIfActive).
func (s *Store) prepareAppend(ctx context.Context, r AppendRequest, onlyIfActive bool) (*appendCall, error) {
	prepared, err := prepareEvents(r.Events)
	if err != nil {
		return nil, err
	}
	if r.Update != nil && r.Update.Status != "" && statusRank(r.Update.Status) < 0 {
		return nil, failure.New(failure.CodeInvalidRequest, "run update status %q is unknown", r.Update.Status)
	}
	if r.After < 0 || r.Through < 0 || (r.After > 0 && r.Through < r.After+len(r.Events)) {
		return nil, failure.New(failure.CodeInvalidRequest, "carried ordinals after %d through %d do not hold %d events", r.After, r.Through, len(r.Events))
	}
	call, err := newAppendCall(r.TenantID, r.RunID, prepared, onlyIfActive)
	if err != nil {
		return nil, err
	}
	call.after, call.through = r.After, r.Through
	if err := call.update(ctx, s.Pool, r.TenantID, r.RunID, r.Update, r.Events); err != nil {
		return nil, err
	}
	return call, nil
}

// sendAppend sends one prepared call in its own statement (and transaction).
func (s *Store) sendAppend(ctx context.Context, call *appendCall) error {
	out, err := execAppend(ctx, s.Pool, call)
	switch {
	case err == nil && !out.found:
		err = failure.ErrNotFound
	case err == nil && out.gap:
		err = ErrEventsGap
	}
	if err != nil {
		return fmt.Errorf("store: append events to run %s: %w", call.runID, err)
	}
	return nil
}
