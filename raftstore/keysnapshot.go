package raftstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Keys go into a snapshot as they are stored: a key part record is a
// pb.Snapshot holding only its keys field, written from the keys' encodings
// (the bytes proto.Marshal would write, so any release reads it), and read
// back into Keys by scanning those encodings, without decoding them.

// snapshotKeysField is the field number of pb.Snapshot.keys.
const snapshotKeysField protowire.Number = 1

// snapshotPart is one decoded part record: its keys, and the rest of the
// state it holds (nil when it holds keys only).
type snapshotPart struct {
	keys []*Key
	msg  *pb.Snapshot
}

// writeKeyParts writes the keys in creation order, snapshotChunk to a
// record.
func writeKeyParts(w io.Writer, st *State) error {
	var data []byte
	n := 0
	flush := func() error {
		hdr := binary.AppendUvarint([]byte{recordPart}, uint64(len(data)))
		if _, err := w.Write(hdr); err != nil {
			return err
		}
		_, err := w.Write(data)
		data, n = data[:0], 0
		return err
	}
	var err error
	st.keysByCreated.ascend(func(k *Key) bool {
		data = protowire.AppendTag(data, snapshotKeysField, protowire.BytesType)
		data = protowire.AppendString(data, k.enc)
		if n++; n == snapshotChunk {
			err = flush()
		}
		return err == nil
	})
	if err == nil && n > 0 {
		err = flush()
	}
	return err
}

// decodePart decodes a part record: each key from its own copy of its
// encoding, the other fields with proto.Unmarshal.
func decodePart(data []byte) (snapshotPart, error) {
	var p snapshotPart
	var rest []byte
	for i := 0; i < len(data); {
		num, typ, n := protowire.ConsumeTag(data[i:])
		if n < 0 {
			return p, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, data[i+n:])
		if m < 0 {
			return p, protowire.ParseError(m)
		}
		field := data[i : i+n+m]
		i += n + m
		if num != snapshotKeysField || typ != protowire.BytesType {
			rest = append(rest, field...)
			continue
		}
		v, _ := protowire.ConsumeBytes(field[n:])
		k, err := keyFromEncoding(bytes.Clone(v))
		if err != nil {
			return p, fmt.Errorf("snapshot key %d: %w", len(p.keys)+1, err)
		}
		p.keys = append(p.keys, k)
	}
	if len(rest) > 0 {
		p.msg = &pb.Snapshot{}
		if err := proto.Unmarshal(rest, p.msg); err != nil {
			return p, err
		}
	}
	return p, nil
}

// addPart merges one decoded part record into the state being built.
func (b *stateBuilder) addPart(p snapshotPart) error {
	if err := b.addKeys(p.keys); err != nil {
		return err
	}
	if p.msg == nil {
		return nil
	}
	return b.add(p.msg)
}

// addKeys stores keys in the state being built.
func (b *stateBuilder) addKeys(keys []*Key) error {
	if !b.replaceKeys {
		return b.keys.putNew(keys)
	}
	for _, k := range keys {
		b.keys.putKey(k)
	}
	return nil
}
