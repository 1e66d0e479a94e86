package raftstore

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestHashTrieMatchesAMap applies random puts, replacements and deletes
// (with hashes that share long prefixes, so that slots split deep) to the
// trie and to a map: they always agree, and every earlier version of the
// trie still holds exactly what it held.
func TestHashTrieMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	hash := func() [32]byte {
		var h [32]byte
		h[0] = byte(rng.IntN(3)) // few first bytes: deep shared prefixes
		h[1] = byte(rng.IntN(2))
		for i := 2; i < 32; i++ {
			h[i] = byte(rng.IntN(256))
		}
		if rng.IntN(4) == 0 {
			copy(h[2:20], make([]byte, 18)) // longer still
		}
		return h
	}
	type version struct {
		trie  hashTrie
		model map[[32]byte]*Key
	}
	var versions []version
	cur, model := hashTrie{}, map[[32]byte]*Key{}
	var known [][32]byte
	for round := range 200 {
		x := cur.txn()
		for range rng.IntN(20) + 1 {
			switch op := rng.IntN(10); {
			case op < 6 || len(known) == 0:
				h := hash()
				k := &Key{hash: string(h[:]), ID: "new"}
				known = append(known, h)
				x.put(k)
				model[h] = k
			case op < 8:
				h := known[rng.IntN(len(known))]
				k := &Key{hash: string(h[:]), ID: "replaced"}
				x.put(k)
				model[h] = k
			default:
				h := known[rng.IntN(len(known))]
				x.delete(h)
				delete(model, h)
			}
		}
		cur = x.commit()
		snapshot := make(map[[32]byte]*Key, len(model))
		for h, k := range model {
			snapshot[h] = k
		}
		versions = append(versions, version{cur, snapshot})
		if round%20 == 0 || round == 199 {
			for i, v := range versions {
				checkTrie(t, i, v.trie, v.model, known)
			}
		}
	}
}

func checkTrie(t *testing.T, version int, tr hashTrie, model map[[32]byte]*Key, probes [][32]byte) {
	t.Helper()
	if tr.Len() != len(model) {
		t.Fatalf("version %d: Len %d, want %d", version, tr.Len(), len(model))
	}
	for _, h := range probes {
		if got := tr.get(h); got != model[h] {
			t.Fatalf("version %d: get(%x) = %v, want %v", version, h[:4], got, model[h])
		}
	}
	n := 0
	tr.ascend(func(k *Key) bool {
		if model[[32]byte([]byte(k.hash))] != k {
			t.Fatalf("version %d: ascend yields %x not in the model", version, k.hash[:4])
		}
		n++
		return true
	})
	if n != len(model) {
		t.Fatalf("version %d: ascend yields %d, want %d", version, n, len(model))
	}
}

// After inserts and deletes every node holds exactly its occupied slots,
// each a key or a deeper node, and no node is left empty.
func TestHashTrieNodesHoldOnlyOccupiedSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var hashes [][32]byte
	x := hashTrie{}.txn()
	for range 5000 {
		var h [32]byte
		for i := range h {
			h[i] = byte(rng.IntN(256))
		}
		hashes = append(hashes, h)
		x.put(&Key{hash: string(h[:])})
	}
	tr := x.commit()
	x = tr.txn()
	for _, h := range hashes[:2500] {
		x.delete(h)
	}
	for _, tr := range []hashTrie{tr, x.commit()} {
		var walk func(n *htNode)
		walk = func(n *htNode) {
			if len(n.slots) == 0 || len(n.slots) != bits.OnesCount16(n.used) {
				t.Fatalf("node of %d slots, used %016b", len(n.slots), n.used)
			}
			for _, s := range n.slots {
				if (s.key == nil) == (s.sub == nil) {
					t.Fatal("a slot is empty or holds both a key and a node")
				}
				if s.sub != nil {
					walk(s.sub)
				}
			}
		}
		walk(tr.root)
	}
}
