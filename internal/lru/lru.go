package lru

import (
	"container/list"
	"sync"
)

// Cache holds at most Max entries; adding one more evicts the least recently used.
type Cache[K comparable, V any] struct {
	mu      sync.Mutex
	max     int
	order   *list.List // front: most recently used; elements are *entry[K, V]
	entries map[K]*list.Element
	evicted uint64
}

type entry[K comparable, V any] struct {
	key K
	val V
}

// New returns a cache of at most max entries (max < 1 is 1).
func New[K comparable, V any](max int) *Cache[K, V] {
	if max < 1 {
		max = 1
	}
	return &Cache[K, V]{max: max, order: list.New(), entries: map[K]*list.Element{}}
}

// Get returns the value of k and marks it most recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K, V]).val, true
}

// Add sets k to v (most recently used), evicting the least recently used entry when
// the cache is full.
func (c *Cache[K, V]) Add(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(k, v)
}

func (c *Cache[K, V]) add(k K, v V) {
	if el, ok := c.entries[k]; ok {
		el.Value.(*entry[K, V]).val = v
		c.order.MoveToFront(el)
		return
	}
	c.entries[k] = c.order.PushFront(&entry[K, V]{key: k, val: v})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*entry[K, V]).key)
		c.evicted++
	}
}

// AddIfAbsent sets k to v unless k is present, and returns the value k now has.
// Two goroutines that computed a value for the same key at once thus agree on one.
func (c *Cache[K, V]) AddIfAbsent(k K, v V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*entry[K, V]).val
	}
	c.add(k, v)
	return v
}

// Remove drops k.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok {
		c.order.Remove(el)
		delete(c.entries, k)
	}
}

// Update replaces, in one pass under the lock, the value of every entry with what fn
// returns for it, keeping the order of use. fn must not call the cache.
func (c *Cache[K, V]) Update(fn func(K, V) V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.order.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry[K, V])
		e.val = fn(e.key, e.val)
	}
}

// Len is the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Max is the bound.
func (c *Cache[K, V]) Max() int { return c.max }

// Evicted counts the entries evicted so far to stay within the bound.
func (c *Cache[K, V]) Evicted() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.evicted
}
