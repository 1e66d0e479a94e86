package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Transport carries the gateway's upstream requests.
//
// Upstreams go through a small HTTP/1.1 client that writes the request
// and reads the answer on the caller's goroutine: net/http's Transport
// hands every request to a write goroutine and every answer back from a
// read goroutine, two goroutine wake-ups per request that cost about a
// fifth of the gateway's CPU under load, and it writes a request's headers
// and body in two system calls where this client uses one. HTTPS
// upstreams (the providers' APIs) use it too, over TLS with ALPN
// "http/1.1" and resumed sessions, unless SetHTTP2 sends them through
// net/http (HTTP/2 where the server offers it). Every upstream reached
// through a proxy from HTTP_PROXY and friends goes through net/http.
//
// The HTTP/1.1 client keeps idle connections per host, newest first. Before
// a connection is reused it is checked, with one non-blocking peek, for a
// close by the server, so a server's keep-alive timeout does not fail a
// request. A request whose write to a reused connection fails is sent once
// more (nothing reached the server), unless the server answered before it
// closed (an early 413 or 401 is relayed as net/http does); one whose
// answer fails after the write is not, since the server may have acted on
// it.
//
// The HTTP/1.1 client runs where its liveness peek compiles (Linux, macOS
// and the BSDs: h1_peek.go); elsewhere (Windows) every upstream goes
// through net/http.
type Transport struct {
	fallback *http.Transport
	dialer   net.Dialer

	// tlsConfig is the base TLS configuration of HTTPS upstreams (nil:
	// the system roots); sessions resumes their TLS sessions. http2 sends
	// HTTPS through net/http instead.
	tlsConfig *tls.Config
	sessions  tls.ClientSessionCache
	http2     bool

	// MaxIdlePerHost bounds the idle connections kept per host; default
	// 1024. IdleTimeout closes connections idle longer; default 90s.
	maxIdlePerHost int
	idleTimeout    time.Duration

	pools    sync.Map // URL host -> *h1Pool, plain HTTP
	tlsPools sync.Map // URL host -> *h1Pool, HTTPS
}

// SetTLSClientConfig sets the TLS configuration of HTTPS upstreams (roots,
// client certificates); the client sets the server name and ALPN itself.
// Call it before the first request.
func (t *Transport) SetTLSClientConfig(c *tls.Config) {
	t.tlsConfig = c.Clone()
	t.fallback.TLSClientConfig = c.Clone()
}

// SetHTTP2 sends HTTPS upstreams through net/http, which speaks HTTP/2 to
// servers that offer it. Call it before the first request.
func (t *Transport) SetHTTP2(on bool) { t.http2 = on }

// tlsHandshakeTimeout bounds a TLS handshake with an upstream.
const tlsHandshakeTimeout = 10 * time.Second

// NewTransport returns the transport tuned for upstream LLM APIs: many idle
// connections per host, no transparent compression, dial timeouts.
func NewTransport() *Transport {
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &Transport{
		fallback: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           d.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          4096,
			MaxIdleConnsPerHost:   1024,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			DisableCompression:    true,
		},
		dialer:         d,
		sessions:       tls.NewLRUClientSessionCache(1024),
		maxIdlePerHost: 1024,
		idleTimeout:    90 * time.Second,
	}
}

// CloseIdleConnections closes every idle upstream connection.
func (t *Transport) CloseIdleConnections() {
	t.fallback.CloseIdleConnections()
	for _, m := range []*sync.Map{&t.pools, &t.tlsPools} {
		m.Range(func(_, v any) bool {
			v.(*h1Pool).closeIdle()
			return true
		})
	}
}

// maxResponseHeaderBytes bounds an upstream answer's status line and headers.
const maxResponseHeaderBytes = 1 << 20

// maxRequestBytes bounds what the client buffers of a request body it did
// not build itself (the gateway's own bodies are bounded by MaxBodyBytes).
const maxRequestBytes = 256 << 20

