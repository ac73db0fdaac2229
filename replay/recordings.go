package replay

import (
	"context"
	"errors"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/fixtures"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// Recordings is the Deriver over the store's recordings
// (store.RunRecording) and fixtures.FromRecording.
type Recordings struct{ Store *store.Store }

// Derive implements Deriver.
func (r Recordings) Derive(ctx context.Context, tenantID, runID string, doc *graph.Document, extra fixtures.Set) (Derived, error) {
	rec, err := r.Store.RunRecording(ctx, tenantID, runID)
	if errors.Is(err, failure.ErrNotFound) {
		return Derived{NotReplayable: ReasonRunDeleted}, nil
	}
	if err != nil {
		return Derived{}, err
	}
	if !rec.Replayable {
		return Derived{NotReplayable: rec.Reason}, nil
	}
	set, unrecorded, err := fixtures.FromRecording(doc, rec.NodeResults(), extra)
	if errors.Is(err, fixtures.ErrRecordingTooLarge) {
		return Derived{NotReplayable: store.RecordingTooLarge}, nil
	}
	if err != nil {
		return Derived{}, err
	}
	return Derived{Fixtures: set, Unrecorded: unrecorded}, nil
}
