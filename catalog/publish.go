package catalog

import (
	"context"
	"fmt"

	"github.com/weftworks/weft/graph"
)

// ContractPublisher stores contracts in the catalog (store.Store): it
// refuses, with ACTION_CONTRACT_CHANGED, a contract whose id@version is
// already published with another content hash.
type ContractPublisher interface {
	PublishActionContracts(ctx context.Context, contracts []graph.ActionContract) error
}

// Publish publishes every registered contract to the catalog. A worker
// calls it at start, before it polls, and refuses to start when it fails:
// a changed contract under a published id@version must become a new
// version, because revisions pin contract hashes.
func (r *Registry) Publish(ctx context.Context, p ContractPublisher) error {
	if err := p.PublishActionContracts(ctx, r.Contracts()); err != nil {
		return fmt.Errorf("catalog: publish action contracts: %w", err)
	}
	return nil
}
