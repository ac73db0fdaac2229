package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
)

// AppendRequest is one run's part of AppendEventsGroup: what AppendEvents
// takes.
type AppendRequest struct {
	TenantID, RunID string
	Events          []execution.EventDraft
	Update          *execution.RunUpdate
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
	batch := &pgx.Batch{}
	for _, p := range group {
		batch.Queue(appendEventsSQL, p.call.args()...)
	}
	found := make([]bool, len(group))
	err := func() error {
		res := s.Pool.SendBatch(ctx, batch)
		for k := range group {
			var status string
			var closed bool
			if err := res.QueryRow().Scan(&found[k], &status, new(int), &closed); err != nil {
				res.Close()
				return err
			}
		}
		return res.Close()
	}()
	if err != nil {
		for _, p := range group {
			errs[p.i] = s.sendAppend(ctx, p.call)
		}
		return errs
	}
	for k, p := range group {
		if !found[k] {
			errs[p.i] = fmt.Errorf("store: append events to run %s: %w", p.call.runID, failure.ErrNotFound)
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
	call, err := newAppendCall(r.TenantID, r.RunID, prepared, onlyIfActive)
	if err != nil {
		return nil, err
	}
	if err := call.update(ctx, s.Pool, r.TenantID, r.RunID, r.Update, r.Events); err != nil {
		return nil, err
	}
	return call, nil
}

// sendAppend sends one prepared call in its own statement (and transaction).
func (s *Store) sendAppend(ctx context.Context, call *appendCall) error {
	var found, wasClosed bool
	var status string
	err := s.Pool.QueryRow(ctx, appendEventsSQL, call.args()...).Scan(&found, &status, new(int), &wasClosed)
	if err == nil && !found {
		err = failure.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("store: append events to run %s: %w", call.runID, err)
	}
	return nil
}
