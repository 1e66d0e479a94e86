package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// httpExporter sends spans over OTLP/HTTP (protobuf) with net/http, as
// the upstream otlptracehttp client does and configured by the same
// OTEL_EXPORTER_OTLP_* variables, but from request bytes the span queue
// has already written (post): the upstream client's proto.Marshal copied
// every span once more into a new buffer per batch, about 1.2 KB per
// traced request. It is also an otlptrace.Client (UploadTraces marshals,
// as the upstream one). One goroutine uses it at a time (the span
// queue's exporter): it reuses its compression buffer.
type httpExporter struct {
	url    string
	header http.Header
	gzip   bool
	client *http.Client
	retry  retryPolicy
	zw     *gzip.Writer
	zbuf   bytes.Buffer // the last compressed body, reused
}

var _ otlptrace.Client = (*httpExporter)(nil)

// httpConfig is what the OTEL_EXPORTER_OTLP_* variables ask of the HTTP
// exporter of traces.
type httpConfig struct {
	url     string
	header  http.Header
	gzip    bool
	timeout time.Duration
	tls     *tls.Config
}

// maxResponseBytes bounds a receiver's answer read (as upstream).
const maxResponseBytes = 4 << 20

// httpConfigFrom reads the variables as the upstream client does: a
// signal's own variable (OTEL_EXPORTER_OTLP_TRACES_*) over the general
// one; the general endpoint gets /v1/traces appended, the signal's is
// used as is; the scheme http means no TLS, unless _INSECURE says
// otherwise. A bad value is left out and reported: a signal's endpoint,
// timeout or certificates that cannot be used leave the general ones in
// effect.
func httpConfigFrom(getenv func(string) string, readFile func(string) ([]byte, error)) (httpConfig, error) {
	c := httpConfig{timeout: 10 * time.Second, header: http.Header{}}
	var errs []error
	env := func(name string) (string, bool) { // the signal's if set
		for _, v := range otlpVars(getenv, name) {
			if v != "" {
				return v, true
			}
		}
		return "", false
	}
	insecure, err := c.setURL(getenv)
	errs = append(errs, err)
	if v, ok := env("INSECURE"); ok {
		insecure = strings.EqualFold(v, "true")
	}
	if u, err := url.Parse(c.url); err == nil {
		u.Scheme = map[bool]string{true: "http", false: "https"}[insecure]
		c.url = u.String()
	}
	if v, ok := env("HEADERS"); ok {
		errs = append(errs, parseHeaders(v, c.header))
	}
	v, _ := env("COMPRESSION")
	c.gzip = v == "gzip"
	for _, v := range otlpVars(getenv, "TIMEOUT") {
		if ms, err := strconv.Atoi(v); err == nil {
			c.timeout = time.Duration(ms) * time.Millisecond
			break
		} else if v != "" {
			errs = append(errs, fmt.Errorf("OTLP timeout %q: %w", v, err))
		}
	}
	c.tls, err = tlsFrom(getenv, readFile)
	errs = append(errs, err)
	if insecure && c.tls != nil {
		errs = append(errs, errors.New("an insecure OTLP endpoint cannot use TLS certificates: left out"))
		c.tls = nil
	}
	return c, errors.Join(errs...)
}

// setURL sets the traces' URL from the endpoint variables and returns
// whether its scheme asks for no TLS.
func (c *httpConfig) setURL(getenv func(string) string) (insecure bool, err error) {
	u, signal := &url.URL{Host: "localhost:4318"}, false
	var errs []error
	for i, raw := range otlpVars(getenv, "ENDPOINT") {
		if raw == "" {
			continue
		}
		p, perr := url.Parse(raw)
		if perr == nil {
			u, signal = p, i == 0
			break
		}
		var ue *url.Error
		if errors.As(perr, &ue) {
			perr = ue.Err // without the endpoint: its user info may be a password
		}
		errs = append(errs, fmt.Errorf("OTLP endpoint: %w", perr))
	}
	err = errors.Join(errs...)
	p := u.Path
	switch {
	case !signal:
		p = path.Join(u.Path, "/v1/traces")
	case p == "":
		p = "/"
	}
	s := strings.ToLower(u.Scheme)
	c.url = (&url.URL{Scheme: s, Host: u.Host, Path: p}).String()
	return s == "http" || s == "unix", err
}

