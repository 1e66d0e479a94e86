package translate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// AWS's published event-stream test vectors, from aws/aws-sdk-js-v3
// packages/eventstream-codec/src/TestVectors.fixture.ts (the same vectors
// ship with the other AWS SDKs). Copied verbatim, not produced by this
// code.
var (
	esBody = []byte{123, 39, 102, 111, 111, 39, 58, 39, 98, 97, 114, 39, 125} // {'foo':'bar'}

	esVectorAllHeaders = []byte{
		0, 0, 0, 204, 0, 0, 0, 175, 15, 174, 100, 202, 10, 101, 118, 101, 110, 116, 45, 116, 121, 112, 101, 4, 0, 0, 160,
		12, 12, 99, 111, 110, 116, 101, 110, 116, 45, 116, 121, 112, 101, 7, 0, 16, 97, 112, 112, 108, 105, 99, 97, 116,
		105, 111, 110, 47, 106, 115, 111, 110, 10, 98, 111, 111, 108, 32, 102, 97, 108, 115, 101, 1, 9, 98, 111, 111, 108,
		32, 116, 114, 117, 101, 0, 4, 98, 121, 116, 101, 2, 207, 8, 98, 121, 116, 101, 32, 98, 117, 102, 6, 0, 20, 73, 39,
		109, 32, 97, 32, 108, 105, 116, 116, 108, 101, 32, 116, 101, 97, 112, 111, 116, 33, 9, 116, 105, 109, 101, 115,
		116, 97, 109, 112, 8, 0, 0, 0, 0, 0, 132, 95, 237, 5, 105, 110, 116, 49, 54, 3, 0, 42, 5, 105, 110, 116, 54, 52,
		5, 0, 0, 0, 0, 2, 135, 87, 178, 4, 117, 117, 105, 100, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
		123, 39, 102, 111, 111, 39, 58, 39, 98, 97, 114, 39, 125, 171, 165, 241, 12,
	}
	esVectorEmpty       = []byte{0, 0, 0, 16, 0, 0, 0, 0, 5, 194, 72, 235, 125, 152, 200, 255}
	esVectorInt32Header = []byte{
		0, 0, 0, 45, 0, 0, 0, 16, 65, 196, 36, 184, 10, 101, 118, 101, 110, 116, 45, 116, 121, 112, 101, 4, 0, 0, 160, 12,
		123, 39, 102, 111, 111, 39, 58, 39, 98, 97, 114, 39, 125, 54, 244, 128, 160,
	}
	// The int32_header vector of the earlier eventstream-marshaller
	// package (header "event-id").
	esVectorInt32HeaderOld = []byte{
		0, 0, 0, 43, 0, 0, 0, 14, 52, 139, 236, 123, 8, 101, 118, 101, 110, 116, 45, 105, 100, 4, 0, 0, 160, 12,
		123, 39, 102, 111, 111, 39, 58, 39, 98, 97, 114, 39, 125, 211, 137, 2, 133,
	}
	esVectorPayloadNoHeaders = []byte{
		0, 0, 0, 29, 0, 0, 0, 0, 253, 82, 140, 90, 123, 39, 102, 111, 111, 39, 58, 39, 98, 97, 114, 39, 125, 195, 101, 57,
		54,
	}
	esVectorOneStrHeader = []byte{
		0, 0, 0, 61, 0, 0, 0, 32, 7, 253, 131, 150, 12, 99, 111, 110, 116, 101, 110, 116, 45, 116, 121, 112, 101, 7, 0,
		16, 97, 112, 112, 108, 105, 99, 97, 116, 105, 111, 110, 47, 106, 115, 111, 110, 123, 39, 102, 111, 111, 39, 58,
		39, 98, 97, 114, 39, 125, 141, 156, 8, 177,
	}
	esVectorCorruptedHeaders = []byte{
		0, 0, 0, 61, 0, 0, 0, 32, 7, 253, 131, 150, 12, 99, 111, 110, 116, 101, 110, 116, 45, 116, 121, 112, 101, 7, 0,
		16, 97, 112, 112, 108, 105, 99, 97, 116, 105, 111, 110, 47, 106, 115, 111, 110, 123, 97, 102, 111, 111, 39, 58,
		39, 98, 97, 114, 39, 125, 141, 156, 8, 177,
	}
	esVectorCorruptedHeaderLen = []byte{
		0, 0, 0, 61, 0, 0, 0, 33, 7, 253, 131, 150, 12, 99, 111, 110, 116, 101, 110, 116, 45, 116, 121, 112, 101, 7, 0,
		16, 97, 112, 112, 108, 105, 99, 97, 116, 105, 111, 110, 47, 106, 115, 111, 110, 123, 39, 102, 111, 111, 39, 58,
		39, 98, 97, 114, 39, 125, 141, 156, 8, 177,
	}
	esVectorCorruptedLength = []byte{
		0, 0, 0, 62, 0, 0, 0, 32, 7, 253, 131, 150, 12, 99, 111, 110, 116, 101, 110, 116, 45, 116, 121, 112, 101, 7, 0,
		16, 97, 112, 112, 108, 105, 99, 97, 116, 105, 111, 110, 47, 106, 115, 111, 110, 123, 39, 102, 111, 111, 39, 58,
		39, 98, 97, 114, 39, 125, 141, 156, 8, 177,
	}
	esVectorCorruptedPayload = []byte{
		0, 0, 0, 29, 0, 0, 0, 0, 253, 82, 140, 90, 91, 39, 102, 111, 111, 39, 58, 39, 98, 97, 114, 39, 125, 195, 101, 57,
		54,
	}
)

