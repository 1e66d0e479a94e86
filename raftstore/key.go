package raftstore

import (
	"fmt"
	"strings"
	"time"
	"unsafe"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Key is a stored virtual key: one heap object per key, held by every key
// index. It keeps the key's encoded StoredKey (what snapshots write and
// admin reads decode) and, precomputed from it, what an auth check needs.
// A million keys are held, so the strings alias the encoded bytes rather
// than being copies, a key's budget and rate limits live in the same
// allocation (Budget and Limits point into it), and the fields are ordered
// so that a key without limits fits a 160-byte size class. Nothing in a
// Key is ever modified once it is stored: a write stores a new Key.
type Key struct {
	ID   string
	Name string
	// TeamID is the key's team, empty for none.
	TeamID string
	// ExpiresAt is the expiry in Unix nanoseconds; zero means never.
	ExpiresAt int64
	// Budget is the key's own budget, nil for none.
	Budget *Limit
	// Limits are the key's own rate limits, nil for none.
	Limits *RateLimits
	// created is the creation time in Unix nanoseconds (the order of
	// Keys).
	created int64
	// hash is the SHA-256 of the secret (32 bytes, within enc).
	hash string
	// enc is the deterministic encoding of the pb.StoredKey. It is a
	// string over bytes that nothing writes after the Key is made (see
	// keyFromEncoding), so the other strings may alias it.
	enc string
	// lists holds the names the key allows, exact names before nExact and
	// patterns from it up to nModels (few, so a scan beats a map and
	// costs far less memory), then the MCP tools it allows.
	lists           []string
	nModels, nExact int32
	Revoked         bool
	allowAll        bool
}

// keyWithLimits is the allocation of a key that has a budget or rate
// limits: Key.Budget and Key.Limits point into it.
type keyWithLimits struct {
	Key
	budget Limit
	limits RateLimits
}

// Allows reports whether the key may use the model route named model.
func (k *Key) Allows(model string) bool {
	if k.allowAll {
		return true
	}
	for _, m := range k.lists[:k.nExact] {
		if m == model {
			return true
		}
	}
	for _, p := range k.lists[k.nExact:k.nModels] {
		if MatchPattern(p, model) {
			return true
		}
	}
	return false
}

// Expired reports whether the key has expired at nowUnixNano.
func (k *Key) Expired(nowUnixNano int64) bool {
	return k.ExpiresAt != 0 && nowUnixNano >= k.ExpiresAt
}

// mcpTools returns the key's own MCP tool allow-list. It must not be
// modified.
func (k *Key) mcpTools() []string { return k.lists[k.nModels:] }

// Stored decodes the stored key: a new message on every call, which the
// caller may keep and modify (admin reads and commands, not the data
// plane).
func (k *Key) Stored() *pb.StoredKey {
	sk := &pb.StoredKey{}
	if err := proto.Unmarshal(unsafe.Slice(unsafe.StringData(k.enc), len(k.enc)), sk); err != nil {
		// Not reached: keyFromEncoding refuses every encoding that
		// proto.Unmarshal refuses (FuzzScanStoredKey checks it).
		return &pb.StoredKey{Key: &pb.Key{Id: k.ID, Name: k.Name, TeamId: k.TeamID}, SecretHash: []byte(k.hash)}
	}
	return sk
}

// newKey encodes sk and makes its Key.
func newKey(sk *pb.StoredKey) (*Key, error) {
	enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(sk)
	if err != nil {
		return nil, fmt.Errorf("key %q: encode: %w", sk.GetKey().GetId(), err)
	}
	return keyFromEncoding(enc)
}

// keyFromEncoding makes the Key of an encoded pb.StoredKey without
// decoding it whole. It takes enc over: the caller must not write to it
// again (the Key's strings alias it).
func keyFromEncoding(enc []byte) (*Key, error) {
	s := unsafe.String(unsafe.SliceData(enc), len(enc))
	var f keyFields
	if err := scanStoredKey(s, &f); err != nil {
		return nil, fmt.Errorf("decode key: %w", err)
	}
	if len(f.hash) != 32 {
		return nil, fmt.Errorf("key %q: hash has %d bytes, want 32: %w", f.id, len(f.hash), ErrInvalid)
	}
	return f.key(s), nil
}

// key builds the Key of the fields scanned from enc.
func (f *keyFields) key(enc string) *Key {
	var k *Key
	lim := f.hasLimits && (f.rpm != 0 || f.tpm != 0 || f.maxParallel != 0)
	if f.hasBudget || lim {
		kl := &keyWithLimits{}
		k = &kl.Key
		bucket := KeyBudgetID(f.id) // one string for both
		if f.hasBudget {
			kl.budget = Limit{ID: bucket, LimitNanos: f.budgetNanos, Period: f.period, AllowUnpriced: f.allowUnpriced}
			k.Budget = &kl.budget
		}
		if lim {
			kl.limits = RateLimits{Bucket: bucket, RPM: f.rpm, TPM: f.tpm, MaxParallel: f.maxParallel}
			k.Limits = &kl.limits
		}
	} else {
		k = &Key{}
	}
	k.ID, k.Name, k.TeamID, k.Revoked = f.id, f.name, f.teamID, f.revoked
	k.created, k.hash, k.enc = f.createdSeconds*1e9+int64(f.createdNanos), f.hash, enc
	if f.hasExpiry {
		k.ExpiresAt = time.Unix(f.expSeconds, int64(f.expNanos)).UnixNano()
	}
	k.setLists(f.models, f.mcpTools)
	return k
}

// setLists stores the allowed models, exact names first, then the MCP
// tools, in one slice.
func (k *Key) setLists(models, tools []string) {
	k.allowAll = len(models) == 0
	if len(models)+len(tools) == 0 {
		return
	}
	isPattern := func(m string) bool { return strings.IndexByte(m, '*') >= 0 }
	k.lists = make([]string, 0, len(models)+len(tools))
	for _, m := range models {
		if !isPattern(m) {
			k.lists = append(k.lists, m)
		}
	}
	k.nExact = int32(len(k.lists))
	for _, m := range models {
		if isPattern(m) {
			k.allowAll = k.allowAll || m == "*"
			k.lists = append(k.lists, m)
		}
	}
	k.nModels = int32(len(k.lists))
	k.lists = append(k.lists, tools...)
}

// --- orders of the key indexes -------------------------------------------------

// keyIDLess orders keys by id.
func keyIDLess(a, b *Key) bool { return a.ID < b.ID }

// createdLess orders keys by creation time, then id (the order of Keys).
func createdLess(a, b *Key) bool {
	if a.created != b.created {
		return a.created < b.created
	}
	return a.ID < b.ID
}

// teamKeyLess orders keys by team, then id.
func teamKeyLess(a, b *Key) bool {
	if a.TeamID != b.TeamID {
		return a.TeamID < b.TeamID
	}
	return a.ID < b.ID
}
