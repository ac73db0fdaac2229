package catalog

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// Call is one invocation of an action handler. Tenant, run, node and actor
// come from the run, never from the input.
type Call struct {
	TenantID string
	RunID    string
	NodeID   string
	// Actor is who the run acts for: a user, or a schedule's or webhook's
	// service actor (Sub "schedule:<id>" / "webhook:<id>", ConfiguredBy
	// the user who configured it). An action records it to say who acted.
	Actor execution.Actor
	// RequestedBy is the user behind the call: the actor's own sub for a
	// user, the configuring user for a service actor
	// (execution.Actor.RequestedBy).
	RequestedBy string
	// Attempt counts from 1.
	Attempt int
	// IdempotencyKey identifies (tenant, run, node) and is the same on every
	// attempt and replay, so a write keyed by it happens at most once.
	IdempotencyKey string
	// Input is the call input, already validated against the contract's inputSchema.
	Input json.RawMessage
	// Permissions is what the run may do now: its permission snapshot
	// minus the scopes revoked from RequestedBy since, read just before the
	// call (and already checked against the node's or tool's required
	// permissions).
	Permissions []string
	// Heartbeat reports liveness (and progress details) to Temporal. It may
	// be nil outside an activity; use Call.Beat, which tolerates that.
	Heartbeat func(details ...any)
}

// Beat heartbeats if the call has a heartbeat function.
func (c Call) Beat(details ...any) {
	if c.Heartbeat != nil {
		c.Heartbeat(details...)
	}
}

// Handler runs an action. Its output must match the contract's outputSchema.
// Errors are retried by the interpreter unless they are non-retryable
// Temporal application errors (temporal.NewNonRetryableApplicationError);
// a cancelled ctx must be returned promptly as ctx.Err().
type Handler func(ctx context.Context, call Call) (json.RawMessage, error)

// Action is a Go action: its published contract and its handler.
type Action struct {
	Contract graph.ActionContract
	Handler  Handler
}

// Registry is the set of actions a worker runs, keyed by id@version. It is
// immutable after NewRegistry and safe for concurrent use.
type Registry struct {
	byRef map[graph.ActionRef]Action
	// hashes are the contracts' ContractHash, computed once: every node
	// attempt compares its pinned hash with the worker's.
	hashes    map[graph.ActionRef]string
	contracts []graph.ActionContract
}

// NewRegistry registers actions. It refuses a second action with the same
// id@version (even with the same contract: two handlers for one contract is
// a wiring mistake), a missing handler, and a contract whose schemas do not
// compile, so a bad action stops the worker at start rather than a run.
func NewRegistry(actions ...Action) (*Registry, error) {
	r := &Registry{byRef: make(map[graph.ActionRef]Action, len(actions)), hashes: make(map[graph.ActionRef]string, len(actions))}
	for _, a := range actions {
		c := a.Contract
		ref := graph.ActionRef{ID: c.ID, Version: c.Version}
		if c.ID == "" || c.Version < 1 {
			return nil, fmt.Errorf("catalog: action %q has no id or a version below 1", ref)
		}
		if _, dup := r.byRef[ref]; dup {
			return nil, fmt.Errorf("catalog: action %s registered twice", ref)
		}
		if a.Handler == nil {
			return nil, fmt.Errorf("catalog: action %s has no handler", ref)
		}
		for name, s := range map[string]json.RawMessage{"inputSchema": c.InputSchema, "outputSchema": c.OutputSchema} {
			if _, err := graph.CompileSchema(s); err != nil {
				return nil, fmt.Errorf("catalog: action %s %s: %w", ref, name, err)
			}
		}
		h := ContractHash(c)
		if h == "" {
			return nil, fmt.Errorf("catalog: action %s contract cannot be hashed", ref)
		}
		r.byRef[ref] = a
		r.hashes[ref] = h
		r.contracts = append(r.contracts, c)
	}
	slices.SortFunc(r.contracts, func(a, b graph.ActionContract) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Version, b.Version))
	})
	return r, nil
}

// Lookup returns the action registered as id@version.
func (r *Registry) Lookup(id string, version int) (Action, bool) {
	if r == nil {
		return Action{}, false
	}
	a, ok := r.byRef[graph.ActionRef{ID: id, Version: version}]
	return a, ok
}

// Hash returns the ContractHash of the action registered as id@version.
func (r *Registry) Hash(id string, version int) (string, bool) {
	if r == nil {
		return "", false
	}
	h, ok := r.hashes[graph.ActionRef{ID: id, Version: version}]
	return h, ok
}

// Contracts returns every registered contract sorted by id then version:
// what the worker publishes to the catalog.
func (r *Registry) Contracts() []graph.ActionContract {
	if r == nil {
		return []graph.ActionContract{}
	}
	return slices.Clone(r.contracts)
}

// ContractHash is the content hash of a contract: hex sha256 of its RFC 8785
// canonical JSON, the same hash publication pins in graph.PinnedAction.Hash,
// so a worker can prove it runs exactly the pinned contract. It returns ""
// for a contract that cannot be encoded (a schema that is not JSON), which
// NewRegistry refuses.
func ContractHash(c graph.ActionContract) string {
	b, err := graph.Canonical(c)
	if err != nil {
		return ""
	}
	return graph.SHA256Hex(b)
}

// IdempotencyKey is the key of one node's side effects, (tenant, run,
// node), the same on every attempt and replay. Each part is path-escaped so
// the key is unambiguous and still readable in the ledger.
func IdempotencyKey(tenantID, runID, nodeID string) string {
	return url.PathEscape(tenantID) + "/" + url.PathEscape(runID) + "/" + url.PathEscape(nodeID)
}