func TestEventStreamPublishedVectors(t *testing.T) {
	cases := []struct {
		name    string
		encoded []byte
		headers map[string]string
		payload []byte
	}{
		{"all_headers", esVectorAllHeaders, map[string]string{
			"event-type":   "40972",
			"content-type": "application/json",
			"bool false":   "false",
			"bool true":    "true",
			"byte":         "-49",
			"byte buf":     "SSdtIGEgbGl0dGxlIHRlYXBvdCE=", // "I'm a little teapot!"
			"timestamp":    "1970-01-01T02:24:35.309Z",     // new Date(8675309)
			"int16":        "42",
			"int64":        "42424242",
			"uuid":         "01020304-0506-0708-090a-0b0c0d0e0f10",
		}, esBody},
		{"empty_message", esVectorEmpty, map[string]string{}, []byte{}},
		{"int32_header", esVectorInt32Header, map[string]string{"event-type": "40972"}, esBody},
		{"int32_header (eventstream-marshaller)", esVectorInt32HeaderOld, map[string]string{"event-id": "40972"}, esBody},
		{"payload_no_headers", esVectorPayloadNoHeaders, map[string]string{}, esBody},
		{"payload_one_str_header", esVectorOneStrHeader, map[string]string{"content-type": "application/json"}, esBody},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewEventStreamReader(bytes.NewReader(tc.encoded))
			m, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m.Headers, tc.headers) {
				t.Errorf("headers\n got %v\nwant %v", m.Headers, tc.headers)
			}
			if !bytes.Equal(m.Payload, tc.payload) {
				t.Errorf("payload %q, want %q", m.Payload, tc.payload)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Errorf("after the message: %v, want io.EOF", err)
			}
		})
	}

	failures := map[string][]byte{
		"corrupted_headers":    esVectorCorruptedHeaders,
		"corrupted_header_len": esVectorCorruptedHeaderLen,
		"corrupted_length":     esVectorCorruptedLength,
		"corrupted_payload":    esVectorCorruptedPayload,
	}
	for name, enc := range failures {
		t.Run(name, func(t *testing.T) {
			r := NewEventStreamReader(bytes.NewReader(enc))
			m, err := r.Next()
			if err == nil || err == io.EOF {
				t.Fatalf("decoded %+v, want an error", m)
			}
			if _, again := r.Next(); again != err {
				t.Errorf("second Next: %v, want the sticky %v", again, err)
			}
		})
	}
}

// The encoder must produce the published bytes for string headers.
func TestAppendEventStreamMessageMatchesVectors(t *testing.T) {
	if got := AppendEventStreamMessage(nil, [][2]string{{"content-type", "application/json"}}, esBody); !bytes.Equal(got, esVectorOneStrHeader) {
		t.Errorf("payload_one_str_header\n got %v\nwant %v", got, esVectorOneStrHeader)
	}
	if got := AppendEventStreamMessage(nil, nil, nil); !bytes.Equal(got, esVectorEmpty) {
		t.Errorf("empty_message\n got %v\nwant %v", got, esVectorEmpty)
	}
	prefix := []byte("keep")
	got := AppendEventStreamMessage(prefix, nil, esBody)
	if !bytes.Equal(got[:4], prefix) || !bytes.Equal(got[4:], esVectorPayloadNoHeaders) {
		t.Errorf("payload_no_headers appended to a prefix\n got %v", got)
	}
}

