package translate

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"time"
)

// This file reads and writes the AWS event-stream framing
// (application/vnd.amazon.eventstream) that Bedrock's ConverseStream
// answers with. A message is:
//
//	prelude:  total length (uint32 BE) | headers length (uint32 BE) | prelude CRC32 (uint32 BE)
//	headers:  repeated { name length (uint8) | name | value type (uint8) | value }
//	payload:  total length - headers length - 16 bytes
//	trailer:  message CRC32 (uint32 BE) over every byte before it
//
// Both checksums are CRC-32/IEEE. Header values are typed; see the
// esType* constants for the encodings.

// MaxEventStreamMessage is the largest event-stream message the reader
// accepts (16 MiB, the limit the AWS SDKs apply); a larger prelude is an
// error rather than an allocation.
const MaxEventStreamMessage = 16 << 20

const (
	esPreludeLen = 12 // total length, headers length, prelude CRC
	esMinMessage = esPreludeLen + 4
)

// Header value types of the event-stream format.
const (
	esTypeTrue      = 0 // no value bytes
	esTypeFalse     = 1 // no value bytes
	esTypeByte      = 2 // int8
	esTypeShort     = 3 // int16 BE
	esTypeInt       = 4 // int32 BE
	esTypeLong      = 5 // int64 BE
	esTypeBytes     = 6 // uint16 BE length, bytes
	esTypeString    = 7 // uint16 BE length, UTF-8 bytes
	esTypeTimestamp = 8 // int64 BE milliseconds since the Unix epoch
	esTypeUUID      = 9 // 16 bytes
)

// EventStreamMessage is one decoded event-stream message.
//
// Headers holds every header by name. String headers (the only kind
// Bedrock sends: :event-type, :message-type, :content-type,
// :exception-type) keep their value; the other types are rendered as
// text so that nothing is silently lost: booleans as "true"/"false",
// integers in decimal, byte arrays in standard base64, timestamps in
// RFC 3339 (UTC, millisecond precision) and UUIDs in their canonical
// 8-4-4-4-12 hex form. A repeated header name keeps its last value.
type EventStreamMessage struct {
	Headers map[string]string
	Payload []byte
}

// EventStreamReader reads event-stream messages from an io.Reader.
type EventStreamReader struct {
	r   io.Reader
	err error // sticky: once the stream broke, every Next returns it
}

// NewEventStreamReader returns a reader of the messages in r.
func NewEventStreamReader(r io.Reader) *EventStreamReader {
	return &EventStreamReader{r: r}
}

// errEventStream marks framing errors; callers wrap them as they see fit.
var errEventStream = errors.New("event stream")

func esErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errEventStream, fmt.Sprintf(format, args...))
}

// Next returns the next message. It returns io.EOF when the stream ends
// cleanly on a message boundary, and an error when a message is
// truncated (io.ErrUnexpectedEOF is wrapped), oversized, fails a CRC
// check or has malformed headers. After an error every call returns the
// same error.
func (s *EventStreamReader) Next() (*EventStreamMessage, error) {
	if s.err != nil {
		return nil, s.err
	}
	m, err := s.next()
	if err != nil {
		s.err = err
	}
	return m, err
}

func (s *EventStreamReader) next() (*EventStreamMessage, error) {
	var prelude [esPreludeLen]byte
	n, err := io.ReadFull(s.r, prelude[:])
	switch {
	case err == io.EOF && n == 0:
		return nil, io.EOF
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return nil, fmt.Errorf("%w: truncated message prelude (%d of %d bytes): %w", errEventStream, n, esPreludeLen, io.ErrUnexpectedEOF)
	case err != nil:
		return nil, err
	}
	total := binary.BigEndian.Uint32(prelude[0:4])
	headersLen := binary.BigEndian.Uint32(prelude[4:8])
	if got, want := crc32.ChecksumIEEE(prelude[0:8]), binary.BigEndian.Uint32(prelude[8:12]); got != want {
		return nil, esErrorf("prelude CRC mismatch (computed %08x, message says %08x)", got, want)
	}
	if total < esMinMessage {
		return nil, esErrorf("message length %d is below the minimum of %d", total, esMinMessage)
	}
	if total > MaxEventStreamMessage {
		return nil, esErrorf("message length %d exceeds the limit of %d bytes", total, MaxEventStreamMessage)
	}
	if headersLen > total-esMinMessage {
		return nil, esErrorf("headers length %d does not fit in a message of %d bytes", headersLen, total)
	}

	// Read the rest of the message. The buffer doubles as bytes arrive
	// rather than being sized from the (untrusted) prelude up front.
	// Never read past rest: the bytes after it belong to the next message.
	rest := int(total) - esPreludeLen
	body := make([]byte, 0, min(rest, 64<<10))
	for empty := 0; len(body) < rest; {
		if len(body) == cap(body) {
			body = slices.Grow(body, min(cap(body), rest-len(body)))
		}
		n, err := s.r.Read(body[len(body):min(cap(body), rest)])
		body = body[:len(body)+n]
		switch {
		case err == io.EOF && len(body) < rest:
			return nil, fmt.Errorf("%w: truncated message (%d of %d bytes after the prelude): %w", errEventStream, len(body), rest, io.ErrUnexpectedEOF)
		case err != nil && err != io.EOF:
			return nil, err
		case n == 0:
			if empty++; empty >= 100 {
				return nil, io.ErrNoProgress
			}
		default:
			empty = 0
		}
	}

	crc := crc32.NewIEEE()
	_, _ = crc.Write(prelude[:])
	_, _ = crc.Write(body[:len(body)-4])
	if got, want := crc.Sum32(), binary.BigEndian.Uint32(body[len(body)-4:]); got != want {
		return nil, esErrorf("message CRC mismatch (computed %08x, message says %08x)", got, want)
	}

	headers, err := parseEventStreamHeaders(body[:headersLen])
	if err != nil {
		return nil, err
	}
	return &EventStreamMessage{Headers: headers, Payload: body[headersLen : len(body)-4]}, nil
}

