package mcp

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// postSessionless posts one sessionless JSON-RPC request with the headers
// a client of 2026-07-28 sends, plus extra ones.
func postSessionless(t *testing.T, e *env, secret, body string, extra map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", statelessVersion)
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const sessionlessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// A plain sessionless tool call is answered by the gateway itself, with
// one JSON response carrying the server's info, and recorded.
func TestSessionlessCallAnsweredWithJSON(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"up__echo"}, nil)
	resp, body := postSessionless(t, e, secret,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up__echo","arguments":{"a":1},`+sessionlessMeta+`}}`,
		map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "up__echo"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var got struct {
		ID     int `json:"id"`
		Result struct {
			Meta    map[string]json.RawMessage `json:"_meta"`
			Content []struct{ Text string }    `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.ID != 7 || len(got.Result.Content) != 1 ||
		got.Result.Content[0].Text != `echo:{"a":1}` || !strings.Contains(string(got.Result.Meta["io.modelcontextprotocol/serverInfo"]), `"tollgate"`) {
		t.Fatalf("response %s (%v)", body, err)
	}
	if r := e.waitRecords(1)[0]; r.GetOutcome() != outcomeOK || r.GetMcpTool() != "echo" {
		t.Fatalf("record %v", r)
	}
}

// A refused sessionless call gets the JSON-RPC error, and its record.
func TestSessionlessRefusalAnsweredWithJSONRPCError(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"up__echo"}, nil)
	_, body := postSessionless(t, e, secret,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"up__fail",`+sessionlessMeta+`}}`,
		map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "up__fail"})
	if !strings.Contains(body, `"id":"x"`) || !strings.Contains(body, `"code":-32602`) || !strings.Contains(body, "not allowed for this key") {
		t.Fatalf("response %s", body)
	}
	if r := e.waitRecords(1)[0]; r.GetOutcome() != outcomeRefused {
		t.Fatalf("record %v", r)
	}
}

// Requests that fail the protocol's checks are left to the SDK, which
// refuses them in its own words: nothing is forwarded.
func TestSessionlessRequestFailingChecksLeftToSDK(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"*"}, nil)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo",` + sessionlessMeta + `}}`
	for name, tc := range map[string]struct {
		body    string
		headers map[string]string
	}{
		"name header differs":   {call, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "up__fail"}},
		"method header missing": {call, map[string]string{"Mcp-Name": "up__echo"}},
		"no capabilities": {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "up__echo"}},
	} {
		t.Run(name, func(t *testing.T) {
			resp, body := postSessionless(t, e, secret, tc.body, tc.headers)
			if resp.StatusCode == 200 && !strings.Contains(body, `"error"`) || strings.Contains(body, "echo:") {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
		})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.records) != 0 {
		t.Fatalf("records %v", e.records)
	}
}

// A request id must be a string or a number (JSON-RPC 2.0; the SDK
// refuses others with a parse error): a call with an object, array or
// boolean id is not answered by the fast path, and nothing is forwarded.
func TestSessionlessCallWithInvalidIDNotForwarded(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"*"}, nil)
	for _, id := range []string{`{"a":1}`, `[1]`, `true`, `false`} {
		t.Run(id, func(t *testing.T) {
			resp, body := postSessionless(t, e, secret,
				`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"up__echo",`+sessionlessMeta+`}}`,
				map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "up__echo"})
			if resp.StatusCode == 200 && !strings.Contains(body, `"error"`) || strings.Contains(body, "echo:") {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
		})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.records) != 0 {
		t.Fatalf("records %v", e.records)
	}
}

// The fast path takes bodies as large as the SDK's handlers do (4 MiB),
// no larger: a bigger call is refused with 413 like on the SDK's path,
// not forwarded to an upstream that refuses it in turn, which cooled the
// upstream down for every key.
func TestSessionlessCallLargerThanSDKLimitRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.addServer("up", e.upstream.url)
	secret := e.addKey("k1", []string{"*"}, nil)
	headers := map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "up__echo"}
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up__echo","arguments":{"a":"` +
		strings.Repeat("x", 5<<20) + `"},` + sessionlessMeta + `}}`
	if resp, body := postSessionless(t, e, secret, big, headers); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d: %.200s", resp.StatusCode, body)
	}
	_, body := postSessionless(t, e, secret,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"up__echo","arguments":{"a":1},`+sessionlessMeta+`}}`, headers)
	if !strings.Contains(body, `echo:{\"a\":1}`) {
		t.Fatalf("call after the large one: %s", body)
	}
}
