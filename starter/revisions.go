package starter

import (
	"context"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// pinnedCacheSize bounds the compiled revisions an enqueue path keeps in
// memory with their compiled input schemas.
const pinnedCacheSize = 256

// pinned is a compiled revision with what every enqueue of it needs:
// compiled revisions are immutable (content-addressed by tenant and
// checksum), so they are read, decoded and their input schema compiled
// once per process instead of on every enqueue.
type pinned struct {
	compiled *graph.Compiled
	// input is the input node's id, its out schema's name and that schema.
	inputNode, inputName string
	input                *jsonschema.Schema
}

type pinnedKey struct{ tenant, checksum string }

func newPinnedCache() *lru.Cache[pinnedKey, *pinned] {
	c, _ := lru.New[pinnedKey, *pinned](pinnedCacheSize) // fails only for a size below 1
	return c
}

// pinnedRevision returns the compiled revision (tenant, checksum) from the
// cache or the store.
func (s *Starter) pinnedRevision(ctx context.Context, tenant, checksum string) (*pinned, error) {
	key := pinnedKey{tenant, checksum}
	if p, ok := s.pinned.Get(key); ok {
		return p, nil
	}
	c, err := s.store.GetCompiled(ctx, tenant, checksum)
	if err != nil {
		return nil, fmt.Errorf("starter: load compiled revision %s: %w", checksum, err)
	}
	p, err := pin(c)
	if err != nil {
		return nil, err
	}
	s.pinned.Add(key, p)
	return p, nil
}

// pin compiles c's input schema.
func pin(c *graph.Compiled) (*pinned, error) {
	node, ok := c.Document.InputNode()
	if !ok {
		return nil, failure.New(failure.CodeInternal, "revision %s has no input node", c.Checksum)
	}
	name := node.Outputs["out"]
	raw, ok := c.Document.SchemaByName(name)
	if !ok {
		return nil, failure.New(failure.CodeInternal, "revision %s: input schema %q is missing", c.Checksum, name)
	}
	schema, err := graph.CompileSchema(raw)
	if err != nil {
		return nil, failure.Wrap(err, failure.CodeInternal, "revision %s: input schema does not compile", c.Checksum)
	}
	return &pinned{compiled: c, inputNode: node.ID, inputName: name, input: schema}, nil
}