// parseEventStreamHeaders decodes the header block b, checking every
// length against what is left.
func parseEventStreamHeaders(b []byte) (map[string]string, error) {
	h := make(map[string]string, 4)
	for len(b) > 0 {
		nameLen := int(b[0])
		b = b[1:]
		if len(b) < nameLen+1 {
			return nil, esErrorf("header name runs past the header block")
		}
		name := string(b[:nameLen])
		typ := b[nameLen]
		b = b[nameLen+1:]
		value, size, err := eventStreamHeaderValue(name, typ, b)
		if err != nil {
			return nil, err
		}
		b = b[size:]
		h[name] = value
	}
	return h, nil
}

// eventStreamHeaderValue reads the value of header name, of type typ, at
// the start of b: its text form and the number of bytes it took.
func eventStreamHeaderValue(name string, typ byte, b []byte) (string, int, error) {
	switch typ {
	case esTypeTrue:
		return "true", 0, nil
	case esTypeFalse:
		return "false", 0, nil
	case esTypeBytes, esTypeString:
		if len(b) < 2 {
			return "", 0, esErrorf("header %q length runs past the header block", name)
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return "", 0, esErrorf("header %q value runs past the header block", name)
		}
		if typ == esTypeString {
			return string(b[2 : 2+n]), 2 + n, nil
		}
		return base64.StdEncoding.EncodeToString(b[2 : 2+n]), 2 + n, nil
	}
	n := esFixedSize(typ)
	if n == 0 {
		return "", 0, esErrorf("header %q has unknown value type %d", name, typ)
	}
	if len(b) < n {
		return "", 0, esErrorf("header %q value runs past the header block", name)
	}
	return esFixedValue(typ, b[:n]), n, nil
}

// esFixedSize is the size of a value of a fixed-size type, 0 for a type
// that is not one.
func esFixedSize(typ byte) int {
	switch typ {
	case esTypeByte:
		return 1
	case esTypeShort:
		return 2
	case esTypeInt:
		return 4
	case esTypeLong, esTypeTimestamp:
		return 8
	case esTypeUUID:
		return 16
	}
	return 0
}

// esFixedValue is the text form of v, a value of fixed-size type typ.
func esFixedValue(typ byte, v []byte) string {
	switch typ {
	case esTypeByte:
		return strconv.Itoa(int(int8(v[0])))
	case esTypeShort:
		return strconv.Itoa(int(int16(binary.BigEndian.Uint16(v))))
	case esTypeInt:
		return strconv.FormatInt(int64(int32(binary.BigEndian.Uint32(v))), 10)
	case esTypeLong:
		return strconv.FormatInt(int64(binary.BigEndian.Uint64(v)), 10)
	case esTypeTimestamp:
		ms := int64(binary.BigEndian.Uint64(v))
		return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	default: // esTypeUUID
		x := hex.EncodeToString(v)
		return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
	}
}

// AppendEventStreamMessage appends one event-stream message with the
// given string headers and payload to dst and returns the extended
// slice. The format caps header names at 255 bytes and string values at
// 65535 bytes; longer names and values are truncated to those limits
// (the encoder serves the mock server and tests, whose headers are
// short).
func AppendEventStreamMessage(dst []byte, headers [][2]string, payload []byte) []byte {
	headersLen := 0
	for _, kv := range headers {
		headersLen += 1 + min(len(kv[0]), 255) + 1 + 2 + min(len(kv[1]), 65535)
	}
	total := esMinMessage + headersLen + len(payload)

	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(total))
	dst = binary.BigEndian.AppendUint32(dst, uint32(headersLen))
	dst = binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:start+8]))
	for _, kv := range headers {
		name, value := kv[0], kv[1]
		if len(name) > 255 {
			name = name[:255]
		}
		if len(value) > 65535 {
			value = value[:65535]
		}
		dst = append(dst, byte(len(name)))
		dst = append(dst, name...)
		dst = append(dst, esTypeString)
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(value)))
		dst = append(dst, value...)
	}
	dst = append(dst, payload...)
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:]))
}