// Header encodings from aws-sdk-js-v3 HeaderMarshaller.spec.ts (name "🦄").
func TestEventStreamHeaderTypes(t *testing.T) {
	name := []byte{0x04, 0xf0, 0x9f, 0xa6, 0x84}
	with := func(b ...byte) []byte { return append(append([]byte{}, name...), b...) }
	persian := []byte{0xd8, 0xaf, 0xd8, 0xb3, 0xd8, 0xaa, 0xe2, 0x80, 0x8c, 0xd9, 0x86, 0xd9, 0x88, 0xd8, 0xb4, 0xd8, 0xaa,
		0xd9, 0x87, 0xe2, 0x80, 0x8c, 0xd9, 0x87, 0xd8, 0xa7, 0x20, 0xd9, 0x86, 0xd9, 0x85, 0xdb, 0x8c, 0xe2, 0x80, 0x8c, 0xd8,
		0xb3, 0xd9, 0x88, 0xd8, 0xb2, 0xd9, 0x86, 0xd8, 0xaf}
	cases := []struct {
		name string
		enc  []byte
		want map[string]string
	}{
		{"boolean true", with(0), map[string]string{"🦄": "true"}},
		{"boolean false", with(1), map[string]string{"🦄": "false"}},
		{"byte", with(2, 0x7f), map[string]string{"🦄": "127"}},
		{"short", with(3, 0x7f, 0xff), map[string]string{"🦄": "32767"}},
		{"integer", with(4, 0x7f, 0xff, 0xff, 0xff), map[string]string{"🦄": "2147483647"}},
		{"long", with(5, 0x00, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), map[string]string{"🦄": "9007199254740991"}},
		{"binary", with(6, 0x00, 0x08, 0xde, 0xad, 0xbe, 0xef, 0xca, 0xfe, 0xba, 0xbe), map[string]string{"🦄": "3q2+78r+ur4="}},
		{"string", with(append([]byte{7, 0x00, 0x2e}, persian...)...), map[string]string{"🦄": "دست\u200cنوشته\u200cها نمی\u200cسوزند"}},
		{"timestamp", with(8, 0x00, 0x00, 0x01, 0x61, 0x97, 0x16, 0xac, 0xc2), map[string]string{"🦄": "2018-02-15T01:31:41.122Z"}},
		{"uuid", with(9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
			map[string]string{"🦄": "ffffffff-ffff-ffff-ffff-ffffffffffff"}},
		{"a sequence", []byte{
			0x04, 0xf0, 0x9f, 0xa6, 0x84, 0x06, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef, 0x04, 0xf0, 0x9f, 0x8f, 0x87, 0x00,
			0x04, 0xf0, 0x9f, 0x90, 0x8e, 0x07, 0x00, 0x07, 0xe2, 0x98, 0x83, 0xf0, 0x9f, 0x92, 0xa9, 0x04, 0xf0, 0x9f,
			0x90, 0xb4, 0x01,
		}, map[string]string{"🦄": "3q2+7w==", "🏇": "true", "🐎": "☃💩", "🐴": "false"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseEventStreamHeaders(tc.enc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			// The same headers inside a framed message.
			m, err := NewEventStreamReader(bytes.NewReader(esFrame(tc.enc, nil))).Next()
			if err != nil || !reflect.DeepEqual(m.Headers, tc.want) {
				t.Errorf("framed: %v %v", m, err)
			}
		})
	}

	// Malformed header blocks inside otherwise valid messages.
	bad := map[string][]byte{
		"unknown type":             with(10),
		"name past end":            {0x09, 'a', 'b'},
		"no type byte":             {0x01, 'a'},
		"string length past end":   with(7, 0x00, 0x05, 'a', 'b'),
		"string length truncated":  with(7, 0x00),
		"int past end":             with(4, 0x00, 0x00),
		"uuid past end":            with(9, 1, 2, 3),
		"timestamp past end":       with(8, 1, 2, 3, 4, 5, 6, 7),
		"bytes length past end":    with(6, 0xff, 0xff, 1),
		"short past end":           with(3, 0x01),
		"byte past end":            with(2),
		"long past end":            with(5, 1, 2, 3, 4),
		"second header incomplete": append(with(0), 0x03, 'a'),
	}
	for name, hb := range bad {
		t.Run("bad/"+name, func(t *testing.T) {
			m, err := NewEventStreamReader(bytes.NewReader(esFrame(hb, []byte("x")))).Next()
			if err == nil {
				t.Fatalf("decoded %+v, want an error", m)
			}
			if !errors.Is(err, errEventStream) {
				t.Errorf("error %v is not an event-stream error", err)
			}
		})
	}
}

// esFrame wraps a raw header block and payload in a message with valid
// CRCs, so that header parsing can be tested on arbitrary bytes.
func esFrame(headers, payload []byte) []byte {
	total := 16 + len(headers) + len(payload)
	b := binary.BigEndian.AppendUint32(nil, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(len(headers)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(b, headers...)
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

func TestEventStreamRoundTripOneByteAtATime(t *testing.T) {
	type msg struct {
		headers [][2]string
		payload []byte
	}
	msgs := []msg{
		{[][2]string{{":event-type", "messageStart"}, {":content-type", "application/json"}, {":message-type", "event"}}, []byte(`{"role":"assistant"}`)},
		{nil, nil},
		{[][2]string{{"empty", ""}}, []byte{0, 1, 2, 255}},
		{[][2]string{{"big", strings.Repeat("v", 70000)}}, bytes.Repeat([]byte("p"), 100000)},
	}
	var stream []byte
	for _, m := range msgs {
		stream = AppendEventStreamMessage(stream, m.headers, m.payload)
	}
	r := NewEventStreamReader(iotest.OneByteReader(bytes.NewReader(stream)))
	for i, m := range msgs {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		want := map[string]string{}
		for _, h := range m.headers {
			v := h[1]
			if len(v) > 65535 {
				v = v[:65535] // the encoder truncates to the format's limit
			}
			want[h[0]] = v
		}
		if !reflect.DeepEqual(got.Headers, want) {
			t.Errorf("message %d headers differ", i)
		}
		if !bytes.Equal(got.Payload, m.payload) && !(len(got.Payload) == 0 && len(m.payload) == 0) {
			t.Errorf("message %d payload differs", i)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v, want io.EOF", err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the end: %v, want io.EOF again", err)
	}
}

// Every cut of a two-message stream: cuts on a message boundary end
// cleanly, all others are io.ErrUnexpectedEOF.
func TestEventStreamTruncation(t *testing.T) {
	first := AppendEventStreamMessage(nil, [][2]string{{":event-type", "a"}}, []byte("one"))
	stream := AppendEventStreamMessage(append([]byte{}, first...), [][2]string{{":event-type", "b"}}, []byte("two"))
	for cut := 0; cut < len(stream); cut++ {
		r := NewEventStreamReader(bytes.NewReader(stream[:cut]))
		var n int
		var err error
		for {
			if _, err = r.Next(); err != nil {
				break
			}
			n++
		}
		switch cut {
		case 0, len(first):
			if err != io.EOF {
				t.Errorf("cut %d (boundary): %v, want io.EOF", cut, err)
			}
		default:
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("cut %d: %v, want io.ErrUnexpectedEOF", cut, err)
			}
		}
		if want := min(1, cut/len(first)); cut < len(stream) && n != want {
			t.Errorf("cut %d: %d messages before the error, want %d", cut, n, want)
		}
	}
}

// Flipping any single byte of a message must be caught (by a CRC or by a
// length check) and never panic.
func TestEventStreamCorruptionCaught(t *testing.T) {
	msg := AppendEventStreamMessage(nil, [][2]string{{":event-type", "contentBlockDelta"}, {":message-type", "event"}}, []byte(`{"delta":{"text":"hi"}}`))
	for i := range msg {
		for _, flip := range []byte{0x01, 0x80, 0xff} {
			bad := append([]byte{}, msg...)
			bad[i] ^= flip
			m, err := NewEventStreamReader(bytes.NewReader(bad)).Next()
			if err == nil {
				t.Fatalf("byte %d ^ %#x: decoded %+v, want an error", i, flip, m)
			}
		}
	}
}

func TestEventStreamLengthLimits(t *testing.T) {
	prelude := func(total, headers uint32) []byte {
		b := binary.BigEndian.AppendUint32(nil, total)
		b = binary.BigEndian.AppendUint32(b, headers)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	}
	cases := map[string][]byte{
		// Only the prelude is present: the size check must come before
		// any attempt to read (or allocate) the body.
		"oversize":            prelude(MaxEventStreamMessage+1, 0),
		"huge":                prelude(0xffffffff, 0),
		"below minimum":       prelude(15, 0),
		"headers exceed body": prelude(40, 25),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewEventStreamReader(bytes.NewReader(b)).Next()
			if err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("got %v, want a length error", err)
			}
		})
	}

	// A message of exactly the limit is accepted.
	payload := make([]byte, MaxEventStreamMessage-16)
	msg := AppendEventStreamMessage(nil, nil, payload)
	m, err := NewEventStreamReader(bytes.NewReader(msg)).Next()
	if err != nil || len(m.Payload) != len(payload) {
		t.Fatalf("16 MiB message: %v", err)
	}
}

func TestAppendEventStreamMessageTruncatesLongHeaders(t *testing.T) {
	long := strings.Repeat("n", 300)
	msg := AppendEventStreamMessage(nil, [][2]string{{long, "v"}}, nil)
	m, err := NewEventStreamReader(bytes.NewReader(msg)).Next()
	if err != nil {
		t.Fatal(err)
	}
	if m.Headers[long[:255]] != "v" || len(m.Headers) != 1 {
		t.Errorf("headers %v", m.Headers)
	}
}

type esErrReader struct{ err error }

func (r esErrReader) Read([]byte) (int, error) { return 0, r.err }

func TestEventStreamPassesReadErrors(t *testing.T) {
	boom := errors.New("connection reset")
	_, err := NewEventStreamReader(esErrReader{boom}).Next()
	if err != boom {
		t.Fatalf("got %v, want the reader's error", err)
	}
	// A failure inside the body is passed through too.
	msg := AppendEventStreamMessage(nil, nil, []byte("payload"))
	_, err = NewEventStreamReader(io.MultiReader(bytes.NewReader(msg[:14]), esErrReader{boom})).Next()
	if err != boom {
		t.Fatalf("mid-message: got %v, want the reader's error", err)
	}
}

func FuzzEventStream(f *testing.F) {
	for _, v := range [][]byte{esVectorAllHeaders, esVectorEmpty, esVectorInt32Header, esVectorInt32HeaderOld,
		esVectorPayloadNoHeaders, esVectorOneStrHeader, esVectorCorruptedHeaders, esVectorCorruptedHeaderLen,
		esVectorCorruptedLength, esVectorCorruptedPayload} {
		f.Add(v)
	}
	for _, s := range bedrockStreamSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewEventStreamReader(bytes.NewReader(data))
		consumed := 0
		for {
			m, err := r.Next()
			if err != nil {
				if _, again := r.Next(); again != err {
					t.Fatalf("error not sticky: %v then %v", err, again)
				}
				break
			}
			// Each message costs at least its 16 framing bytes, its
			// payload and 2 bytes per header.
			consumed += 16 + len(m.Payload) + 2*len(m.Headers)
			if consumed > len(data) {
				t.Fatalf("decoded more than the %d input bytes hold", len(data))
			}
		}
		// The Bedrock decoder must terminate without panicking too.
		d := Bedrock.NewStreamDecoder(bytes.NewReader(data), "m")
		for i := 0; ; i++ {
			if _, err := d.Next(); err != nil {
				break
			}
			if i > 4*len(data)+8 {
				t.Fatalf("decoder did not stop")
			}
		}
	})
}

