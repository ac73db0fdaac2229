package starter

import (
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/weftworks/weft/store"
)

// readsCacheSize bounds the (tenant, workflow, revision) and the (tenant,
// principal) entries the enqueue reads cache keeps, each.
const readsCacheSize = 4096

// maxFreshAttempts bounds how often one enqueue reads again and decides
// again because what it decided with changed before its statement ran.
const maxFreshAttempts = 3

// readsCache keeps what store.ReadForEnqueue last found of a workflow's
// revision and default budget and of a principal's revocations, so a
// repeated enqueue of a published workflow decides without reading first
// and is one statement (issue 14: enqueue throughput).
//
// It needs no invalidation: nothing is ever written on its word alone.
// The statement checks, in its own snapshot, that the revision, the
// default budget and the revocations are still the ones the enqueue was
// decided with (store.EnqueueRunExpecting), so a publish, a change of
// limits or a revocation committed before the statement takes effect
// exactly as if the enqueue had read it; when they changed, the enqueue
// reads afresh (and refreshes the cache). Only positive answers are kept:
// a refusal (missing workflow or revision, input the schema refuses,
// scope missing) is always decided from fresh reads, which also answer a
// repeated key from its binding first.
type readsCache struct {
	workflows *lru.Cache[workflowReadsKey, workflowReads]
	revoked   *lru.Cache[revokedKey, []string]
}

type workflowReadsKey struct {
	tenant, key string
	// named is the revision the request named; 0 for the latest.
	named int
}

type workflowReads struct {
	revision store.Revision
	limits   store.WorkflowLimits
}

type revokedKey struct{ tenant, sub string }

func newReadsCache() *readsCache {
	w, _ := lru.New[workflowReadsKey, workflowReads](readsCacheSize) // fails only for a size below 1
	r, _ := lru.New[revokedKey, []string](readsCacheSize)
	return &readsCache{workflows: w, revoked: r}
}

func readsKeyOf(q store.EnqueueLookup) workflowReadsKey {
	k := workflowReadsKey{tenant: q.TenantID, key: q.WorkflowKey}
	if q.Revision != nil {
		k.named = *q.Revision
	}
	return k
}

// lookup answers q from the cache, as ReadForEnqueue would have when
// nothing changed since, minus the binding (the statement finds it): ok
// only when every part q needs is cached.
func (c *readsCache) lookup(q store.EnqueueLookup) (store.EnqueueReads, bool) {
	w, ok := c.workflows.Get(readsKeyOf(q))
	if !ok {
		return store.EnqueueReads{}, false
	}
	reads := store.EnqueueReads{WorkflowFound: true, Limits: w.limits, Revision: w.revision, RevisionFound: true}
	if q.RevokedOf != "" {
		if reads.Revoked, ok = c.revoked.Get(revokedKey{q.TenantID, q.RevokedOf}); !ok {
			return store.EnqueueReads{}, false
		}
	}
	return reads, true
}

// remember keeps what fresh reads found for q (a revision that exists,
// revocations read).
func (c *readsCache) remember(q store.EnqueueLookup, reads store.EnqueueReads) {
	if reads.WorkflowFound && reads.RevisionFound {
		c.workflows.Add(readsKeyOf(q), workflowReads{revision: reads.Revision, limits: reads.Limits})
	}
	if q.RevokedOf != "" && reads.Revoked != nil {
		c.revoked.Add(revokedKey{q.TenantID, q.RevokedOf}, reads.Revoked)
	}
}
