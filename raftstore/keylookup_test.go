package raftstore

import (
	"fmt"
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// The data plane's auth check (KeyByHash, then Allows, Expired, Budget
// and Limits of the key) allocates nothing, for keys with and without
// limits and for a miss.
func TestKeyLookupDoesNotAllocate(t *testing.T) {
	h := newHarness(t)
	withLimits := createKeyCmd("k1", "s1", "gpt-4o", "claude-*")
	withLimits.GetCreateKey().Key.Key.Budget = &pb.Budget{LimitNanos: 5e9, Period: PeriodMonth}
	withLimits.GetCreateKey().Key.Key.Limits = &pb.RateLimits{Rpm: 10}
	h.must(withLimits, createKeyCmd("k2", "s2"))
	for i := range 300 { // a trie several levels deep
		h.must(createKeyCmd(fmt.Sprint("f", i), fmt.Sprint("secret-", i)))
	}
	st := h.state()
	hits := [][32]byte{HashSecret("s1"), HashSecret("s2")}
	miss := HashSecret("nope")
	var sink int64
	allocs := testing.AllocsPerRun(200, func() {
		for _, hs := range hits {
			k := st.KeyByHash(hs)
			if k.Allows("claude-3") && !k.Expired(1) && k.Budget != nil {
				sink += k.Budget.LimitNanos + k.Limits.RPM
			}
		}
		if st.KeyByHash(miss) != nil {
			sink++
		}
	})
	if allocs != 0 {
		t.Fatalf("lookup allocates %.1f times per run", allocs)
	}
	if sink == 0 {
		t.Fatal("the key with limits was not found")
	}
}