// otlpVars is the values of the signal's variable
// OTEL_EXPORTER_OTLP_TRACES_name and of the general one
// OTEL_EXPORTER_OTLP_name, in that order ("" when not set).
func otlpVars(getenv func(string) string, name string) [2]string {
	return [2]string{strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_" + name)), strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name))}
}

// parseHeaders adds the headers of a variable's value (key=value,...;
// values URL-escaped) to h.
func parseHeaders(v string, h http.Header) error {
	var errs []error
	for pair := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsFunc(k, func(r rune) bool { return !isTokenChar(r) }) {
			errs = append(errs, errors.New("OTLP headers: an entry without a valid key=: left out"))
			continue
		}
		val, err := url.PathUnescape(val)
		if err != nil {
			errs = append(errs, fmt.Errorf("OTLP header %s: bad escape: left out", k)) // the value may be a secret
			continue
		}
		h.Set(k, strings.TrimSpace(val))
	}
	return errors.Join(errs...)
}

func isTokenChar(r rune) bool {
	return r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}

// tlsFrom is the TLS the _CERTIFICATE, _CLIENT_CERTIFICATE and
// _CLIENT_KEY variables ask for; nil when none is set. The client
// certificate and key are a pair: the signal's when both are set and
// usable, else the general ones.
func tlsFrom(getenv func(string) string, readFile func(string) ([]byte, error)) (*tls.Config, error) {
	c := &tls.Config{}
	var errs []error
	for _, f := range otlpVars(getenv, "CERTIFICATE") {
		if f == "" {
			continue
		}
		pem, err := readFile(f)
		if pool := x509.NewCertPool(); err == nil && pool.AppendCertsFromPEM(pem) {
			c.RootCAs = pool
			break
		}
		errs = append(errs, fmt.Errorf("OTLP certificate %s: not read or no PEM certificate in it", f))
	}
	certs, keys := otlpVars(getenv, "CLIENT_CERTIFICATE"), otlpVars(getenv, "CLIENT_KEY")
	for i, fc := range certs {
		if fc == "" || keys[i] == "" {
			continue
		}
		pair, err := keyPair(readFile, fc, keys[i])
		if err == nil {
			c.Certificates = []tls.Certificate{pair}
			break
		}
		errs = append(errs, fmt.Errorf("OTLP client certificate %s: not read or not a key pair", fc))
	}
	if c.RootCAs == nil && c.Certificates == nil {
		c = nil
	}
	return c, errors.Join(errs...)
}

func keyPair(readFile func(string) ([]byte, error), certFile, keyFile string) (tls.Certificate, error) {
	cert, err := readFile(certFile)
	key, kerr := readFile(keyFile)
	if err = errors.Join(err, kerr); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(cert, key)
}

// newHTTPExporter is the exporter of c, on a transport of its own (as
// the upstream client's: proxy from the environment, HTTP/2 when offered).
func newHTTPExporter(c httpConfig) *httpExporter {
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2: true, MaxIdleConns: 100, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second,
		ExpectContinueTimeout: time.Second, TLSClientConfig: c.tls}
	h := c.header.Clone()
	h.Set("User-Agent", "OTel OTLP Exporter Go/"+otlptrace.Version())
	h.Set("Content-Type", "application/x-protobuf")
	if c.gzip {
		h.Set("Content-Encoding", "gzip")
	}
	return &httpExporter{url: c.url, header: h, gzip: c.gzip, client: &http.Client{Transport: tr, Timeout: c.timeout},
		retry: defaultRetry}
}

// Start implements otlptrace.Client.
func (*httpExporter) Start(context.Context) error { return nil }

// Stop implements otlptrace.Client: idle connections are closed.
func (e *httpExporter) Stop(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}

// UploadTraces implements otlptrace.Client.
func (e *httpExporter) UploadTraces(ctx context.Context, rss []*tracepb.ResourceSpans) error {
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rss})
	if err != nil {
		return err
	}
	return e.post(ctx, b)
}

