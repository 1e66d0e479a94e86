package ratelimit

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Wire format (all integers varints from encoding/binary):
//
//	version   byte  (wireVersion)
//	node      uvarint length (1..MaxNodeIDLen), then the bytes
//	stamp     varint: sender's microsecond stamp, strictly increasing per sender
//	count     uvarint: number of entries
//	count × { bucket: uvarint length (0..MaxBucketLen) + bytes;
//	          requests, tokens, inflight: uvarint each (≤ maxValue) }
//
// Requests and tokens are the sender's own window sums at its send time,
// inflight its own requests in flight. Delta messages carry one entry (or
// none: a heartbeat); FullState carries every bucket.
const (
	wireVersion = 1

	// MaxNodeIDLen is the longest node id a message may carry.
	MaxNodeIDLen = 255
	// MaxBucketLen is the longest bucket id that is gossiped.
	MaxBucketLen = 1024

	maxValue      = 1 << 50
	minEntryBytes = 4 // empty bucket id + three one-byte values
)

var errMalformed = errors.New("ratelimit: malformed gossip message")

type entry struct {
	bucket          string
	req, tok, inflt int64
}

func appendHeader(buf []byte, node string, stamp int64, count int) []byte {
	buf = append(buf, wireVersion)
	buf = binary.AppendUvarint(buf, uint64(len(node)))
	buf = append(buf, node...)
	buf = binary.AppendVarint(buf, stamp)
	return binary.AppendUvarint(buf, uint64(count))
}

func appendEntry(buf []byte, e *entry) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(e.bucket)))
	buf = append(buf, e.bucket...)
	buf = binary.AppendUvarint(buf, uint64(e.req))
	buf = binary.AppendUvarint(buf, uint64(e.tok))
	return binary.AppendUvarint(buf, uint64(e.inflt))
}

// clampValue keeps a value inside what decoding accepts.
func clampValue(v int64) int64 { return min(max(v, 0), maxValue) }

func encode(node string, stamp int64, es []entry) []byte {
	n := 16 + len(node)
	for i := range es {
		n += len(es[i].bucket) + 16
	}
	buf := appendHeader(make([]byte, 0, n), node, stamp, len(es))
	for i := range es {
		buf = appendEntry(buf, &es[i])
	}
	return buf
}

// decoder reads one message, bounds-checking everything.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.err = errMalformed
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.err = errMalformed
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) bytes(maxLen int) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(maxLen) || n > uint64(len(d.b)-d.off) {
		d.err = errMalformed
		return nil
	}
	s := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return s
}

func (d *decoder) value() int64 {
	v := d.uvarint()
	if v > maxValue {
		d.err = errMalformed
		return 0
	}
	return int64(v)
}

// header is a decoded message header; body holds the entries.
type header struct {
	node  []byte
	stamp int64
	count int
	body  []byte
}

// parse validates a whole message and returns its header. Entries are
// read afterwards with eachEntry, which cannot fail on a parsed message.
func parse(msg []byte) (header, error) {
	if len(msg) == 0 {
		return header{}, errMalformed
	}
	if msg[0] != wireVersion {
		return header{}, fmt.Errorf("ratelimit: unsupported gossip message version %d", msg[0])
	}
	d := decoder{b: msg, off: 1}
	var h header
	h.node = d.bytes(MaxNodeIDLen)
	h.stamp = d.varint()
	count := d.uvarint()
	if d.err != nil {
		return header{}, d.err
	}
	if len(h.node) == 0 || count > uint64(len(msg)-d.off)/minEntryBytes {
		return header{}, errMalformed
	}
	h.count = int(count)
	h.body = msg[d.off:]
	for range h.count {
		d.bytes(MaxBucketLen)
		d.value()
		d.value()
		d.value()
	}
	if d.err != nil {
		return header{}, d.err
	}
	if d.off != len(msg) {
		return header{}, errMalformed
	}
	return h, nil
}

// eachEntry calls fn for every entry of a parsed message. bucket aliases
// the message.
func (h *header) eachEntry(fn func(bucket []byte, req, tok, inflt int64)) {
	d := decoder{b: h.body}
	for range h.count {
		b := d.bytes(MaxBucketLen)
		req, tok, inflt := d.value(), d.value(), d.value()
		fn(b, req, tok, inflt)
	}
}
