package lru

import (
	"fmt"
	"sync"
	"testing"
)

func TestCache_EvictsLeastRecentlyUsed(t *testing.T) {
	c := New[string, int](2)
	c.Add("a", 1)
	c.Add("b", 2)
	if _, ok := c.Get("a"); !ok { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.Add("c", 3)
	if _, ok := c.Get("b"); ok {
		t.Error("b survived: the least recently used entry must go")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	if c.Len() != 2 || c.Evicted() != 1 {
		t.Errorf("len %d, evicted %d; want 2, 1", c.Len(), c.Evicted())
	}
}

func TestCache_AddIfAbsentKeepsTheFirst(t *testing.T) {
	c := New[string, int](4)
	if got := c.AddIfAbsent("k", 1); got != 1 {
		t.Fatalf("first AddIfAbsent = %d", got)
	}
	if got := c.AddIfAbsent("k", 2); got != 1 {
		t.Fatalf("second AddIfAbsent = %d, want the first value", got)
	}
}

func TestCache_UpdateRemoveAndBoundUnderConcurrency(t *testing.T) {
	c := New[string, int](16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				k := fmt.Sprint(g, "-", i)
				c.Add(k, i)
				c.Get(k)
				if i%7 == 0 {
					c.Remove(k)
				}
			}
		}()
	}
	wg.Wait()
	if c.Len() > 16 {
		t.Fatalf("len %d above the bound 16", c.Len())
	}
	c.Update(func(_ string, v int) int { return -1 })
	c.Add("x", 5)
	c.Update(func(k string, v int) int {
		if k == "x" && v != 5 {
			t.Errorf("x = %d", v)
		}
		return v
	})
}
