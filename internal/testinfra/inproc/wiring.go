package inproc

import (
	"errors"
	"fmt"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/config"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/replay"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
	"github.com/weftworks/weft/worker"
)

// Wiring is the standard wiring of a weft process, built over a store as
// cmd/weft/internal/app builds it (whose wiring tests cannot import): the
// variable registry, the publication resolver and the publication service.
// The production constructors require these; the helpers below fill in
// whatever a test leaves unset, so a test states only what it varies.
type Wiring struct {
	Variables   *variables.Registry
	Resolver    *publication.Resolver
	Publication *publication.Service
}

// Wire builds the standard wiring over st.
func Wire(st *store.Store) (Wiring, error) {
	if st == nil {
		return Wiring{}, errors.New("inproc: Wire needs a store")
	}
	vars, err := variables.Builtin(st)
	if err != nil {
		return Wiring{}, fmt.Errorf("inproc: variables: %w", err)
	}
	return wireWith(st, vars, nil)
}

// wireWith completes a wiring over st from vars and, when set, resolver.
func wireWith(st *store.Store, vars *variables.Registry, resolver *publication.Resolver) (Wiring, error) {
	var err error
	if resolver == nil {
		if resolver, err = publication.NewResolver(st, vars); err != nil {
			return Wiring{}, err
		}
	}
	pub, err := publication.NewService(st, resolver)
	if err != nil {
		return Wiring{}, err
	}
	return Wiring{Variables: vars, Resolver: resolver, Publication: pub}, nil
}

// NewStarter is starter.New with d.Resolver, when unset, the standard
// resolver over d.Store.
func NewStarter(d starter.Deps) (*starter.Starter, error) {
	if d.Resolver == nil {
		w, err := Wire(d.Store)
		if err != nil {
			return nil, err
		}
		d.Resolver = w.Resolver
	}
	return starter.New(d)
}

// Starter is NewStarter failing the test on an error.
func Starter(t testing.TB, d starter.Deps) *starter.Starter {
	t.Helper()
	s, err := NewStarter(d)
	if err != nil {
		t.Fatalf("inproc: starter: %v", err)
	}
	return s
}

// NewAPI is api.New with what d leaves unset built as the app builds it:
// Variables (variables.Builtin over d.Store), Publication (over Variables),
// Streams (NewStreams(nil, 0): streams poll the store) and, when d has a
// Starter, a Temporal client and Config.TaskQueue, Bridges (the webhook key
// derived from the JWT secret unless Config.WebhookKey is set); without
// them the bridge routes answer 503, and with them Replays (the replay
// engine on Config's bounds, their defaults when unset).
func NewAPI(d api.Deps) (*echo.Echo, error) {
	if d.Store == nil {
		return nil, errors.New("inproc: NewAPI needs a store")
	}
	if d.Variables == nil {
		vars, err := variables.Builtin(d.Store)
		if err != nil {
			return nil, err
		}
		d.Variables = vars
	}
	if d.Publication == nil {
		w, err := wireWith(d.Store, d.Variables, nil)
		if err != nil {
			return nil, err
		}
		d.Publication = w.Publication
	}
	if d.Streams == nil {
		d.Streams = api.NewStreams(nil, 0)
	}
	if d.Bridges == nil && d.Starter != nil && d.Temporal != nil && d.Config.TaskQueue != "" && d.Keys != nil {
		key, err := bridges.WebhookKey(d.Config.WebhookKey, string(d.Keys.Secret()))
		if err != nil {
			return nil, err
		}
		if d.Bridges, err = bridges.New(bridges.Deps{Store: d.Store, Starter: d.Starter, Variables: d.Variables,
			Temporal: d.Temporal, TaskQueue: d.Config.TaskQueue, WebhookKey: key, Logger: d.Logger}); err != nil {
			return nil, err
		}
	}
	if d.Replays == nil && d.Starter != nil && d.Temporal != nil && d.Config.TaskQueue != "" {
		maxRuns, parallel := d.Config.ReplayMaxRuns, d.Config.ReplayParallel
		if maxRuns < 1 {
			maxRuns = config.DefaultReplayMaxRuns
		}
		if parallel < 1 {
			parallel = config.DefaultReplayParallel
		}
		r, err := replay.New(replay.Deps{Store: d.Store, Starter: d.Starter, Temporal: d.Temporal,
			TaskQueue: d.Config.TaskQueue, MaxRuns: maxRuns, Parallel: parallel, Logger: d.Logger})
		if err != nil {
			return nil, err
		}
		d.Replays = r
	}
	return api.New(d)
}

// API is NewAPI failing the test on an error.
func API(t testing.TB, d api.Deps) *echo.Echo {
	t.Helper()
	e, err := NewAPI(d)
	if err != nil {
		t.Fatalf("inproc: api: %v", err)
	}
	return e
}

// Publication is the publication service over st with resolver (the
// standard one when nil), for a test that varies the resolver.
func Publication(t testing.TB, st *store.Store, resolver *publication.Resolver) *publication.Service {
	t.Helper()
	vars, err := variables.Builtin(st)
	if err != nil {
		t.Fatalf("inproc: variables: %v", err)
	}
	w, err := wireWith(st, vars, resolver)
	if err != nil {
		t.Fatalf("inproc: publication: %v", err)
	}
	return w.Publication
}

// WorkerDeps completes d as the app does: Variables (variables.Builtin over
// d.Store) and Starter (on d.Config's task queue, namespace and
// durability, with the standard resolver) when unset.
func WorkerDeps(d worker.Deps) (worker.Deps, error) {
	if d.Store == nil {
		return d, errors.New("inproc: worker needs a store")
	}
	if d.Variables == nil {
		vars, err := variables.Builtin(d.Store)
		if err != nil {
			return d, err
		}
		d.Variables = vars
	}
	if d.Starter == nil {
		w, err := wireWith(d.Store, d.Variables, nil)
		if err != nil {
			return d, err
		}
		w.Resolver.HistoryBudget = &d.Config.History
		if d.Starter, err = starter.New(starter.Deps{Store: d.Store, Temporal: d.Temporal, TaskQueue: d.Config.TaskQueue,
			UIURL: d.Config.TemporalUIURL, Namespace: d.Config.TemporalNamespace, Logger: d.Logger,
			Resolver: w.Resolver, Durability: d.Config.Durability, LeanInputs: d.Config.LeanInputs}); err != nil {
			return d, err
		}
	}
	return d, nil
}