// post sends body, an ExportTraceServiceRequest, retrying as the upstream
// client does: after 429, 502, 503, 504 (waiting at least Retry-After)
// or a temporary network error. body is not kept.
func (e *httpExporter) post(ctx context.Context, body []byte) error {
	if e.gzip {
		if e.zw == nil {
			e.zw = gzip.NewWriter(&e.zbuf)
		}
		e.zbuf.Reset()
		e.zw.Reset(&e.zbuf)
		_, _ = e.zw.Write(body)
		if err := e.zw.Close(); err != nil {
			return err
		}
		body = e.zbuf.Bytes()
		defer func() {
			if e.zbuf.Cap() > maxKeptBuf {
				e.zbuf = bytes.Buffer{}
			}
		}()
	}
	return e.retry.do(ctx, func() (time.Duration, bool, error) { return e.postOnce(ctx, body) })
}

// postOnce sends body once; it returns whether a failure may be retried
// and after how long at least.
func (e *httpExporter) postOnce(ctx context.Context, body []byte) (throttle time.Duration, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, http.NoBody)
	if err != nil {
		return 0, false, err
	}
	// The transport may read body after Do returned, until it closes it
	// (its RoundTripper contract): body is lent, so wait for that.
	var open sync.WaitGroup
	defer open.Wait()
	if len(body) > 0 {
		req.Body, req.ContentLength = lentBody(body, &open), int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return lentBody(body, &open), nil }
	}
	req.Header = e.header.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		var ue *url.Error
		return 0, errors.As(err, &ue) && ue.Temporary(), err
	}
	defer func() { _ = resp.Body.Close() }()
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		if rerr != nil {
			return 0, false, rerr
		}
		return 0, false, partialSuccess(resp.Header.Get("Content-Type"), data)
	case code == http.StatusTooManyRequests, code == http.StatusBadGateway, code == http.StatusServiceUnavailable, code == http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After")), true, fmt.Errorf("OTLP receiver answered %s", resp.Status)
	}
	return 0, false, fmt.Errorf("failed to send to %s: %s (body: %s)", e.url, resp.Status, snippet(data))
}

// lentBody is a request body reading b that tells open when the
// transport closed it.
func lentBody(b []byte, open *sync.WaitGroup) io.ReadCloser {
	open.Add(1)
	r := &closedBody{}
	r.Reset(b)
	r.close = sync.OnceFunc(open.Done)
	return r
}

type closedBody struct {
	bytes.Reader
	close func()
}

func (b *closedBody) Close() error {
	b.close()
	return nil
}

// partialSuccess is the error a receiver's answer reports: spans it
// rejected, or a warning.
func partialSuccess(contentType string, data []byte) error {
	if len(data) == 0 || contentType != "application/x-protobuf" {
		return nil
	}
	var r coltracepb.ExportTraceServiceResponse
	if err := proto.Unmarshal(data, &r); err != nil {
		return err
	}
	if p := r.GetPartialSuccess(); p != nil && (p.GetRejectedSpans() != 0 || p.GetErrorMessage() != "") {
		return fmt.Errorf("OTLP partial success: %s (%d spans rejected)", p.GetErrorMessage(), p.GetRejectedSpans())
	}
	return nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b[:min(len(b), 512)]))
	if s == "" {
		return "(empty)"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// retryAfter is a Retry-After value (seconds or a date) as a duration.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, int64(time.Duration(1<<63-1)/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// retryPolicy is the upstream client's default retry: an exponential
// backoff from initial to at most maxWait (×1.5 each time, randomized by
// ±50%), for at most maxElapsed in all.
type retryPolicy struct {
	initial, maxWait, maxElapsed time.Duration
}

var defaultRetry = retryPolicy{initial: 5 * time.Second, maxWait: 30 * time.Second, maxElapsed: time.Minute}

// do runs try until it succeeds, fails for good, ctx ends or the policy's
// time is up.
func (p retryPolicy) do(ctx context.Context, try func() (time.Duration, bool, error)) error {
	start, wait := time.Now(), p.initial
	for {
		throttle, retry, err := try()
		if err == nil || !retry {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
		elapsed := time.Since(start)
		if elapsed > p.maxElapsed || elapsed+throttle > p.maxElapsed {
			return fmt.Errorf("max retry time elapsed: %w", err)
		}
		delay := max(throttle, time.Duration(float64(wait)*(0.5+rand.Float64())))
		wait = min(time.Duration(float64(wait)*1.5), p.maxWait)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %w", context.Cause(ctx), err)
		case <-t.C:
		}
	}
}
