package renderer

import (
	"container/list"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// resultCache is a small least-recently-used cache of rendered objects. The
// key covers everything a render depends on (chart digest, values,
// capabilities), so an entry never goes stale; it only ages out.
type resultCache struct {
	mu      sync.Mutex
	max     int
	order   *list.List // front: most recently used key
	entries map[string]*list.Element
}

type cacheEntry struct {
	key  string
	objs []*unstructured.Unstructured
}

func newResultCache(max int) *resultCache {
	return &resultCache{max: max, order: list.New(), entries: map[string]*list.Element{}}
}

// get returns the cached objects; callers must copy them before changing them.
func (c *resultCache) get(key string) ([]*unstructured.Unstructured, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).objs, true
}

func (c *resultCache) put(key string, objs []*unstructured.Unstructured) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, objs: objs})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}

// len is the number of cached results, for tests.
func (c *resultCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
