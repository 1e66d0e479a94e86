package proxy

import (
	"testing"

	"github.com/tollgate/tollgate/routing"
)

// TestSeriesCacheIsBoundedAndStable: the same key finds the same entry;
// past maxCachedSeries keys the cache starts again instead of growing.
func TestSeriesCacheIsBoundedAndStable(t *testing.T) {
	var c seriesCache
	k := seriesKey{routing.EndpointChat, "m", "d", 200}
	first := c.get(k)
	if c.get(k) != first {
		t.Fatal("the same key found another entry")
	}
	for i := range maxCachedSeries + 10 {
		c.get(seriesKey{routing.EndpointChat, "m", "d", 1000 + i})
	}
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	if n > maxCachedSeries || c.n.Load() > maxCachedSeries {
		t.Fatalf("cache holds %d entries (counted %d), bound %d", n, c.n.Load(), maxCachedSeries)
	}
}