// Messages larger than the first read buffer, back to back in a reader
// that hands out everything it has: the reader must not swallow bytes of
// the next message.
func TestEventStreamLargeMessagesBackToBack(t *testing.T) {
	var stream []byte
	var payloads [][]byte
	for i, size := range []int{200000, 65536 - 16, 1 << 20, 3, 300001} {
		p := bytes.Repeat([]byte{byte('a' + i)}, size)
		payloads = append(payloads, p)
		stream = AppendEventStreamMessage(stream, [][2]string{{"n", strings.Repeat("x", i)}}, p)
	}
	for _, mode := range []string{"whole", "halves"} {
		var r io.Reader = bytes.NewReader(stream)
		if mode == "halves" {
			r = iotest.HalfReader(r)
		}
		es := NewEventStreamReader(r)
		for i, p := range payloads {
			m, err := es.Next()
			if err != nil {
				t.Fatalf("%s: message %d: %v", mode, i, err)
			}
			if !bytes.Equal(m.Payload, p) || m.Headers["n"] != strings.Repeat("x", i) {
				t.Fatalf("%s: message %d differs", mode, i)
			}
		}
		if _, err := es.Next(); err != io.EOF {
			t.Fatalf("%s: end: %v", mode, err)
		}
	}
}

type esZeroReader struct{}

func (esZeroReader) Read([]byte) (int, error) { return 0, nil }

// A reader that keeps returning nothing must not hang the decoder.
func TestEventStreamNoProgress(t *testing.T) {
	msg := AppendEventStreamMessage(nil, nil, []byte("payload"))
	_, err := NewEventStreamReader(io.MultiReader(bytes.NewReader(msg[:14]), esZeroReader{})).Next()
	if !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("got %v, want io.ErrNoProgress", err)
	}
}
