package raftstore

import (
	"math/bits"
	"slices"
)

// hashTrie is the persistent index of keys by the SHA-256 of their
// secret: what the data plane reads on every request. The hashes are
// uniformly random, so a trie indexed by their 4-bit digits needs no
// balancing or comparisons: a lookup follows about log16(n) pointers (5 at
// a million keys), and a write copies the nodes on its path and shares the
// rest with the previous State. A node holds only its occupied slots (a
// bitmap says which), so that the trie costs about 40 bytes a key at a
// million keys rather than the ~110 of sixteen slots a node.
type hashTrie struct {
	root *htNode
	n    int
}

// htNode has 16 slots, each empty, a key or a deeper node; slots holds the
// occupied ones, in digit order, and bit i of used says whether slot i is.
// owner marks the nodes a transaction created, which it may change in
// place; published nodes are never changed.
type htNode struct {
	owner *htOwner
	slots []htSlot
	used  uint16
}

// htSlot is a key or a deeper node.
type htSlot struct {
	key *Key
	sub *htNode
}

// htOwner identifies a transaction's nodes (not zero-sized, so that every
// one has its own address).
type htOwner struct{ _ byte }

// digit returns the d-th 4-bit digit of a 32-byte hash.
func digit(h string, d int) int {
	b := h[d/2]
	if d%2 == 0 {
		return int(b >> 4)
	}
	return int(b & 0x0f)
}

// slot returns the index in n.slots of slot i and whether it is occupied.
func (n *htNode) slot(i int) (int, bool) {
	bit := uint16(1) << i
	return bits.OnesCount16(n.used & (bit - 1)), n.used&bit != 0
}

// Len returns the number of keys.
func (t hashTrie) Len() int { return t.n }

func (t hashTrie) get(h [32]byte) *Key {
	n := t.root
	for d := 0; n != nil && d < 64; d++ {
		i := int(h[d/2] >> 4) // digit(h, d), on the array: no string made
		if d%2 == 1 {
			i = int(h[d/2] & 0x0f)
		}
		j, ok := n.slot(i)
		if !ok {
			return nil
		}
		if k := n.slots[j].key; k != nil {
			if k.hash == string(h[:]) {
				return k
			}
			return nil
		}
		n = n.slots[j].sub
	}
	return nil
}

// ascend calls fn for every key, in hash order, until it returns false.
func (t hashTrie) ascend(fn func(*Key) bool) { ascendNode(t.root, fn) }

func ascendNode(n *htNode, fn func(*Key) bool) bool {
	if n == nil {
		return true
	}
	for _, s := range n.slots {
		if s.key != nil && !fn(s.key) {
			return false
		}
		if !ascendNode(s.sub, fn) {
			return false
		}
	}
	return true
}

// htTxn is a batch of writes producing a new trie.
type htTxn struct {
	t     hashTrie
	owner *htOwner
}

func (t hashTrie) txn() *htTxn { return &htTxn{t: t, owner: new(htOwner)} }

// commit returns the new trie; later writes through x copy its nodes.
func (x *htTxn) commit() hashTrie {
	x.owner = new(htOwner)
	return x.t
}

func (x *htTxn) get(h [32]byte) *Key { return x.t.get(h) }

// writable returns n itself if this transaction made it, else a copy with
// room for one more slot.
func (x *htTxn) writable(n *htNode) *htNode {
	if n == nil {
		return &htNode{owner: x.owner}
	}
	if n.owner == x.owner {
		return n
	}
	return &htNode{owner: x.owner, used: n.used, slots: append(make([]htSlot, 0, len(n.slots)+1), n.slots...)}
}

// put stores k (whose hash is set), replacing the key with the same hash.
func (x *htTxn) put(k *Key) {
	var added bool
	x.t.root, added = x.putAt(x.t.root, 0, k)
	if added {
		x.t.n++
	}
}

