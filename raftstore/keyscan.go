package raftstore

import (
	"errors"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
)

// keyFields are what the key indexes and the data plane need of a
// pb.StoredKey, read from its encoding by scanStoredKey. The strings are
// substrings of the encoding.
type keyFields struct {
	id, name, teamID, hash string
	models, mcpTools       []string
	createdSeconds         int64
	createdNanos           int32
	expSeconds             int64
	expNanos               int32
	hasExpiry, revoked     bool
	hasBudget, hasLimits   bool
	allowUnpriced          bool
	budgetNanos            int64
	period                 string
	rpm, tpm, maxParallel  int64
}

var (
	errBadUTF8     = errors.New("string field holds invalid UTF-8")
	errFieldNumber = errors.New("field number out of range")
)

// scanStoredKey reads a pb.StoredKey encoding into f as proto.Unmarshal
// would decode it: the last of a repeated scalar field wins, a repeated
// message field merges, a field of the wrong wire type is an unknown
// field, and every string (also the metadata the data plane does not
// read) must be valid UTF-8. It fails exactly where proto.Unmarshal fails,
// so a key it accepts always decodes (FuzzScanStoredKey checks both).
func scanStoredKey(enc string, f *keyFields) error {
	return scanFields(enc, func(num protowire.Number, typ protowire.Type, v uint64, s string) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			return scanKey(s, f)
		case num == 2 && typ == protowire.BytesType:
			f.hash = s
		}
		return nil
	})
}

// scanKey reads a pb.Key encoding into f.
func scanKey(enc string, f *keyFields) error {
	return scanFields(enc, func(num protowire.Number, typ protowire.Type, v uint64, s string) error {
		if typ != protowire.BytesType {
			return nil // pb.Key has no scalar fields but strings
		}
		switch num {
		case 1, 2, 3, 4, 10, 13:
			if !utf8.ValidString(s) {
				return errBadUTF8
			}
		}
		switch num {
		case 1:
			f.id = s
		case 2:
			f.name = s
		case 4:
			f.models = append(f.models, s)
		case 5:
			return scanTimestamp(s, &f.createdSeconds, &f.createdNanos)
		case 6:
			return scanTimestamp(s, nil, nil)
		case 7:
			f.hasExpiry = true
			return scanTimestamp(s, &f.expSeconds, &f.expNanos)
		case 8:
			f.revoked = true
			return scanTimestamp(s, nil, nil)
		case 9:
			return scanMapEntry(s)
		case 10:
			f.teamID = s
		case 11:
			f.hasBudget = true
			return scanBudget(s, f)
		case 12:
			f.hasLimits = true
			return scanLimits(s, f)
		case 13:
			f.mcpTools = append(f.mcpTools, s)
		}
		return nil
	})
}

// scanTimestamp reads a google.protobuf.Timestamp into *sec and *nanos,
// setting only the fields it holds (so that a repeated one merges); nil
// pointers discard them.
func scanTimestamp(enc string, sec *int64, nanos *int32) error {
	var s int64
	var n int32
	if sec == nil {
		sec, nanos = &s, &n
	}
	return scanFields(enc, func(num protowire.Number, typ protowire.Type, v uint64, _ string) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			*sec = int64(v)
		case num == 2 && typ == protowire.VarintType:
			*nanos = int32(v)
		}
		return nil
	})
}

// scanMapEntry checks a metadata entry (two strings).
func scanMapEntry(enc string) error {
	return scanFields(enc, func(num protowire.Number, typ protowire.Type, _ uint64, s string) error {
		if (num == 1 || num == 2) && typ == protowire.BytesType && !utf8.ValidString(s) {
			return errBadUTF8
		}
		return nil
	})
}

func scanBudget(enc string, f *keyFields) error {
	return scanFields(enc, func(num protowire.Number, typ protowire.Type, v uint64, s string) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			f.budgetNanos = int64(v)
		case num == 2 && typ == protowire.BytesType:
			if !utf8.ValidString(s) {
				return errBadUTF8
			}
			f.period = s
		case num == 3 && typ == protowire.VarintType:
			f.allowUnpriced = protowire.DecodeBool(v)
		}
		return nil
	})
}

func scanLimits(enc string, f *keyFields) error {
	return scanFields(enc, func(num protowire.Number, typ protowire.Type, v uint64, _ string) error {
		if typ != protowire.VarintType {
			return nil
		}
		switch num {
		case 1:
			f.rpm = int64(v)
		case 2:
			f.tpm = int64(v)
		case 3:
			f.maxParallel = int64(v)
		}
		return nil
	})
}

// scanFields calls fn for every field of a message encoding in order: a
// varint's value in v, a length-delimited field's bytes in s (a substring
// of enc); other wire types are skipped. It fails on a malformed
// encoding, as proto.Unmarshal does.
func scanFields(enc string, fn func(num protowire.Number, typ protowire.Type, v uint64, s string) error) error {
	b := unsafe.Slice(unsafe.StringData(enc), len(enc))
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber { // ConsumeTag lets these through; Unmarshal does not
			return errFieldNumber
		}
		i += n
		var v uint64
		var s string
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b[i:])
		case protowire.BytesType:
			var m []byte
			m, n = protowire.ConsumeBytes(b[i:])
			if n >= 0 {
				s = enc[i+n-len(m) : i+n]
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b[i:])
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		i += n
		if err := fn(num, typ, v, s); err != nil {
			return err
		}
	}
	return nil
}