var errUpstreamHeaderTooLarge = errors.New("upstream response headers exceed 1 MiB")

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !fastClient || req.URL == nil || req.URL.Host == "" || (req.URL.Scheme != "http" && (req.URL.Scheme != "https" || t.http2)) {
		return t.fallback.RoundTrip(req)
	}
	p := t.pool(req)
	if p.proxied {
		return t.fallback.RoundTrip(req)
	}
	if !req.Close && connectionClose(req.Header["Connection"]) {
		r2 := *req // a RoundTripper must not change the caller's request
		r2.Close = true
		req = &r2
	}
	ctx := req.Context()
	wire := getBufFor(wireSize(req))
	out, err := appendRequest(wire.b[:0], req)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	wire.b = out
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		putBuf(wire)
		return nil, err
	}
	return t.send(ctx, p, req, wire)
}

// send sends the request (wire holds it whole, and goes back to its pool
// once written) on an idle connection of p or a new one, once more on
// another connection if a reused one turns out closed.
func (t *Transport) send(ctx context.Context, p *h1Pool, req *http.Request, wire *buffer) (*http.Response, error) {
	for retried := false; ; retried = true {
		c, reused, err := p.get(ctx, t)
		if err != nil {
			putBuf(wire)
			return nil, err
		}
		resp, err, again := c.roundTrip(ctx, req, wire)
		if err == nil {
			return resp, nil
		}
		if again && reused && !retried && ctx.Err() == nil {
			continue // the server had closed the idle connection: nothing reached it; send again
		}
		if again {
			putBuf(wire) // not sent, not to be sent again
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
}

// connectionClose reports whether Connection header values ask to close.
func connectionClose(vs []string) bool {
	for _, v := range vs {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "close") {
				return true
			}
		}
	}
	return false
}

// pool returns the pool of req's scheme and host, deciding once per host
// whether a proxy from the environment applies.
func (t *Transport) pool(req *http.Request) *h1Pool {
	pools, port := &t.pools, "80"
	if req.URL.Scheme == "https" {
		pools, port = &t.tlsPools, "443"
	}
	if v, ok := pools.Load(req.URL.Host); ok {
		return v.(*h1Pool)
	}
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), port)
	}
	p := &h1Pool{addr: addr, max: t.maxIdlePerHost, idleTimeout: t.idleTimeout}
	if req.URL.Scheme == "https" {
		cfg := t.tlsConfig.Clone()
		if cfg == nil {
			cfg = &tls.Config{}
		}
		cfg.ServerName = req.URL.Hostname()
		cfg.NextProtos = []string{"http/1.1"}
		if cfg.ClientSessionCache == nil {
			cfg.ClientSessionCache = t.sessions
		}
		p.tls = cfg
	}
	if u, err := http.ProxyFromEnvironment(req); err != nil || u != nil {
		p.proxied = true
	}
	v, _ := pools.LoadOrStore(req.URL.Host, p)
	return v.(*h1Pool)
}

// appendRequest appends req in HTTP/1.1 wire format, body included.
func appendRequest(b []byte, req *http.Request) ([]byte, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	uri := req.URL.RequestURI()
	if !validHeaderValue(method) || !validHeaderValue(host) || !validHeaderValue(uri) {
		return b, errors.New("invalid upstream request line")
	}
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	if _, ok := req.Header["User-Agent"]; !ok {
		b = append(b, "User-Agent: Go-http-client/1.1\r\n"...)
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Trailer":
			continue // the client writes these itself
		}
		if !validHeaderName(k) {
			return b, fmt.Errorf("invalid upstream header name %q", k)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return b, fmt.Errorf("invalid value of upstream header %q", k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	var body []byte
	switch br := req.Body.(type) {
	case nil:
	case *bodyReader:
		body = br.buf.b // the gateway's own pooled body: no copy
	default:
		if req.Body != http.NoBody {
			data, err := readAll(req.Body, nil, maxRequestBytes)
			if err != nil {
				return b, fmt.Errorf("read upstream request body: %w", err)
			}
			body = data
		}
	}
	if body != nil || (method != http.MethodGet && method != http.MethodHead) {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...), nil
}

// wireSize is room enough for req in wire format, most often: its body
// and 1 KiB of headers (8 KiB when the body's size is not known).
func wireSize(req *http.Request) int {
	if req.ContentLength < 0 || req.ContentLength > 1<<maxBufShift || req.ContentLength == 0 && req.Body != nil && req.Body != http.NoBody {
		return 0
	}
	return int(req.ContentLength) + 1<<10
}

// validHeaderName reports whether k is an HTTP token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || c == ':' || c == '(' || c == ')' || c == ',' || c == '/' ||
			c == ';' || c == '<' || c == '=' || c == '>' || c == '?' || c == '@' || c == '[' ||
			c == '\\' || c == ']' || c == '{' || c == '}' || c == '"' {
			return false
		}
	}
	return true
}

