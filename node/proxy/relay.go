package proxy

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/routing/translate"
)

// One relay serves every stream the gateway answers: the OpenAI-wire and
// Responses pass-throughs (lineCodec), the Anthropic pass-through
// (anthropicCodec) and every translated stream (translatedCodec). The
// codec is what differs between them — how the upstream's events are
// read, how their usage is read, which event ends the stream properly,
// and how the client's events are written. Everything else is here, once:
// the first-token timeout, the client that went away, the upstream that
// broke mid-stream, when the record is committed, and when the client is
// flushed.

// streamCodec is one stream format's side of the relay.
type streamCodec interface {
	// next reads the upstream's next event: io.EOF at the end of the
	// stream, another error when it broke.
	next() error
	// refusal is, for the first event only, the error the upstream sent
	// in place of an answer (nil: the stream begins).
	refusal() *translate.Error
	// scan reads the current event's usage into rec, and reports whether
	// the event ends the stream properly: rec is committed before it goes
	// out.
	scan(rec *Record) (last bool)
	// write writes the current event to the client.
	write(w io.Writer) error
	// whole reports, at io.EOF, whether the stream ended properly.
	whole() bool
	// close writes what ends the client's stream, after the record.
	close(w io.Writer) error
	// fail writes the client format's error event for a stream that broke
	// (err), if the format has one.
	fail(w io.Writer, err error)
}

// upstreamStream is a stream answer to relay: its codec reads the
// upstream through io.fr and writes the client through io.cw.
type upstreamStream struct {
	io          *streamIO
	codec       streamCodec
	contentType []string
	status      int
}

// streamIO is the two ends of a relayed stream.
type streamIO struct {
	fr flushReader
	cw clientWriter
	bp *[]byte // the client's write buffer, from clientBufPool
}

// init sets the ends: body is the upstream's, w the client's. The
// client's write buffer comes from a pool: release gives it back.
func (s *streamIO) init(body io.Reader, w io.Writer) {
	s.fr.r, s.fr.cw = body, &s.cw
	s.cw.w = w
	s.bp = clientBufPool.Get().(*[]byte)
	s.cw.buf = (*s.bp)[:0]
}

// release gives the client's write buffer back to its pool.
func (s *streamIO) release() {
	if s.bp != nil {
		clientBufPool.Put(s.bp)
	}
	s.bp, s.cw.buf = nil, nil
}

// attemptClock is an attempt's timer (see Handler.deadline): it cancels
// the attempt when it fires, and timedOut says it did.
type attemptClock struct {
	timer    *time.Timer
	timedOut *atomic.Bool
}

// relay relays an upstream stream to the client, event by event. Nothing
// is written until the first event arrived: a stream that fails, or stays
// silent past the deployment's first-token timeout, is a failure, and
// another deployment may serve. Once the stream began, a stream that
// breaks (or ends without its proper end) is recorded as a 502 and the
// client's connection is aborted, so that it does not take the answer for
// whole. Every event is written as it arrives, and the client is flushed
// right before the gateway waits on the upstream: events that arrived
// together leave in one write, and none waits unflushed. The events that
// arrived with the stream's end leave with the response's end.
func (h *Handler) relay(w http.ResponseWriter, r *http.Request, rec *Record, d *raftstore.Deployment, clk attemptClock, s upstreamStream) *failure {
	if t := firstTokenTimeout(rec, d); t > 0 {
		clk.timer.Reset(t)
	}
	c := s.codec
	if err := c.next(); err != nil {
		return h.noFirstEvent(r, rec, d, clk, err)
	}
	if te := c.refusal(); te != nil {
		return upstreamFailure(te)
	}
	if !started(clk.timer, clk.timedOut) {
		return h.errNoFirstToken(rec, d)
	}
	startStream(w, rec, d, s.contentType, s.status)
	fr, cw := &s.io.fr, &s.io.cw
	fr.fl, _ = w.(http.Flusher)
	fr.started = true
	var err error
	for err == nil {
		if c.scan(rec) {
			h.commit(rec) // before the stream's last event reaches the client
		}
		if werr := c.write(cw); werr != nil || cw.err != nil {
			rec.Status = statusClientClosed
			return nil
		}
		err = c.next()
	}
	if cw.err != nil { // the client went away while being flushed
		rec.Status = statusClientClosed
		return nil
	}
	if errors.Is(err, io.EOF) && c.whole() {
		h.commit(rec) // before the stream's last events reach the client
		_ = c.close(cw)
		// Not flushed: the handler returns at once, and net/http sends
		// what is left with the response's end (the chunked body's last
		// chunk) in one write; a flush here cost a write of its own.
		cw.spill()
		return nil
	}
	h.broken(r, rec, d, c, cw, fr, err)
	return nil
}

