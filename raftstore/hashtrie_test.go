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

// Keys whose hashes differ only in their last digit sit 64 levels deep;
// deleting them one by one empties each node on the way (the trie ends
// with no root), and every earlier version still finds what it held.
func TestHashTrieDeletesDeepestKeysDownToEmpty(t *testing.T) {
	var a, b, c [32]byte
	for i := range a {
		a[i], b[i], c[i] = 0xab, 0xab, 0xab
	}
	b[31], c[31] = 0xac, 0xba // b differs in the last digit, c in the one before
	ka, kb, kc := &Key{hash: string(a[:])}, &Key{hash: string(b[:])}, &Key{hash: string(c[:])}
	x := hashTrie{}.txn()
	x.put(ka)
	x.put(kb)
	x.put(kc)
	full := x.commit()
	x = full.txn()
	x.delete(b)
	noB := x.commit()
	x = noB.txn()
	x.delete(a)
	x.delete(c)
	x.delete(c) // not there any more: nothing changes
	empty := x.commit()
	checkTrie(t, 0, full, map[[32]byte]*Key{a: ka, b: kb, c: kc}, [][32]byte{a, b, c})
	checkTrie(t, 1, noB, map[[32]byte]*Key{a: ka, c: kc}, [][32]byte{a, b, c})
	checkTrie(t, 2, empty, map[[32]byte]*Key{}, [][32]byte{a, b, c})
	if empty.root != nil {
		t.Fatal("an empty trie keeps nodes")
	}
	x = empty.txn()
	x.put(kb)
	checkTrie(t, 3, x.commit(), map[[32]byte]*Key{b: kb}, [][32]byte{a, b, c})
}