// validHeaderValue refuses what would split a line: CR, LF, NUL.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

// h1Pool holds one host's idle connections, newest last.
type h1Pool struct {
	addr        string
	tls         *tls.Config // HTTPS: the connections speak TLS
	proxied     bool
	max         int
	idleTimeout time.Duration

	mu      sync.Mutex
	idle    []*h1Conn
	pruning bool // a prune is scheduled
}

func (p *h1Pool) get(ctx context.Context, t *Transport) (c *h1Conn, reused bool, err error) {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		c = p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if time.Since(c.idleAt) < p.idleTimeout && c.alive() {
			return c, true, nil
		}
		c.close()
	}
	nc, err := t.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, false, err
	}
	if p.tls != nil {
		tc := tls.Client(nc, p.tls)
		hctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, false, err
		}
		nc = tc
	}
	return newH1Conn(p, nc), false, nil
}

func (p *h1Pool) put(c *h1Conn) {
	if c.br.Buffered() > 0 || !c.tlsClean() { // bytes nobody asked for: not a clean connection
		c.close()
		return
	}
	c.detachReader()
	c.idleAt = time.Now()
	p.mu.Lock()
	if len(p.idle) >= p.max {
		p.mu.Unlock()
		c.close()
		return
	}
	p.idle = append(p.idle, c)
	schedule := !p.pruning
	p.pruning = true
	p.mu.Unlock()
	if schedule {
		time.AfterFunc(p.idleTimeout, p.prune)
	}
}

// prune closes the connections idle longer than the idle timeout (the
// oldest are first), and runs again while any stay idle.
func (p *h1Pool) prune() {
	now := time.Now()
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].idleAt) >= p.idleTimeout {
		n++
	}
	old := append([]*h1Conn(nil), p.idle[:n]...)
	k := copy(p.idle, p.idle[n:])
	clear(p.idle[k:])
	p.idle = p.idle[:k]
	next := p.idleTimeout
	if k > 0 {
		next = p.idleTimeout - now.Sub(p.idle[0].idleAt)
	}
	p.pruning = k > 0
	p.mu.Unlock()
	for _, c := range old {
		c.close()
	}
	if k > 0 {
		time.AfterFunc(max(next, time.Second), p.prune)
	}
}

func (p *h1Pool) closeIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// h1Conn is one upstream connection. Its reader enforces a byte limit while
// the headers of an answer are read.
type h1Conn struct {
	pool   *h1Pool
	nc     net.Conn
	br     *bufio.Reader
	limit  int64 // bytes the reader may still return; <0: unlimited
	idleAt time.Time

	interrupt func() // sets a deadline in the past: unblocks reads and writes
	raw       syscall.RawConn
	peek      func(fd uintptr) bool
	peekN     int
	peekErr   error
	peekBuf   [1]byte

	// await is called by raw.Read while an exchange waits for its answer
	// (awaitAnswer); rawFD is the socket Read reads while it runs, else -1;
	// awaitErr is what it met other than an empty socket.
	await    func(fd uintptr) bool
	rawFD    int
	awaitErr error
}

var aLongTimeAgo = time.Unix(1, 0)