// noFirstEvent is the failure of a stream that broke, ended or timed out
// before its first event; nil when the client went away.
func (h *Handler) noFirstEvent(r *http.Request, rec *Record, d *raftstore.Deployment, clk attemptClock, err error) *failure {
	if r.Context().Err() != nil {
		rec.Status = statusClientClosed
		return nil
	}
	if clk.timedOut.Load() {
		return h.errNoFirstToken(rec, d)
	}
	var te *translate.Error
	if errors.As(err, &te) {
		return upstreamFailure(te)
	}
	return errEndedEarly(d, err)
}

// broken ends a stream that began and then broke (err), or ended without
// its proper end (io.EOF): recorded as a 502, the client's format's error
// event written if it has one, and the client's connection aborted, so
// that it sees a truncated stream rather than one that ended cleanly.
// When the client went away first, it is recorded as such.
func (h *Handler) broken(r *http.Request, rec *Record, d *raftstore.Deployment, c streamCodec, cw *clientWriter, fr *flushReader, err error) {
	if r.Context().Err() != nil {
		rec.Status = statusClientClosed
		return
	}
	if errors.Is(err, io.EOF) {
		err = translate.BadResponse(d.Provider, "the stream ended before the answer was finished")
	}
	rec.Status = http.StatusBadGateway
	h.log.Warn("upstream stream broke", "request", rec.RequestID, "deployment", rec.Deployment, "err", err)
	h.commit(rec)
	c.fail(cw, err)
	_ = fr.flush()
	panic(http.ErrAbortHandler)
}

// clientWriter gathers what the codec writes for the client between two
// waits on the upstream, so that the events of one upstream read reach
// net/http as one write, and leave as one chunk, in one flush (one system
// call while it fits net/http's 4 KiB connection buffer). It remembers
// the first error writing to the client.
type clientWriter struct {
	w     io.Writer
	buf   []byte // written since the last spill; at most clientChunk
	dirty bool   // handed to w since the last flush
	err   error
}

// clientChunk bounds what the client writer gathers before it hands it to
// net/http: such a chunk, with its size line and CRLF, fits net/http's
// 4 KiB connection buffer on its own, so a flush of it is one system call
// (more only when the response's headers or an earlier piece share it).
const clientChunk = 4<<10 - 16

var clientBufPool = sync.Pool{New: func() any { b := make([]byte, 0, clientChunk); return &b }}

func (c *clientWriter) Write(p []byte) (int, error) {
	if len(c.buf)+len(p) > clientChunk {
		c.spill()
	}
	if c.err != nil {
		return 0, c.err
	}
	if len(p) > clientChunk {
		c.pass(p)
		return len(p), c.err
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

// spill hands what was gathered to net/http.
func (c *clientWriter) spill() {
	if len(c.buf) > 0 && c.err == nil {
		c.pass(c.buf)
	}
	c.buf = c.buf[:0]
}

func (c *clientWriter) pass(p []byte) {
	_, c.err = c.w.Write(p)
	c.dirty = true
}

// streamReadBuffer is the buffer a stream's codec reads the upstream
// through.
const streamReadBuffer = 16 << 10

// flushReader reads the upstream body of a stream. Its Read is called only
// when the buffer above it is empty, that is when the gateway is about to
// wait on the upstream: it first hands what was written since the last
// flush to the client, and flushes it. A client that went away ends the
// read with its error.
type flushReader struct {
	r       io.Reader
	cw      *clientWriter
	started bool         // the stream has started: what was written goes out
	fl      http.Flusher // nil: the client's writer cannot flush
}

func (f *flushReader) Read(p []byte) (int, error) {
	if err := f.flush(); err != nil {
		return 0, err
	}
	return f.r.Read(p)
}

func (f *flushReader) flush() error {
	if !f.started {
		return nil
	}
	f.cw.spill()
	if f.cw.dirty && f.cw.err == nil && f.fl != nil {
		f.fl.Flush()
		f.cw.dirty = false
	}
	return f.cw.err
}
