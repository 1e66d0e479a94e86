package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// This file owns every key the ledger writes. A key is one prefix byte plus
// fixed-width big-endian integers (and, where a key holds names, names that
// never contain 0x00, ended by 0x00), so byte order is time order within a
// prefix. Decoders reject anything the encoders cannot produce.
//
//	r | unix_nanos u64 | suffix u64                      → SpendRecord
//	k | key_id 0x00 | unix_nanos u64 | suffix u64        → empty (index by key)
//	t | team_id 0x00 | unix_nanos u64 | suffix u64       → empty (index by team)
//	p | hour_unix u64 | key_id 0x00 team_id 0x00 model   → SpendRollup (pending)
//	b | budget 0x00 | period_start u64                   → BudgetUse (pending)
//	o | seq u64                                          → SpendReportCommand (outbox)
//	m | name                                             → meta value
//
// Times and periods are never negative (Append rejects them), so they are
// stored as plain unsigned integers; a set top bit marks a malformed key.
const (
	prefixRecord    byte = 'r'
	prefixKeyIndex  byte = 'k'
	prefixTeamIndex byte = 't'
	prefixRollup    byte = 'p'
	prefixBudget    byte = 'b'
	prefixOutbox    byte = 'o'
	prefixMeta      byte = 'm'
)

// Meta names.
const (
	metaLastSeq = "seq"     // last report seq cut (u64)
	metaSuffix  = "suffix"  // last record suffix used (u64)
	metaJournal = "journal" // seq of the last journal frame applied (u64)
)

const (
	recordKeyLen = 1 + 8 + 8
	outboxKeyLen = 1 + 8
	secondsHour  = 3600
)

var errMalformedKey = errors.New("ledger: malformed key")

func malformed(k []byte, why string) error {
	return fmt.Errorf("%w %q: %s", errMalformedKey, k, why)
}

// validName reports whether s can be stored as a name inside a key.
func validName(s string) bool { return strings.IndexByte(s, 0) < 0 }

func appendU64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

// readNonNeg reads a big-endian int64 that must not be negative.
func readNonNeg(k, b []byte, what string) (int64, error) {
	v := binary.BigEndian.Uint64(b)
	if v > math.MaxInt64 {
		return 0, malformed(k, "negative "+what)
	}
	return int64(v), nil
}

// prefixEnd returns the smallest key above every key with prefix p.
func prefixEnd(p byte) []byte { return []byte{p + 1} }

// --- raw records ---

func appendRecordKey(dst []byte, nanos int64, suffix uint64) []byte {
	dst = append(dst, prefixRecord)
	dst = appendU64(dst, uint64(nanos))
	return appendU64(dst, suffix)
}

func decodeRecordKey(k []byte) (nanos int64, suffix uint64, err error) {
	if len(k) != recordKeyLen || k[0] != prefixRecord {
		return 0, 0, malformed(k, "not a record key")
	}
	if nanos, err = readNonNeg(k, k[1:9], "time"); err != nil {
		return 0, 0, err
	}
	return nanos, binary.BigEndian.Uint64(k[9:]), nil
}

// --- indexes by key and by team ---

// appendIndexKey encodes an index entry; id must be non-empty and valid.
func appendIndexKey(dst []byte, prefix byte, id string, nanos int64, suffix uint64) []byte {
	dst = append(dst, prefix)
	dst = append(dst, id...)
	dst = append(dst, 0)
	dst = appendU64(dst, uint64(nanos))
	return appendU64(dst, suffix)
}

// indexIDEnd returns the smallest key above every index entry of id.
func indexIDEnd(prefix byte, id []byte) []byte {
	k := make([]byte, 0, len(id)+2)
	k = append(k, prefix)
	k = append(k, id...)
	return append(k, 1)
}

// decodeIndexKey returns the id (aliasing k) and the record it points at.
func decodeIndexKey(k []byte, prefix byte) (id []byte, nanos int64, suffix uint64, err error) {
	const tail = 1 + 8 + 8 // 0x00, nanos, suffix
	if len(k) < 1+1+tail || k[0] != prefix {
		return nil, 0, 0, malformed(k, "not an index key")
	}
	sep := len(k) - tail
	if k[sep] != 0 {
		return nil, 0, 0, malformed(k, "no separator after id")
	}
	id = k[1:sep]
	if bytes.IndexByte(id, 0) >= 0 {
		return nil, 0, 0, malformed(k, "0x00 inside id")
	}
	if nanos, err = readNonNeg(k, k[sep+1:sep+9], "time"); err != nil {
		return nil, 0, 0, err
	}
	return id, nanos, binary.BigEndian.Uint64(k[sep+9:]), nil
}

// --- pending rollups ---

func appendRollupKey(dst []byte, hour int64, keyID, teamID, model string) []byte {
	dst = append(dst, prefixRollup)
	dst = appendU64(dst, uint64(hour))
	dst = append(dst, keyID...)
	dst = append(dst, 0)
	dst = append(dst, teamID...)
	dst = append(dst, 0)
	return append(dst, model...)
}

func decodeRollupKey(k []byte) (hour int64, keyID, teamID, model string, err error) {
	if len(k) < 1+8+2 || k[0] != prefixRollup {
		return 0, "", "", "", malformed(k, "not a rollup key")
	}
	if hour, err = readNonNeg(k, k[1:9], "hour"); err != nil {
		return 0, "", "", "", err
	}
	if hour%secondsHour != 0 {
		return 0, "", "", "", malformed(k, "hour not on an hour boundary")
	}
	parts := bytes.Split(k[9:], []byte{0})
	if len(parts) != 3 {
		return 0, "", "", "", malformed(k, "want key_id, team_id and model separated by 0x00")
	}
	return hour, string(parts[0]), string(parts[1]), string(parts[2]), nil
}

// --- pending budget use ---

// appendBudgetKey encodes a budget row; budget must be non-empty and valid.
func appendBudgetKey(dst []byte, budget string, periodStart int64) []byte {
	dst = append(dst, prefixBudget)
	dst = append(dst, budget...)
	dst = append(dst, 0)
	return appendU64(dst, uint64(periodStart))
}

func decodeBudgetKey(k []byte) (budget string, periodStart int64, err error) {
	if len(k) < 1+1+1+8 || k[0] != prefixBudget {
		return "", 0, malformed(k, "not a budget key")
	}
	sep := len(k) - 9
	if k[sep] != 0 {
		return "", 0, malformed(k, "no separator after budget")
	}
	name := k[1:sep]
	if bytes.IndexByte(name, 0) >= 0 {
		return "", 0, malformed(k, "0x00 inside budget")
	}
	if periodStart, err = readNonNeg(k, k[sep+1:], "period"); err != nil {
		return "", 0, err
	}
	return string(name), periodStart, nil
}

// --- outbox ---

func appendOutboxKey(dst []byte, seq uint64) []byte {
	return appendU64(append(dst, prefixOutbox), seq)
}

func decodeOutboxKey(k []byte) (uint64, error) {
	if len(k) != outboxKeyLen || k[0] != prefixOutbox {
		return 0, malformed(k, "not an outbox key")
	}
	seq := binary.BigEndian.Uint64(k[1:])
	if seq == 0 {
		return 0, malformed(k, "seq 0")
	}
	return seq, nil
}

// --- meta ---

func metaKey(name string) []byte {
	return append([]byte{prefixMeta}, name...)
}

func decodeMetaU64(k, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("ledger: meta %q: value of %d bytes, want 8", k, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