func newH1Conn(p *h1Pool, nc net.Conn) *h1Conn {
	c := &h1Conn{pool: p, nc: nc, limit: -1, rawFD: -1}
	c.interrupt = func() { _ = nc.SetDeadline(aLongTimeAgo) }
	// The liveness peek looks at the TCP connection: under TLS any byte
	// while idle (a close_notify, most likely) means "do not reuse".
	raw := nc
	c.await = c.awaitPlainFD
	if tc, ok := nc.(*tls.Conn); ok {
		raw = tc.NetConn()
		c.await = c.awaitTLSFD
	}
	if sc, ok := raw.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
			c.peek = c.peekFD
		}
	}
	return c
}

// awaitAnswer parks the exchange until the answer's first bytes are in the
// socket, the server closed, or the exchange was interrupted, and holds no
// read buffer meanwhile: the buffer is taken only to try a non-blocking
// read, and given back when the socket had nothing (awaitPlainFD). So a
// request in flight to an upstream that thinks for seconds holds no
// 16 KiB, at no extra system call: the read that finds the socket empty
// is the one the blocking read would have made. A plain connection has
// the first bytes in its buffer when it returns; over TLS the socket is
// only peeked at (awaitTLSFD), and the TLS layer reads them.
func (c *h1Conn) awaitAnswer() error {
	if c.raw == nil {
		return nil
	}
	c.awaitErr = nil
	if err := c.raw.Read(c.await); err != nil {
		return c.readError(err)
	}
	return c.awaitErr
}

// readError wraps an error of a read as net.Conn's Read does.
func (c *h1Conn) readError(err error) error {
	if err == io.EOF {
		return err
	}
	return &net.OpError{Op: "read", Net: "tcp", Source: c.nc.LocalAddr(), Addr: c.nc.RemoteAddr(), Err: err}
}

// upstreamReadBuffer is the size of a connection's read buffer while it
// carries an exchange. A stream's events that are already in the socket
// when the gateway reads come in one system call, up to 16 KiB (the
// buffer of HAProxy, tune.bufsize); net/http's 4 KiB took one read per
// 4 KiB behind a fast upstream.
const upstreamReadBuffer = 16 << 10

// connReaderPool holds the read buffers of connections: a connection has
// one only while it carries an exchange, not while it is idle.
var connReaderPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, upstreamReadBuffer) }}

// attachReader gives the connection a read buffer for an exchange.
func (c *h1Conn) attachReader() {
	if c.br == nil {
		c.br = connReaderPool.Get().(*bufio.Reader)
		c.br.Reset(c)
	}
}

// detachReader gives an empty read buffer back to the pool as the
// connection goes idle.
func (c *h1Conn) detachReader() {
	c.br.Reset(nil)
	connReaderPool.Put(c.br)
	c.br = nil
}

func (c *h1Conn) Read(p []byte) (int, error) {
	if c.limit >= 0 {
		if c.limit == 0 {
			return 0, errUpstreamHeaderTooLarge
		}
		if int64(len(p)) > c.limit {
			p = p[:c.limit]
		}
	}
	var n int
	var err error
	if c.rawFD >= 0 {
		n, err = c.readFD(p)
	} else {
		n, err = c.nc.Read(p)
	}
	if c.limit >= 0 {
		c.limit -= int64(n)
	}
	return n, err
}

// alive reports whether an idle connection is still open and silent, with
// one non-blocking peek.
func (c *h1Conn) alive() bool {
	if c.raw == nil {
		return true
	}
	if err := c.raw.Read(c.peek); err != nil {
		return false
	}
	return wouldBlock(c.peekErr) // nil: the server closed (0) or sent bytes unasked
}

func (c *h1Conn) close() { _ = c.nc.Close() }

// tlsClean reports whether a TLS connection holds nothing unread: no
// record (an unasked answer, a close_notify) already taken off the socket
// into the TLS layer, where neither the bufio.Reader nor the socket peek
// sees it. A read with a deadline in the past returns what the TLS layer
// holds, or a timeout without a system call; a timeout leaves the
// connection usable. Plain connections are clean.
func (c *h1Conn) tlsClean() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	if tc.SetReadDeadline(aLongTimeAgo) != nil {
		return false
	}
	n, err := tc.Read(c.peekBuf[:])
	var ne net.Error
	if n > 0 || !errors.As(err, &ne) || !ne.Timeout() {
		return false
	}
	return tc.SetReadDeadline(time.Time{}) == nil
}

