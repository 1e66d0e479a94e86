// Command fastproxy is the harness's floor for a Go proxy: a bare reverse
// proxy on github.com/valyala/fasthttp, its server in front of one
// fasthttp.HostClient to the upstream, with keep-alive both ways. It does
// no auth, no JSON and no bookkeeping. The upstream's answer is handed to
// the server as a body stream (the client's StreamResponseBody), so a
// chunked answer goes to the client one upstream chunk per write, as it
// arrives, and nothing buffers a whole stream.
package main

import (
	"errors"
	"flag"
	"log"
	"net"
	"strings"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	upstream := flag.String("upstream", "", "upstream base URL, e.g. http://127.0.0.1:4000")
	flag.Parse()
	host, err := upstreamHost(*upstream)
	if err != nil {
		log.Fatalf("fastproxy: %v", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("fastproxy: %v", err)
	}
	log.Fatal(newServer(host).Serve(ln))
}

// upstreamHost is the host:port of an http:// base URL (the proxy speaks
// plain HTTP/1.1 to its upstream and relays every path as it came).
func upstreamHost(base string) (string, error) {
	host, ok := strings.CutPrefix(base, "http://")
	host = strings.TrimRight(host, "/")
	if !ok || host == "" || strings.Contains(host, "/") {
		return "", errors.New("-upstream " + base + " is not http://host:port")
	}
	return host, nil
}

// newServer is the proxy: every request goes to upstream as it came, on a
// pooled keep-alive connection, and its answer comes back as a stream.
func newServer(upstream string) *fasthttp.Server {
	hc := &fasthttp.HostClient{
		Addr:                          upstream,
		MaxConns:                      8000, // as HAProxy's maxconn in the harness
		StreamResponseBody:            true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		NoDefaultUserAgentHeader:      true,
	}
	return &fasthttp.Server{
		Handler:                       func(ctx *fasthttp.RequestCtx) { relay(hc, ctx) },
		Name:                          "fastproxy",
		NoDefaultServerHeader:         true,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: true,
	}
}

// relay sends the client's request upstream and makes the upstream's
// answer the client's. The answer's body stays a stream: the server copies
// it out after relay returns (chunk by chunk, each write flushed, for a
// chunked answer) and then closes it, which returns the upstream
// connection to the pool.
func relay(hc *fasthttp.HostClient, ctx *fasthttp.RequestCtx) {
	req := &ctx.Request
	req.Header.Del("Connection") // hop-by-hop: each side keeps its own connection alive
	if err := hc.Do(req, &ctx.Response); err != nil {
		ctx.Response.Reset()
		ctx.SetStatusCode(fasthttp.StatusBadGateway)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"error":{"message":"fastproxy: upstream unreachable","type":"upstream_error"}}`)
		return
	}
	ctx.Response.Header.Del("Connection")
}
