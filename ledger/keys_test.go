package ledger

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestKeyRoundTrips(t *testing.T) {
	nanos, suffix := int64(1767225600123456789), uint64(42)
	if n, s, err := decodeRecordKey(appendRecordKey(nil, nanos, suffix)); err != nil || n != nanos || s != suffix {
		t.Errorf("record: %d %d %v", n, s, err)
	}
	for _, p := range []byte{prefixKeyIndex, prefixTeamIndex} {
		id, n, s, err := decodeIndexKey(appendIndexKey(nil, p, "key-1", nanos, suffix), p)
		if err != nil || string(id) != "key-1" || n != nanos || s != suffix {
			t.Errorf("index %c: %q %d %d %v", p, id, n, s, err)
		}
	}
	for _, c := range [][3]string{{"k", "t", "m"}, {"", "", ""}, {"k", "", "gpt-4o/2024"}} {
		h, k, tm, m, err := decodeRollupKey(appendRollupKey(nil, 7200, c[0], c[1], c[2]))
		if err != nil || h != 7200 || k != c[0] || tm != c[1] || m != c[2] {
			t.Errorf("rollup %q: %d %q %q %q %v", c, h, k, tm, m, err)
		}
	}
	if b, p, err := decodeBudgetKey(appendBudgetKey(nil, "team:x", 0)); err != nil || b != "team:x" || p != 0 {
		t.Errorf("budget: %q %d %v", b, p, err)
	}
	if s, err := decodeOutboxKey(appendOutboxKey(nil, 7)); err != nil || s != 7 {
		t.Errorf("outbox: %d %v", s, err)
	}
}

// TestKeyOrder: byte order is time order, across the 2^8, 2^32 boundaries
// where a little-endian or variable-length encoding would break it.
func TestKeyOrder(t *testing.T) {
	times := []int64{0, 1, 255, 256, 1 << 32, 1<<32 + 1, 1767225600000000000, math.MaxInt64}
	for i := 1; i < len(times); i++ {
		a, b := times[i-1], times[i]
		if bytes.Compare(appendRecordKey(nil, a, math.MaxUint64), appendRecordKey(nil, b, 0)) >= 0 {
			t.Errorf("record keys: %d not before %d", a, b)
		}
		if bytes.Compare(appendIndexKey(nil, prefixKeyIndex, "k", a, math.MaxUint64), appendIndexKey(nil, prefixKeyIndex, "k", b, 0)) >= 0 {
			t.Errorf("index keys: %d not before %d", a, b)
		}
		if bytes.Compare(appendOutboxKey(nil, uint64(a)), appendOutboxKey(nil, uint64(b))) >= 0 {
			t.Errorf("outbox keys: %d not before %d", a, b)
		}
	}
	// Every entry of id "k" sorts below the end bound, and "k" is not a
	// prefix match for "k2".
	end := indexIDEnd(prefixKeyIndex, []byte("k"))
	if bytes.Compare(appendIndexKey(nil, prefixKeyIndex, "k", math.MaxInt64, math.MaxUint64), end) >= 0 {
		t.Error("index entry above its id's end bound")
	}
	if bytes.Compare(appendIndexKey(nil, prefixKeyIndex, "k2", 0, 0), end) < 0 {
		t.Error("another id's entry inside k's bounds")
	}
}

func TestMalformedKeys(t *testing.T) {
	u64 := func(v uint64) []byte { return appendU64(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	neg := u64(1 << 63)
	hour := u64(3600)
	tests := []struct {
		name   string
		decode func([]byte) error
		key    []byte
	}{
		{"record: empty", recordErr, nil},
		{"record: wrong prefix", recordErr, cat([]byte("k"), u64(1), u64(1))},
		{"record: short", recordErr, cat([]byte("r"), u64(1))},
		{"record: long", recordErr, cat([]byte("r"), u64(1), u64(1), []byte{0})},
		{"record: negative time", recordErr, cat([]byte("r"), neg, u64(1))},

		{"index: wrong prefix", keyIndexErr, cat([]byte("t"), []byte("id\x00"), u64(1), u64(1))},
		{"index: empty id", keyIndexErr, cat([]byte("k\x00"), u64(1), u64(1))},
		{"index: no separator", keyIndexErr, cat([]byte("kid!"), u64(1), u64(1))},
		{"index: 0x00 inside id", keyIndexErr, cat([]byte("ki\x00d\x00"), u64(1), u64(1))},
		{"index: short", keyIndexErr, cat([]byte("kid\x00"), u64(1))},
		{"index: negative time", keyIndexErr, cat([]byte("kid\x00"), neg, u64(1))},

		{"rollup: wrong prefix", rollupErr, cat([]byte("b"), hour, []byte("k\x00t\x00m"))},
		{"rollup: short", rollupErr, cat([]byte("p"), u64(0)[:4])},
		{"rollup: one separator", rollupErr, cat([]byte("p"), hour, []byte("k\x00t"))},
		{"rollup: three separators", rollupErr, cat([]byte("p"), hour, []byte("k\x00t\x00m\x00x"))},
		{"rollup: off the hour", rollupErr, cat([]byte("p"), u64(3601), []byte("k\x00t\x00m"))},
		{"rollup: negative hour", rollupErr, cat([]byte("p"), neg, []byte("k\x00t\x00m"))},

		{"budget: wrong prefix", budgetErr, cat([]byte("pkey:k\x00"), u64(0))},
		{"budget: empty name", budgetErr, cat([]byte("b\x00"), u64(0))},
		{"budget: no separator", budgetErr, cat([]byte("bkey:k!"), u64(0))},
		{"budget: 0x00 inside name", budgetErr, cat([]byte("bke\x00y\x00"), u64(0))},
		{"budget: negative period", budgetErr, cat([]byte("bkey:k\x00"), neg)},

		{"outbox: seq 0", outboxErr, cat([]byte("o"), u64(0))},
		{"outbox: short", outboxErr, []byte("o\x00\x01")},
		{"outbox: wrong prefix", outboxErr, cat([]byte("m"), u64(1))},
	}
	for _, tt := range tests {
		err := tt.decode(tt.key)
		if !errors.Is(err, errMalformedKey) {
			t.Errorf("%s: %q: err %v, want errMalformedKey", tt.name, tt.key, err)
		}
	}
}

func recordErr(k []byte) error   { _, _, err := decodeRecordKey(k); return err }
func keyIndexErr(k []byte) error { _, _, _, err := decodeIndexKey(k, prefixKeyIndex); return err }
func rollupErr(k []byte) error   { _, _, _, _, err := decodeRollupKey(k); return err }
func budgetErr(k []byte) error   { _, _, err := decodeBudgetKey(k); return err }
func outboxErr(k []byte) error   { _, err := decodeOutboxKey(k); return err }
