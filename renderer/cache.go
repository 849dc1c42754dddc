package renderer

import (
	"bytes"
	"compress/flate"
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// resultCache is a least-recently-used cache of rendered objects. The key
// covers everything a render depends on (chart digest, values,
// capabilities), so an entry never goes stale; it only ages out.
//
// An entry holds the objects as compressed JSON, about 2 KB for a
// cluster's eight objects, and every hit decodes a fresh copy: the cache
// can then hold a render of every cluster of a large fleet, so a routine
// reconcile does not run the template engine. As decoded maps a render
// took about 60 KB, and 256 of them were a quarter of the manager's heap
// at 1,000 clusters (docs/scale.md).
type resultCache struct {
	mu      sync.Mutex
	max     int
	order   *list.List // front: most recently used key
	entries map[[sha256.Size]byte]*list.Element
}

type cacheEntry struct {
	key    [sha256.Size]byte
	packed []byte
}

func newResultCache(max int) *resultCache {
	return &resultCache{max: max, order: list.New(), entries: map[[sha256.Size]byte]*list.Element{}}
}

// get returns a fresh copy of the cached objects.
func (c *resultCache) get(key string) ([]*unstructured.Unstructured, bool) {
	k := sha256.Sum256([]byte(key))
	c.mu.Lock()
	e, ok := c.entries[k]
	var packed []byte
	if ok {
		c.order.MoveToFront(e)
		packed = e.Value.(*cacheEntry).packed
	}
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	objs, err := unpack(packed)
	if err != nil {
		// Never expected: the bytes are our own encoding. Render again.
		return nil, false
	}
	return objs, true
}

// put keeps a copy of objs; the caller may change objs afterwards.
func (c *resultCache) put(key string, objs []*unstructured.Unstructured) {
	packed, err := pack(objs)
	if err != nil {
		return
	}
	k := sha256.Sum256([]byte(key))
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[k]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.entries[k] = c.order.PushFront(&cacheEntry{key: k, packed: packed})
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

// pack encodes objects as a JSON array, compressed.
func pack(objs []*unstructured.Unstructured) ([]byte, error) {
	data, err := json.Marshal(objs)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// unpack decodes what pack encoded. Unstructured's own decoder keeps
// integers as int64, as a fresh render has them.
func unpack(packed []byte) ([]*unstructured.Unstructured, error) {
	data, err := io.ReadAll(flate.NewReader(bytes.NewReader(packed)))
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, len(raws))
	for i, raw := range raws {
		objs[i] = &unstructured.Unstructured{}
		if err := objs[i].UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("cached object %d: %w", i, err)
		}
	}
	return objs, nil
}
