package raftstore

// hashTrie is the persistent index of key views by the SHA-256 of their
// secret: what the data plane reads on every request. The hashes are
// uniformly random, so a trie indexed by their 4-bit digits needs no
// balancing or comparisons: a lookup follows about log16(n) pointers (5 at
// a million keys), and a write copies the nodes on its path (about 1.3 KB
// at a million keys) and shares the rest with the previous State.
type hashTrie struct {
	root *htNode
	n    int
}

// htNode has 16 slots, each empty, a key view or a deeper node. owner marks
// the nodes a transaction created, which it may change in place; published
// nodes are never changed.
type htNode struct {
	sub   [16]*htNode
	leaf  [16]*Key
	owner *htOwner
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

// Len returns the number of key views.
func (t hashTrie) Len() int { return t.n }

func (t hashTrie) get(h [32]byte) *Key {
	n := t.root
	for d := 0; n != nil && d < 64; d++ {
		i := int(h[d/2] >> 4) // digit(h, d), on the array: no string made
		if d%2 == 1 {
			i = int(h[d/2] & 0x0f)
		}
		if k := n.leaf[i]; k != nil {
			if k.hash == string(h[:]) {
				return k
			}
			return nil
		}
		n = n.sub[i]
	}
	return nil
}

// ascend calls fn for every key view, in hash order, until it returns
// false.
func (t hashTrie) ascend(fn func(*Key) bool) { ascendNode(t.root, fn) }

func ascendNode(n *htNode, fn func(*Key) bool) bool {
	if n == nil {
		return true
	}
	for i := range n.leaf {
		if k := n.leaf[i]; k != nil && !fn(k) {
			return false
		}
		if !ascendNode(n.sub[i], fn) {
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

// writable returns n itself if this transaction made it, else a copy.
func (x *htTxn) writable(n *htNode) *htNode {
	if n == nil {
		return &htNode{owner: x.owner}
	}
	if n.owner == x.owner {
		return n
	}
	c := *n
	c.owner = x.owner
	return &c
}

// put stores k (whose hash is set), replacing the view with the same hash.
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
	switch old := c.leaf[i]; {
	case old != nil && old.hash == k.hash:
		c.leaf[i] = k
		return c, false
	case old != nil: // push the resident one level down, then descend
		c.leaf[i] = nil
		sub := &htNode{owner: x.owner}
		sub.leaf[digit(old.hash, d+1)] = old
		var added bool
		c.sub[i], added = x.putAt(sub, d+1, k)
		return c, added
	case c.sub[i] != nil:
		var added bool
		c.sub[i], added = x.putAt(c.sub[i], d+1, k)
		return c, added
	}
	c.leaf[i] = k
	return c, true
}

// delete removes the view with hash h, if any.
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
	if c.leaf[i] != nil {
		c.leaf[i] = nil
	} else {
		c.sub[i] = x.deleteAt(c.sub[i], d+1, h)
	}
	for j := range c.leaf {
		if c.leaf[j] != nil || c.sub[j] != nil {
			return c
		}
	}
	return nil
}
