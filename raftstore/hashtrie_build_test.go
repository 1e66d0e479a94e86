package raftstore

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// sameTrieNodes reports whether a and b have the same shape and hold the
// same keys in the same slots.
func sameTrieNodes(a, b *htNode) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.used != b.used || len(a.slots) != len(b.slots) {
		return false
	}
	for i := range a.slots {
		if a.slots[i].key != b.slots[i].key || !sameTrieNodes(a.slots[i].sub, b.slots[i].sub) {
			return false
		}
	}
	return true
}

// trieKeys returns n keys whose hashes share long prefixes (so that the
// trie splits deep), some of them twice (a later key with a hash replaces
// the earlier one).
func trieKeys(rng *rand.Rand, n int) []*Key {
	keys := make([]*Key, 0, n)
	for i := range n {
		var h [32]byte
		h[0], h[1] = byte(rng.IntN(3)), byte(rng.IntN(2))
		for j := 2; j < 32; j++ {
			h[j] = byte(rng.IntN(256))
		}
		if rng.IntN(4) == 0 {
			copy(h[2:31], make([]byte, 29)) // differ in the last byte only
		}
		if i > 0 && rng.IntN(10) == 0 {
			h = [32]byte([]byte(keys[rng.IntN(i)].hash))
		}
		keys = append(keys, &Key{hash: string(h[:]), ID: string(rune('a' + i%26))})
	}
	return keys
}

// putAll into an empty trie builds exactly the trie that putting the keys
// one by one builds (the same nodes, the last key of a hash kept), and a
// later write to it copies its nodes rather than changing them.
func TestHashTriePutAllBuildsWhatPutsBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 17, 5000} {
		keys := trieKeys(rng, n)
		one := hashTrie{}.txn()
		for _, k := range keys {
			one.put(k)
		}
		want := one.commit()
		all := hashTrie{}.txn()
		all.putAll(keys)
		got := all.commit()
		if got.Len() != want.Len() || !sameTrieNodes(got.root, want.root) {
			t.Fatalf("%d keys: built trie of %d differs from the put one of %d", n, got.Len(), want.Len())
		}
		model := map[[32]byte]*Key{}
		var probes [][32]byte
		for _, k := range keys {
			h := [32]byte([]byte(k.hash))
			model[h] = k
			probes = append(probes, h)
		}
		later := got.txn()
		later.putAll(trieKeys(rng, 50)) // into a trie that holds keys: one by one
		for _, h := range probes[:len(probes)/2] {
			later.delete(h)
		}
		later.commit()
		checkTrie(t, n, got, model, probes)
	}
}

// A snapshot of several parts of keys restores to the same secret-hash
// index (every secret finds its key, in the same order), and a key created
// after the restore leaves the restored state as it was.
func TestRestoreOfManyKeysFindsEverySecret(t *testing.T) {
	src := bigState(3*snapshotChunk + 7)
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, src); err != nil {
		t.Fatal(err)
	}
	got := restored(t, buf.Bytes())
	var want, have []string
	src.keysByHash.ascend(func(k *Key) bool { want = append(want, k.ID); return true })
	got.keysByHash.ascend(func(k *Key) bool { have = append(have, k.ID); return true })
	if got.keysByHash.Len() != src.keysByHash.Len() || len(have) != len(want) {
		t.Fatalf("restored trie holds %d keys (%d by ascend), want %d", got.keysByHash.Len(), len(have), len(want))
	}
	for i := range want {
		if have[i] != want[i] {
			t.Fatalf("key %d in hash order = %q, want %q", i, have[i], want[i])
		}
	}
	src.keys.ascend(func(k *Key) bool {
		h := [32]byte([]byte(k.hash))
		if g := got.KeyByHash(h); g == nil || g.ID != k.ID {
			t.Fatalf("KeyByHash of %q = %v", k.ID, g)
		}
		return true
	})
	next, res := applyCommand(got, createKeyCmd("after", "secret-after"))
	if res.err != nil {
		t.Fatal(res.err)
	}
	if next.KeyByHash(HashSecret("secret-after")) == nil || got.KeyByHash(HashSecret("secret-after")) != nil {
		t.Fatal("a key created after the restore is missing, or changed the restored state")
	}
	if got.keysByHash.Len() != len(want) {
		t.Fatalf("restored trie grew to %d", got.keysByHash.Len())
	}
}
