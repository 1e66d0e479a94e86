package mcp

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionlessOnly serves s with the sessionless protocol only: requests of
// the older versions (initialize among them) are refused with 400.
func sessionlessOnly(s *sdk.Server) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") < statelessVersion {
			http.Error(w, "sessionless protocol only", http.StatusBadRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// An upstream that refuses the session protocol is dialed again with the
// sessionless one, and its tools are called.
func TestSessionlessOnlyUpstreamDialedWithSessionlessProtocol(t *testing.T) {
	up := newTestUpstreamServing(t, sessionlessOnly)
	e := &env{t: t, store: openStore(t), upstream: up}
	e.start(Config{})
	e.addServer("up", up.url)
	if sess, _ := e.gw.upstream("up").session(); sess.InitializeResult().ProtocolVersion != statelessVersion {
		t.Fatalf("upstream protocol %s", sess.InitializeResult().ProtocolVersion)
	}
	cs := e.connect("/mcp", e.addKey("k1", []string{"*"}, nil), "", nil)
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"}); err != nil {
		t.Fatal(err)
	}
}

// A sessionless upstream has no session that ends when it goes away: a
// call the transport could not deliver cools it down, like a broken
// session does.
func TestSessionlessUpstreamGoneIsCooledDown(t *testing.T) {
	up := newTestUpstreamServing(t, sessionlessOnly)
	e := &env{t: t, store: openStore(t), upstream: up}
	e.start(Config{})
	e.addServer("up", up.url)
	cs := e.connect("/mcp", e.addKey("k1", []string{"*"}, nil), "", nil)
	up.srv.CloseClientConnections()
	up.srv.Close()
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"}); !isRPCError(err, codeGateway) {
		t.Fatalf("call to a server that is gone: %v", err)
	}
	e.waitState("up", stateCooling)
	if r := e.waitRecords(1)[0]; r.GetOutcome() != outcomeUpstream {
		t.Fatalf("record %v", r)
	}
}

// A client told that a server is unavailable is not shown the server's
// error, which may quote its URL with a token in the query.
func TestUnavailableServerErrorHidesItsURL(t *testing.T) {
	up := newTestUpstreamServing(t, sessionlessOnly)
	e := &env{t: t, store: openStore(t), upstream: up}
	e.start(Config{})
	e.addServer("up", up.url+"?token=s3cret-in-query")
	cs := e.connect("/mcp", e.addKey("k1", []string{"*"}, nil), "", nil)
	up.srv.CloseClientConnections()
	up.srv.Close()
	for i := 0; i < 2; i++ { // the failing call, then one while cooling
		_, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "up__echo"})
		if !isRPCError(err, codeGateway) {
			t.Fatalf("call %d to a server that is gone: %v", i, err)
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "127.0.0.1") {
			t.Fatalf("call %d: the client sees the server's URL: %v", i, err)
		}
		e.waitState("up", stateCooling)
	}
}
