package auth

import (
	"testing"
	"time"
)

// TestCacheForgetsAtTheTTL checks expiry, the no-cache TTL and the bound.
func TestCacheForgetsAtTheTTL(t *testing.T) {
	now := time.Unix(0, 0)
	c := newTTLCache[bool](func() time.Time { return now })
	c.put("a", true, time.Second)
	c.put("never", true, 0)
	if v, ok := c.get("a"); !ok || !v {
		t.Fatal("a fresh entry was not found")
	}
	if _, ok := c.get("never"); ok {
		t.Fatal("an entry with a zero TTL was kept")
	}
	now = now.Add(time.Second)
	if _, ok := c.get("a"); ok {
		t.Fatal("an entry outlived its TTL")
	}
	for i := range maxEntries + 10 {
		c.put(string(rune(i)), true, time.Hour)
	}
	if len(c.m) > maxEntries {
		t.Fatalf("cache holds %d entries, bound %d", len(c.m), maxEntries)
	}
}
