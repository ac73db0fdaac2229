package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// DefaultRevisionCacheSize is how many compiled revisions a worker keeps in
// memory by default. A revision is a few hundred KiB at most (1 MiB document
// limit), so this bounds the cache well below typical worker memory.
const DefaultRevisionCacheSize = 256

// compiledSource reads compiled revisions (store.Store).
type compiledSource interface {
	GetCompiled(ctx context.Context, tenantID, checksum string) (*graph.Compiled, error)
}

type revisionKey struct{ tenantID, checksum string }

// revisionCache is an LRU of compiled revisions by (tenant, checksum). The
// content behind a checksum never changes, so entries never go stale; the
// bound only limits memory.
type revisionCache struct {
	src compiledSource
	lru *lru.Cache[revisionKey, *revision]
}

func newRevisionCache(src compiledSource, size int) *revisionCache {
	if size <= 0 {
		size = DefaultRevisionCacheSize
	}
	cache, _ := lru.New[revisionKey, *revision](size) // fails only for a size below 1
	return &revisionCache{src: src, lru: cache}
}

// get returns the revision, loading it on a miss. Concurrent misses of one
// key may load twice; the content is identical, and the first one stored is
// what every caller gets.
func (c *revisionCache) get(ctx context.Context, tenantID, checksum string) (*revision, error) {
	key := revisionKey{tenantID, checksum}
	if rev, ok := c.lru.Get(key); ok {
		return rev, nil
	}
	compiled, err := c.src.GetCompiled(ctx, tenantID, checksum)
	if err != nil {
		return nil, storeError(execution.ErrPlanNotFound, err, "load compiled revision "+checksum)
	}
	rev := newRevision(key, compiled)
	if first, ok, _ := c.lru.PeekOrAdd(key, rev); ok {
		return first, nil
	}
	return rev, nil
}

// node returns the revision and the body of the node a NodeInput names,
// refusing (permanently) a node that is not in the revision or whose kind
// differs from what the interpreter believes.
func (c *revisionCache) node(ctx context.Context, in execution.NodeInput) (*revision, graph.Node, error) {
	rev, err := c.get(ctx, in.TenantID, in.Checksum)
	if err != nil {
		return nil, graph.Node{}, err
	}
	n, ok := rev.nodes[in.NodeID]
	if !ok {
		return nil, graph.Node{}, permanent(execution.ErrNodeNotFound, nil, "node %q is not in revision %s", in.NodeID, in.Checksum)
	}
	if in.Kind != "" && in.Kind != n.Kind {
		return nil, graph.Node{}, permanent(execution.ErrNodeNotFound, nil,
			"node %q of revision %s is a %s, not a %s", in.NodeID, in.Checksum, n.Kind, in.Kind)
	}
	return rev, n, nil
}

// revision is one compiled revision with what activities compile from it,
// memoised per node (gates, validator schemas) or per pinned action
// (input/output schemas): the same (checksum, node) always compiles to the
// same program, so it is compiled once per worker.
type revision struct {
	key      revisionKey
	compiled *graph.Compiled
	nodes    map[string]graph.Node
	actions  map[graph.ActionRef]graph.PinnedAction
	agents   map[graph.AgentRef]graph.AgentContract

	mu      sync.Mutex
	gates   map[string]*graph.Gate
	schemas map[string]*schema
	// defaults memoises simulated nodes' schema-valid default outputs.
	defaults map[string]json.RawMessage
}

func newRevision(key revisionKey, c *graph.Compiled) *revision {
	r := &revision{
		key: key, compiled: c,
		nodes:    make(map[string]graph.Node, len(c.Document.Nodes)),
		actions:  make(map[graph.ActionRef]graph.PinnedAction, len(c.Actions)),
		agents:   make(map[graph.AgentRef]graph.AgentContract, len(c.Agents)),
		gates:    map[string]*graph.Gate{},
		schemas:  map[string]*schema{},
		defaults: map[string]json.RawMessage{},
	}
	for _, n := range c.Document.Nodes {
		r.nodes[n.ID] = n
	}
	for _, a := range c.Actions {
		r.actions[graph.ActionRef{ID: a.ID, Version: a.Version}] = a
	}
	for _, a := range c.Agents {
		r.agents[graph.AgentRef{Key: a.Key, Revision: a.Revision}] = a
	}
	return r
}

// gate returns the node's compiled cel/v1 program.
func (r *revision) gate(n graph.Node) (*graph.Gate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g, ok := r.gates[n.ID]; ok {
		return g, nil
	}
	if n.Language != graph.LanguageCELv1 {
		return nil, permanent(execution.ErrExpressionFailed, nil, "gate %q uses language %q; only %s runs", n.ID, n.Language, graph.LanguageCELv1)
	}
	g, err := graph.CompileGate(n.Expression)
	if err != nil {
		return nil, permanent(execution.ErrExpressionFailed, err, "gate %q does not compile: %v", n.ID, err)
	}
	r.gates[n.ID] = g
	return g, nil
}

// schema is a compiled JSON Schema and whether it accepts every JSON
// value: `{}` or `true`, like core.echo's contract, which validate then
// checks without decoding the value into a tree only to accept it.
type schema struct {
	compiled *jsonschema.Schema
	open     bool
}

// schema compiles raw once under key.
func (r *revision) schema(key string, raw func() (json.RawMessage, error)) (*schema, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.schemas[key]; ok {
		return s, nil
	}
	doc, err := raw()
	if err != nil {
		return nil, err
	}
	compiled, err := graph.CompileSchema(doc)
	if err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(doc)
	s := &schema{compiled: compiled, open: bytes.Equal(trimmed, []byte(`{}`)) || bytes.Equal(trimmed, []byte(`true`))}
	r.schemas[key] = s
	return s, nil
}

// validatorSchema returns a validator node's pinned schema, compiled.
func (r *revision) validatorSchema(n graph.Node) (*schema, error) {
	s, err := r.schema("node:"+n.ID, func() (json.RawMessage, error) {
		return r.compiled.Document.ValidatorSchema(n)
	})
	if err != nil {
		return nil, permanent(execution.ErrSchemaViolation, err, "validator %q schema: %v", n.ID, err)
	}
	return s, nil
}

// actionSchemas returns the pinned contract's compiled input and output schemas.
func (r *revision) actionSchemas(a graph.PinnedAction) (in, out *schema, err error) {
	ref := graph.ActionRef{ID: a.ID, Version: a.Version}.String()
	in, err = r.schema("in:"+ref, func() (json.RawMessage, error) { return a.InputSchema, nil })
	if err == nil {
		out, err = r.schema("out:"+ref, func() (json.RawMessage, error) { return a.OutputSchema, nil })
	}
	if err != nil {
		return nil, nil, permanent(execution.ErrActionUnavailable, err, "action %s schemas: %v", ref, err)
	}
	return in, out, nil
}
