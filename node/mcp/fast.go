package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fast path. For the sessionless protocol the SDK builds a server
// session, a JSON-RPC connection and its goroutines for every HTTP
// request, and decodes the body several times; that was most of the
// gateway's added latency (+0.7–1.3 ms per call). For a session it hands
// each request through its connection's goroutines and answers on an
// event stream. Plain single requests for the methods the gateway
// forwards itself (tools, prompts, resources) need none of it: the
// gateway checks them as the SDK would, answers them with the same
// handlers (Gateway.handle) and writes one JSON response. In a session
// (one of the requesting key's, see sessions.go) it also takes the
// client's notifications/cancelled for the calls it holds. Anything else
// — initialize, batches, other notifications, progress tokens (which need
// a stream), other methods, a request failing a check (the SDK then
// writes its own error), another key's or an unknown session — goes to
// the SDK's handlers unchanged.

// maxFastBody bounds the body the fast path reads, as the SDK's handlers
// bound theirs; larger requests are refused (413) rather than buffered
// (and forwarded to an upstream whose SDK would refuse them in turn).
const maxFastBody = sdk.DefaultMaxRequestBodyBytes

// sdkVersions are the protocol versions the SDK's server speaks.
var sdkVersions = sdk.SupportedProtocolVersions()

// fastRequest is a JSON-RPC request as the fast path reads it.
type fastRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// fastMeta is the part of a request's params the checks need.
type fastMeta struct {
	Meta map[string]json.RawMessage `json:"_meta"`
	Name string                     `json:"name"`
	URI  string                     `json:"uri"`
}

// serveFast answers r itself when it can and reports whether it did;
// when it did not, r's body is intact for the SDK. A request naming a
// session is answered only when the session is one of the key's (the SDK
// answers the others: 404, or 403 for another key's).
func (g *Gateway) serveFast(w http.ResponseWriter, r *http.Request, ti *auth.TokenInfo) bool {
	sid := r.Header.Get("Mcp-Session-Id")
	if r.Method != http.MethodPost || !fastAccepts(r) {
		return false
	}
	if sid == "" && r.Header.Get("Mcp-Protocol-Version") != statelessVersion || sid != "" && g.sessions.owner(sid) != ti.UserID {
		return false
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); sid != "" && v != "" && !slices.Contains(sdkVersions, v) {
		return false // the SDK refuses a version it does not speak (400)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFastBody))
	_ = r.Body.Close()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeHTTPError(w, http.StatusRequestEntityTooLarge, "The request body is larger than 4 MiB.")
			return true
		}
		writeHTTPError(w, http.StatusBadRequest, "Could not read the request body.")
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req *fastRequest
	if sid == "" {
		req = fastParse(r, body)
	} else if req = fastParseSession(body); req != nil && req.Method == "notifications/cancelled" {
		return g.fastCancel(w, sid, req)
	}
	if req == nil {
		return false
	}
	sreq := fastSDKRequest(req.Method, req.Params, &sdk.RequestExtra{TokenInfo: ti, Header: r.Header})
	if sreq == nil {
		return false
	}
	ctx := r.Context()
	if sid != "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer g.sessions.addCall(sid, string(req.ID), cancel)()
	}
	res, _, err := g.handle(ctx, scopeOf(r.URL.Path), sreq)
	g.writeFast(w, req.ID, res, err, sid == "")
	return true
}

// fastCancel cancels a fast-path call of the session (the client sent
// notifications/cancelled for it) and answers 202; a call the fast path
// does not hold is the SDK's to cancel.
func (g *Gateway) fastCancel(w http.ResponseWriter, sid string, req *fastRequest) bool {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(req.Params, &p) != nil || !g.sessions.cancelCall(sid, string(p.RequestID)) {
		return false
	}
	w.WriteHeader(http.StatusAccepted)
	return true
}