// roundTrip writes the request (wire holds it whole) and reads the answer's
// headers. Once the request is written, wire goes back to its pool, and
// the connection waits for the answer's first bytes without a read buffer
// (awaitAnswer): an upstream that thinks for seconds holds neither. again
// reports a write that failed on a connection the server had closed: the
// request may be sent again, and only then the caller still owns wire.
func (c *h1Conn) roundTrip(ctx context.Context, req *http.Request, wire *buffer) (resp *http.Response, err error, again bool) {
	stop := afterFunc(ctx, c.interrupt)
	c.limit = maxResponseHeaderBytes
	if _, err := c.nc.Write(wire.b); err != nil {
		resp, err, again := c.writeFailed(req, stop, err)
		if !again {
			putBuf(wire)
		}
		return resp, err, again
	}
	putBuf(wire)
	if err := c.awaitAnswer(); err != nil {
		stop.stop()
		c.close()
		return nil, err, false
	}
	c.attachReader()
	if _, err := c.br.Peek(1); err != nil {
		// The server may have read the request: never sent again (as
		// net/http does for a POST).
		stop.stop()
		c.close()
		return nil, err, false
	}
	for {
		resp, err = http.ReadResponse(c.br, req)
		if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
			err = errors.New("upstream switched protocols")
		}
		if err != nil {
			if c.limit == 0 {
				err = errUpstreamHeaderTooLarge
			}
			stop.stop()
			c.close()
			return nil, err, false
		}
		if resp.StatusCode >= 200 || resp.StatusCode < 100 {
			break
		}
		// 1xx: informational, no body; the answer follows.
	}
	c.limit = -1
	b := &h1Body{c: c, body: resp.Body, stop: stop, keep: !resp.Close && !req.Close}
	if resp.Body == http.NoBody {
		b.release(true, io.EOF)
		return resp, nil, false
	}
	resp.Body = b
	return resp, nil, false
}

// writeFailed ends an exchange whose request could not be written. The
// server may have answered, and closed, before reading the whole request:
// its answer is still in the receive buffer.
func (c *h1Conn) writeFailed(req *http.Request, stop interruptStopper, err error) (*http.Response, error, bool) {
	if closedByPeer(err) {
		c.attachReader()
		if resp, rerr := http.ReadResponse(c.br, req); rerr == nil && resp.StatusCode >= 200 {
			c.limit = -1
			resp.Close = true
			b := &h1Body{c: c, body: resp.Body, stop: stop}
			if resp.Body == http.NoBody {
				b.release(false, io.EOF)
			} else {
				resp.Body = b
			}
			return resp, nil, false
		}
	}
	stop.stop()
	c.close()
	return nil, err, closedByPeer(err)
}

// closedByPeer reports an error of a connection the server had closed.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// h1Body is an answer's body. Read to its end, it gives the connection back
// to its pool; closed before, it closes the connection.
type h1Body struct {
	c    *h1Conn
	body io.ReadCloser
	stop interruptStopper
	keep bool

	mu       sync.Mutex
	released bool
	err      error // after release: what Read returns
}

var errBodyClosed = errors.New("read on a closed upstream body")

func (b *h1Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.released {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	b.mu.Unlock()
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.release(true, io.EOF)
	} else if err != nil {
		b.release(false, err)
	}
	return n, err
}

func (b *h1Body) Close() error {
	b.release(false, errBodyClosed)
	return nil
}

// release ends the body's use of the connection (once): back to the pool
// if reuse and nothing interrupted it, else closed.
func (b *h1Body) release(reuse bool, err error) {
	b.mu.Lock()
	if b.released {
		b.mu.Unlock()
		return
	}
	b.released, b.err = true, err
	b.mu.Unlock()
	c := b.c
	if !b.stop.stop() { // the context ended: its deadline may be set
		reuse = false
	}
	if reuse && b.keep {
		c.pool.put(c)
	} else {
		c.close()
	}
}
