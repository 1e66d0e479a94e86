package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"sync"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
)

// The pass-through of an OpenAI-wire event stream (chat, completions, and
// Responses to a deployment that speaks it): the upstream's lines go to
// the client as they are, but for the usage the gateway asked for itself,
// which is hidden.

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, streamReadBuffer) }}

var (
	usageNullField = []byte(`,"usage":null`)
	dataPrefix     = []byte("data:")
	doneMarker     = []byte("[DONE]")
)

// endOfStream recognises the data of the event that ends an OpenAI-wire
// stream properly, given the usage read from it.
type endOfStream func(data []byte, u routing.Usage) bool

// chatEnd: chat and completions streams end with [DONE].
func chatEnd(data []byte, _ routing.Usage) bool { return bytes.Equal(data, doneMarker) }

// responsesEnd: a Responses stream ends with response.completed (or
// .incomplete), its one event with usage; it sends no [DONE], but one is
// taken as the end too.
func responsesEnd(data []byte, u routing.Usage) bool {
	return u.Present || bytes.Equal(data, doneMarker)
}

// stream relays an OpenAI-wire event stream line by line. When the
// gateway turned on include_usage itself (req.IncludeUsage is false), the
// usage-only chunk and the "usage":null members are hidden from the
// client.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, rec *Record, resp *http.Response, req *routing.Request,
	d *raftstore.Deployment, clk attemptClock, end endOfStream) *failure {
	s := passStreamPool.Get().(*passStream)
	pre := s.codec.pre[:0]
	*s = passStream{codec: lineCodec{hide: !req.IncludeUsage, end: end, pre: pre, br: s.codec.br}}
	s.io.init(resp.Body, w)
	s.codec.br.Reset(&s.io.fr)
	defer func() {
		s.codec.br.Reset(nil)
		s.codec.line = nil
		if cap(s.codec.pre) > 64<<10 {
			s.codec.pre = nil
		}
		s.io.release()
		s.io = streamIO{}
		passStreamPool.Put(s)
	}()
	return h.relay(w, r, rec, d, clk, upstreamStream{io: &s.io, codec: &s.codec,
		contentType: []string{resp.Header.Get("Content-Type")}, status: resp.StatusCode})
}

// passStreamPool holds passStreams, each with its read buffer.
var passStreamPool = sync.Pool{New: func() any {
	return &passStream{codec: lineCodec{br: bufio.NewReaderSize(nil, streamReadBuffer)}}
}}

// passStream holds what a pass-through stream needs.
type passStream struct {
	io    streamIO
	codec lineCodec
}

// lineCodec is the streamCodec of the OpenAI-wire pass-through: an event
// is one line.
type lineCodec struct {
	br      *bufio.Reader
	end     endOfStream
	hide    bool
	line    []byte
	pending error  // the error that came with the current line
	pre     []byte // keep-alives before the first event, written with it
	begun   bool
	done    bool // the event that ends the stream went through
	// what write does with the current line: drop it (a hidden event or
	// the blank line after one), or cut the "usage":null member at cut.
	drop, skipBlank bool
	cut             int
}

func (c *lineCodec) next() error {
	if c.pending != nil {
		err := c.pending
		c.pending, c.line = nil, nil
		return err
	}
	line, err := c.readLine()
	// Comments and blank lines (keep-alives some servers send while the
	// model thinks) are not the first token: keep them, and wait on.
	for !c.begun && err == nil && isKeepAlive(line) && len(c.pre) < 64<<10 {
		c.pre = append(c.pre, line...)
		line, err = c.readLine()
	}
	if err != nil && (err != io.EOF || len(line) == 0) {
		return err
	}
	c.begun = true
	c.line, c.pending = line, err
	return nil
}

// readLine reads one line, assembling one longer than the buffer.
func (c *lineCodec) readLine() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			line, err = c.br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	return line, err
}

// refusal: a first event that is an error object (some OpenAI-compatible
// servers answer 200 and send the error as the stream's first event) is
// not an answer, as the translating decoder also takes it.
func (c *lineCodec) refusal() *translate.Error {
	content := bytes.TrimRight(c.line, "\r\n")
	if !bytes.HasPrefix(content, dataPrefix) {
		return nil
	}
	if data := bytes.TrimLeft(content[len(dataPrefix):], " "); bytes.HasPrefix(data, errorObject) {
		return translate.ParseOpenAIError(http.StatusBadGateway, data)
	}
	return nil
}

var errorObject = []byte(`{"error"`)

func (c *lineCodec) scan(rec *Record) bool {
	skip := c.skipBlank // the line before was hidden
	c.drop, c.cut, c.skipBlank = false, -1, false
	content := bytes.TrimRight(c.line, "\r\n")
	if len(content) == 0 {
		c.drop = skip
		return false
	}
	if !bytes.HasPrefix(content, dataPrefix) {
		return false
	}
	data := bytes.TrimLeft(content[len(dataPrefix):], " ")
	var u routing.Usage
	if i := bytes.Index(data, usageNullField); i >= 0 {
		if c.hide {
			c.cut = len(content) - len(data) + i // data is a suffix of content, content a prefix of line
		}
	} else if uu, usageOnly := routing.ChunkUsage(data); uu.Present {
		u = uu
		rec.Usage = u
		c.drop = c.hide && usageOnly
		c.skipBlank = c.drop
	}
	if !c.done && c.end(data, u) {
		c.done = true
		return true
	}
	return false
}

func (c *lineCodec) write(w io.Writer) error {
	if len(c.pre) > 0 {
		if _, err := w.Write(c.pre); err != nil {
			return err
		}
		c.pre = c.pre[:0]
	}
	switch {
	case c.drop:
		return nil
	case c.cut >= 0:
		if _, err := w.Write(c.line[:c.cut]); err != nil {
			return err
		}
		_, err := w.Write(c.line[c.cut+len(usageNullField):])
		return err
	}
	_, err := w.Write(c.line)
	return err
}

func (c *lineCodec) whole() bool         { return c.done }
func (*lineCodec) close(io.Writer) error { return nil }
func (*lineCodec) fail(io.Writer, error) {}

// isKeepAlive reports whether an event-stream line is a comment or blank.
func isKeepAlive(line []byte) bool {
	return len(line) > 0 && (line[0] == ':' || line[0] == '\n' || line[0] == '\r')
}
