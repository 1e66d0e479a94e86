package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// An upstream's HTTP 4xx without a JSON-RPC answer (a proxy's 413 to a
// large argument, a WAF's 403 to one request) is that request's error,
// not the server's. Left alone, the SDK's client takes it as a broken
// transport: it ends the session, and the gateway put the server in
// cooldown for every key, so one key could take a server away from all.
// refusalTransport turns such an answer to a call into the JSON-RPC error
// the SDK hands back to that call alone (codeUpstreamRefused), keeping the
// session; forward (calls.go) answers it without a charge or a cooldown.
// The legacy SSE transport does not read its POSTs' answers and ends the
// session on any of them, failing every key's call in flight on it: there
// the refusal is the POST's error instead, one the SDK takes as that
// request's rejection (code codeRejected, which keeps the session), with
// the codeUpstreamRefused error first in its chain for forward to find.
// In a session, a refusal carrying the server's own JSON-RPC error becomes
// codeUpstreamRefused too (forward then asks whether the session is lost,
// sessionlost.go), and a 404 says the session is lost (codeSessionLost).
// A refused notification becomes 202 Accepted (accepted).

// codeUpstreamRefused is the JSON-RPC error code of a call the upstream
// refused at the HTTP level.
const codeUpstreamRefused = -32010

// maxRefusalBody bounds what is read of a refusal's body (it is dropped).
const maxRefusalBody = 64 << 10

// refusedByRequest reports whether an upstream's HTTP status refuses one
// request rather than saying the server (or the gateway's credential) is
// failing: a 4xx other than 401 and 407 (credentials), 404 (a session the
// server ended: sessionLost), 408 and 429 (the server is slow or busy: the
// SDK retries and the gateway cools).
func refusedByRequest(code int) bool {
	switch code {
	case http.StatusUnauthorized, http.StatusProxyAuthRequired, http.StatusNotFound,
		http.StatusRequestTimeout, http.StatusTooManyRequests:
		return false
	}
	return code >= 400 && code < 500
}

// refusalTransport rewrites an upstream's HTTP 4xx to a POST: to a
// JSON-RPC request (one with an id) into a JSON-RPC error answer to it, to
// a notification (or a response) into 202 Accepted.
type refusalTransport struct {
	base   http.RoundTripper
	server string
	sse    bool // the legacy SSE transport: refusals become errors
	log    *slog.Logger
}

func (t refusalTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.StatusCode < 400 || resp.StatusCode >= 500 || r.Method != http.MethodPost || r.GetBody == nil {
		return resp, err
	}
	id, isCall := requestID(r)
	if !isCall {
		return t.accepted(resp), nil
	}
	// A request of a session (the legacy SSE transport names its session
	// in the URL, and its server ends the stream when it forgets one).
	inSession := !t.sse && r.Header.Get(sessionHeader) != ""
	// In a session a 404 says the server lost it, and a 401 may (the Rust
	// SDK's): refused, then the ping and a new dial tell (one with a
	// credential the server refuses fails and cools).
	code := resp.StatusCode
	if !refusedByRequest(code) && !(inSession && (code == http.StatusUnauthorized || code == http.StatusNotFound)) {
		return resp, nil
	}
	if t.sse {
		discard(resp)
		return nil, fmt.Errorf("%w: %w", refusedError(t.server, code, ""), errRejectedByTransport)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRefusalBody))
	_ = resp.Body.Close()
	said, itself := "", false
	if msg, derr := jsonrpc.DecodeMessage(body); derr == nil {
		if res, ok := msg.(*jsonrpc.Response); ok && res.Error != nil {
			if !inSession { // the server's own JSON-RPC error (initialize: the SDK reads its code)
				resp.Body = io.NopCloser(bytes.NewReader(body))
				return resp, nil
			}
			said, itself = res.Error.Error(), res.ID == id
		}
	}
	// A 404 with the server's error answering this very request (a server
	// mapping "not found" to 404) is no lost session: the ping tells.
	if code == http.StatusNotFound && !itself {
		return answerWith(resp, id, sessionLostError(t.server))
	}
	return answerWith(resp, id, refusedError(t.server, code, said))
}

// accepted answers a refused notification (or response) 202 Accepted:
// there is nobody to tell, and the SDK's client would end the session on
// it, failing every key's calls through the server until it is dialed
// again. A session the server forgot is found by the next request.
func (t refusalTransport) accepted(resp *http.Response) *http.Response {
	discard(resp)
	if t.log != nil {
		t.log.Debug("mcp upstream refused a notification", "server", t.server, "status", resp.StatusCode)
	}
	resp.StatusCode, resp.Status = http.StatusAccepted, "202 Accepted"
	resp.Header = resp.Header.Clone()
	resp.Header.Del(sessionHeader)
	resp.Header.Del("Content-Type")
	resp.Header.Del("Content-Length")
	resp.Body, resp.ContentLength = http.NoBody, 0
	return resp
}

// sessionHeader names an HTTP request's MCP session.
const sessionHeader = "Mcp-Session-Id"

// discard reads at most maxRefusalBody of resp's body and closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxRefusalBody))
	_ = resp.Body.Close()
}

// answerWith replaces resp with the JSON-RPC error answer jerr to the
// request id; the SDK hands it to that request alone.
func answerWith(resp *http.Response, id jsonrpc.ID, jerr *jsonrpc.Error) (*http.Response, error) {
	answer, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: jerr})
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	resp.ContentLength = int64(len(answer))
	resp.Header = resp.Header.Clone()
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	return resp, nil
}

// errRejectedByTransport matches (errors.Is, by code) the SDK's own
// error for a request its transport rejected: the SDK then fails that
// request alone and keeps the session.
var errRejectedByTransport error = &jsonrpc.Error{Code: codeRejected, Message: "rejected by transport"}

// refusedError is a call's answer when its upstream refused it with HTTP
// status code, saying said (the server's own JSON-RPC error, if any).
func refusedError(server string, code int, said string) *jsonrpc.Error {
	msg := fmt.Sprintf("MCP server %s refused the request: HTTP %d %s.", server, code, http.StatusText(code))
	if said != "" {
		msg += " It said: " + sanitize(said)
	}
	return &jsonrpc.Error{Code: codeUpstreamRefused, Message: msg}
}

// requestID returns the id of the JSON-RPC request r carries, if it is a
// request and not a notification. It reads the message's members only up
// to its id and method, which the SDK writes before the params: the body
// is the SDK's copy in memory, and the gateway's copy of a client's
// request can be larger than the client's (a prompt argument of invalid
// UTF-8 grows threefold as U+FFFD), so reading it whole again would need
// a bound that such a request passes.
func requestID(r *http.Request) (jsonrpc.ID, bool) {
	rc, err := r.GetBody()
	if err != nil {
		return jsonrpc.ID{}, false
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return jsonrpc.ID{}, false
	}
	var id any
	var hasID, hasMethod bool
	for !(hasID && hasMethod) && dec.More() {
		k, err := dec.Token()
		if err != nil {
			return jsonrpc.ID{}, false
		}
		var v json.RawMessage
		switch k {
		case "id":
			err, hasID = dec.Decode(&id), true
		case "method":
			hasMethod = true
			err = dec.Decode(&v)
		default:
			err = dec.Decode(&v)
		}
		if err != nil {
			return jsonrpc.ID{}, false
		}
	}
	rid, err := jsonrpc.MakeID(id)
	if err != nil || !hasMethod || !rid.IsValid() {
		return jsonrpc.ID{}, false
	}
	return rid, true
}
