package graph

import "sync"

// boundedCache maps a text (an expression, a schema) to a short outcome
// message. It is bounded in entries and in key bytes and safe for concurrent
// use. Eviction is by generations: entries go into the current map; when it
// holds half the budget it becomes the old map (the previous old map is
// dropped) and a new current map starts; a hit in the old map is copied into
// the current one. Recently used entries so survive, every operation is O(1),
// and at most the whole budget is held. A nil *boundedCache caches nothing.
type boundedCache struct {
	mu sync.Mutex
	// Per generation: half of the configured bounds.
	maxEntries, maxBytes int
	cur, old             map[string]string
	curBytes             int
}

func newBoundedCache(entries, bytes int) *boundedCache {
	return &boundedCache{
		maxEntries: max(entries/2, 1),
		maxBytes:   max(bytes/2, 1),
		cur:        map[string]string{},
	}
}

func (c *boundedCache) get(key string) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.cur[key]; ok {
		return v, true
	}
	if v, ok := c.old[key]; ok {
		c.putLocked(key, v)
		return v, true
	}
	return "", false
}

func (c *boundedCache) put(key, value string) {
	if c == nil || len(key) > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[key]; ok {
		return
	}
	c.putLocked(key, value)
}

func (c *boundedCache) putLocked(key, value string) {
	if len(c.cur) >= c.maxEntries || c.curBytes+len(key) > c.maxBytes {
		c.old, c.cur, c.curBytes = c.cur, make(map[string]string, len(c.cur)), 0
	}
	c.cur[key] = value
	c.curBytes += len(key)
}

// len reports the entries held (both generations; a promoted entry counts
// twice until the old generation is dropped). For tests.
func (c *boundedCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}