// fastAccepts reports whether the request is JSON and the client accepts
// a JSON answer (and, as the transport asks, an event stream).
func fastAccepts(r *http.Request) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	var jsonOK, streamOK bool
	for _, v := range r.Header.Values("Accept") {
		for _, tok := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(tok, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// fastParse returns the request and its params when it is one the fast
// path answers: a single call of a forwarded method whose _meta carries
// the header's protocol version and the client's capabilities, without a
// progress token, and whose Mcp-Method and Mcp-Name headers match it.
func fastParse(r *http.Request, body []byte) *fastRequest {
	req, m := fastCall(body)
	if req == nil || r.Header.Get("Mcp-Method") != req.Method {
		return nil
	}
	var version string
	if json.Unmarshal(m.Meta[sdk.MetaKeyProtocolVersion], &version) != nil || version != statelessVersion {
		return nil
	}
	if caps := m.Meta[sdk.MetaKeyClientCapabilities]; len(caps) == 0 || caps[0] != '{' {
		return nil
	}
	if info, ok := m.Meta[sdk.MetaKeyClientInfo]; ok && (len(info) == 0 || info[0] != '{') {
		return nil
	}
	switch req.Method {
	case "tools/call", "prompts/get":
		if m.Name == "" || r.Header.Get("Mcp-Name") != m.Name {
			return nil
		}
	case "resources/read":
		if m.URI == "" || r.Header.Get("Mcp-Name") != m.URI {
			return nil
		}
	}
	return req
}

// fastParseSession returns the request when it is one the fast path
// answers for a session: a single call without a progress token, or a
// notifications/cancelled.
func fastParseSession(body []byte) *fastRequest {
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '{' {
		var n fastRequest
		if json.Unmarshal(b, &n) == nil && n.JSONRPC == "2.0" && n.Method == "notifications/cancelled" && len(n.ID) == 0 {
			return &n
		}
	}
	req, _ := fastCall(body)
	return req
}

// fastCall decodes a single JSON-RPC call with params and without a
// progress token (progress needs an event stream); nil otherwise.
func fastCall(body []byte) (*fastRequest, *fastMeta) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, nil // batches go to the SDK
	}
	var req fastRequest
	if json.Unmarshal(body, &req) != nil || req.JSONRPC != "2.0" || !validID(req.ID) {
		return nil, nil
	}
	var m fastMeta
	if len(req.Params) == 0 || json.Unmarshal(req.Params, &m) != nil {
		return nil, nil
	}
	if _, ok := m.Meta["progressToken"]; ok {
		return nil, nil
	}
	return &req, &m
}

// validID reports whether a request id is a string or a number, the ids
// JSON-RPC allows (the SDK refuses the others).
func validID(id json.RawMessage) bool {
	return len(id) > 0 && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9')
}

// fastSDKRequest decodes params into the SDK's request for method, or
// returns nil for a method the fast path does not answer.
func fastSDKRequest(method string, params json.RawMessage, extra *sdk.RequestExtra) sdk.Request {
	switch method {
	case "tools/list":
		return decodeParams(params, func(p *sdk.ListToolsParams) sdk.Request { return &sdk.ListToolsRequest{Params: p, Extra: extra} })
	case "tools/call":
		return decodeParams(params, func(p *sdk.CallToolParamsRaw) sdk.Request { return &sdk.CallToolRequest{Params: p, Extra: extra} })
	case "prompts/list":
		return decodeParams(params, func(p *sdk.ListPromptsParams) sdk.Request { return &sdk.ListPromptsRequest{Params: p, Extra: extra} })
	case "prompts/get":
		return decodeParams(params, func(p *sdk.GetPromptParams) sdk.Request { return &sdk.GetPromptRequest{Params: p, Extra: extra} })
	case "resources/list":
		return decodeParams(params, func(p *sdk.ListResourcesParams) sdk.Request {
			return &sdk.ListResourcesRequest{Params: p, Extra: extra}
		})
	case "resources/templates/list":
		return decodeParams(params, func(p *sdk.ListResourceTemplatesParams) sdk.Request {
			return &sdk.ListResourceTemplatesRequest{Params: p, Extra: extra}
		})
	case "resources/read":
		return decodeParams(params, func(p *sdk.ReadResourceParams) sdk.Request { return &sdk.ReadResourceRequest{Params: p, Extra: extra} })
	}
	return nil
}

// decodeParams decodes params into a P and wraps it; nil if they do not
// decode.
func decodeParams[P any](params json.RawMessage, wrap func(*P) sdk.Request) sdk.Request {
	p := new(P)
	if json.Unmarshal(params, p) != nil {
		return nil
	}
	return wrap(p)
}

// writeFast writes the JSON-RPC response to the call id: the result
// (for the sessionless protocol marked complete and carrying the server's
// info, as it asks), or the error.
func (g *Gateway) writeFast(w http.ResponseWriter, id json.RawMessage, res sdk.Result, err error, sessionless bool) {
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  sdk.Result      `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: id}
	switch {
	case err == nil && res != nil:
		if sessionless {
			g.complete(res)
		}
		resp.Result = res
	case errors.As(err, &resp.Error):
	case errors.Is(err, context.Canceled):
		resp.Error = &jsonrpc.Error{Code: codeGateway, Message: "The request was cancelled."}
	default:
		resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
	}
	b, merr := json.Marshal(resp)
	if merr != nil {
		b, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
			"error": &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The result could not be encoded."}})
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// complete marks a result as the SDK's stateless server does for the
// sessionless protocol: resultType "complete" where the type has one, and
// the server's info in _meta.
func (g *Gateway) complete(res sdk.Result) {
	switch r := res.(type) {
	case *sdk.ListToolsResult:
		r.ResultType = "complete"
	case *sdk.ListPromptsResult:
		r.ResultType = "complete"
	case *sdk.ListResourcesResult:
		r.ResultType = "complete"
	case *sdk.ListResourceTemplatesResult:
		r.ResultType = "complete"
	}
	m := res.GetMeta()
	if m == nil {
		m = map[string]any{}
	} else {
		m = maps.Clone(m)
	}
	if _, ok := m[sdk.MetaKeyServerInfo]; !ok {
		m[sdk.MetaKeyServerInfo] = g.impl
	}
	res.SetMeta(m)
}