func (x *htTxn) putAt(n *htNode, d int, k *Key) (*htNode, bool) {
	c := x.writable(n)
	i := digit(k.hash, d)
	j, ok := c.slot(i)
	if !ok {
		c.slots = slices.Insert(c.slots, j, htSlot{key: k})
		c.used |= 1 << i
		return c, true
	}
	var added bool
	switch s := &c.slots[j]; {
	case s.key != nil && s.key.hash == k.hash:
		s.key = k
	case s.key != nil: // push the resident one level down, beside k
		s.sub, s.key, added = x.pair(s.key, k, d+1), nil, true
	default:
		s.sub, added = x.putAt(s.sub, d+1, k)
	}
	return c, added
}

// pair returns a node at depth d holding a and b (whose hashes differ
// but agree on the digits before d), and the nodes between where their
// digits still agree: each with its slots in one allocation.
func (x *htTxn) pair(a, b *Key, d int) *htNode {
	ia, ib := digit(a.hash, d), digit(b.hash, d)
	if ia == ib {
		return &htNode{owner: x.owner, used: 1 << ia, slots: []htSlot{{sub: x.pair(a, b, d+1)}}}
	}
	if ia > ib {
		a, b, ia, ib = b, a, ib, ia
	}
	return &htNode{owner: x.owner, used: 1<<ia | 1<<ib, slots: []htSlot{{key: a}, {key: b}}}
}

// delete removes the key with hash h, if any.
func (x *htTxn) delete(h [32]byte) {
	if x.get(h) == nil {
		return
	}
	x.t.root = x.deleteAt(x.t.root, 0, string(h[:]))
	x.t.n--
}

// deleteAt removes h below n (where it is known to be) and returns the
// new node, nil when it is left empty.
func (x *htTxn) deleteAt(n *htNode, d int, h string) *htNode {
	c := x.writable(n)
	i := digit(h, d)
	j, _ := c.slot(i)
	if c.slots[j].key == nil {
		c.slots[j].sub = x.deleteAt(c.slots[j].sub, d+1, h)
	}
	if c.slots[j].key != nil || c.slots[j].sub == nil {
		c.slots = slices.Delete(c.slots, j, j+1)
		c.used &^= 1 << i
	}
	if c.used == 0 {
		return nil
	}
	return c
}

// putAll stores keys (whose hashes are set) as put would one by one; into
// an empty trie it builds the nodes at once from the keys partitioned by
// digit, each node's slots in one allocation of the size it needs, instead
// of growing them a key at a time.
func (x *htTxn) putAll(keys []*Key) {
	if x.t.root != nil || len(keys) == 0 {
		for _, k := range keys {
			x.put(k)
		}
		return
	}
	scratch := make([]*Key, len(keys))
	var n int
	x.t.root, n = x.build(slices.Clone(keys), scratch, 0)
	x.t.n = n
}

// build returns the node at depth d holding keys (which agree on the
// digits before d, and not all of one hash) and how many keys it holds. It
// reorders keys, a stable partition by the digit at d through scratch, so
// that of keys with one hash the last one stays, as with put.
func (x *htTxn) build(keys, scratch []*Key, d int) (*htNode, int) {
	var count [16]int
	for _, k := range keys {
		count[digit(k.hash, d)]++
	}
	var start [17]int
	c := &htNode{owner: x.owner}
	for i, m := range count {
		start[i+1] = start[i] + m
		if m > 0 {
			c.used |= 1 << i
		}
	}
	pos := start
	for _, k := range keys {
		i := digit(k.hash, d)
		scratch[pos[i]] = k
		pos[i]++
	}
	copy(keys, scratch)
	c.slots = make([]htSlot, 0, bits.OnesCount16(c.used))
	total := 0
	for i := range 16 {
		part := keys[start[i]:start[i+1]]
		switch {
		case len(part) == 0:
			continue
		case len(part) == 1 || sameHash(part):
			c.slots = append(c.slots, htSlot{key: part[len(part)-1]})
			total++
		default:
			sub, n := x.build(part, scratch[start[i]:start[i+1]], d+1)
			c.slots = append(c.slots, htSlot{sub: sub})
			total += n
		}
	}
	return c, total
}

// sameHash reports whether every key of keys has the first one's hash.
func sameHash(keys []*Key) bool {
	for _, k := range keys[1:] {
		if k.hash != keys[0].hash {
			return false
		}
	}
	return true
}
