package proxy

import (
	"bytes"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing"
	"github.com/tollgate/tollgate/routing/translate"
)

// --- Anthropic clients of Anthropic deployments: native pass-through ------

// attemptAnthropic passes a Messages request through to an Anthropic
// deployment with only the model renamed, so that everything Anthropic
// offers (thinking, cache control, documents) reaches it, and reads the
// usage from the answer on the way back.
func (h *Handler) attemptAnthropic(w http.ResponseWriter, r *http.Request, rec *Record, d *raftstore.Deployment, x *exchange) *failure {
	ctx, timeout := h.deadline(r, rec, d)
	defer ctx.end()
	timer, timedOut := ctx.timer, &ctx.timedOut
	out := routing.RewriteRequest(nil, x.body, &x.req, upstreamModel(d, x.req.Model), false)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, d.BaseURL+"/messages", bytes.NewReader(out))
	if err != nil {
		return failureOf(errBadUpstreamURL, translate.KindAuth)
	}
	setAnthropicHeaders(hreq.Header, r.Header, d)
	resp, f := h.send(r, rec, d, h.transport, hreq, translate.Anthropic, timedOut, timeout)
	if f != nil || resp == nil {
		return f
	}
	defer resp.Body.Close()
	if !isEventStream(resp.Header.Get("Content-Type")) {
		return h.anthropicAnswer(w, r, rec, resp, d)
	}
	s := &anthropicStream{}
	s.io.init(resp.Body, w)
	defer s.io.release()
	s.codec.sse = translate.NewSSEReader(&s.io.fr)
	return h.relay(w, r, rec, d, attemptClock{timer, timedOut}, upstreamStream{io: &s.io, codec: &s.codec,
		contentType: contentTypeEventStream, status: http.StatusOK})
}

// setAnthropicHeaders sets the headers of a request to Anthropic: the
// deployment's key, and the client's API version and betas.
func setAnthropicHeaders(hdr, client http.Header, d *raftstore.Deployment) {
	hdr["Content-Type"] = contentTypeJSON
	if d.Credential != "" {
		hdr["X-Api-Key"] = []string{d.Credential}
	}
	version := client.Get("Anthropic-Version")
	if version == "" {
		version = "2023-06-01"
	}
	hdr["Anthropic-Version"] = []string{version}
	if b := client.Values("Anthropic-Beta"); len(b) > 0 {
		hdr["Anthropic-Beta"] = b
	}
}

// anthropicAnswer relays a whole (non-streaming) Anthropic answer.
func (h *Handler) anthropicAnswer(w http.ResponseWriter, r *http.Request, rec *Record, resp *http.Response, d *raftstore.Deployment) *failure {
	data, f, ok := h.readAnswer(r, rec, resp, d)
	if !ok {
		return f
	}
	u, err := translate.AnthropicBodyUsage(data)
	if !validAnswer(data) || err != nil {
		return errBadAnswer(d, data)
	}
	if u != nil {
		rec.Usage = usageOf(u)
	}
	rec.Status = http.StatusOK
	h.answer(w, rec, d, contentTypeJSON, http.StatusOK, data)
	return nil
}

// anthropicStream holds what an Anthropic pass-through stream needs.
type anthropicStream struct {
	io    streamIO
	codec anthropicCodec
}

// anthropicCodec is the streamCodec of the Anthropic pass-through: it
// relays the upstream's events as they are (comments left out), reads the
// usage from message_start and message_delta, and the stream ends
// properly with message_stop.
type anthropicCodec struct {
	sse     *translate.SSEReader
	ev      *translate.SSEEvent
	usage   translate.AnthropicStreamUsage // the one decoder of Anthropic usage
	buf     []byte
	stopped bool
}

func (c *anthropicCodec) next() error {
	ev, err := c.sse.Next()
	c.ev = ev
	return err
}

func (c *anthropicCodec) refusal() *translate.Error {
	if c.ev.Event == "error" {
		return translate.AnthropicEventError(c.ev.Data)
	}
	return nil
}

func (c *anthropicCodec) scan(rec *Record) bool {
	c.usage.Event(c.ev.Event, c.ev.Data)
	// message_start's output count is provisional: the usage is what the
	// answer cost only from message_delta on (or at message_stop, for an
	// upstream that sends none). Until then a stream that ends has none,
	// and is charged its reservation.
	if c.ev.Event == "message_delta" || c.ev.Event == "message_stop" {
		rec.Usage = usageOf(c.usage.Usage())
	}
	if c.ev.Event == "message_stop" {
		c.stopped = true
		return true
	}
	return false
}

// write writes the event as the upstream sent it: its name, and each of
// its data lines as a data field of its own.
func (c *anthropicCodec) write(w io.Writer) error {
	b := c.buf[:0]
	if c.ev.Event != "" {
		b = append(append(append(b, "event: "...), c.ev.Event...), '\n')
	}
	data := c.ev.Data
	for {
		line, rest, more := bytes.Cut(data, newline)
		b = append(append(append(b, "data: "...), line...), '\n')
		if !more {
			break
		}
		data = rest
	}
	b = append(b, '\n')
	c.buf = b
	_, err := w.Write(b)
	return err
}

var newline = []byte{'\n'}

func (c *anthropicCodec) whole() bool         { return c.stopped }
func (*anthropicCodec) close(io.Writer) error { return nil }
func (*anthropicCodec) fail(io.Writer, error) {}
