package main

import (
	"errors"
	"testing"
)

func TestMcpAddFlagsBuildTheServer(t *testing.T) {
	a := &app{lookupEnv: func(k string) (string, bool) { return map[string]string{"GH": "Bearer gh-1"}[k], k == "GH" }}
	f := mcpAddFlags{url: "https://mcp.example/mcp", headers: []string{"X-A=1"}, headerEnv: []string{"Authorization=GH"},
		price: "0.002", timeout: "30s"}
	s, err := f.server(a, "gh")
	if err != nil {
		t.Fatal(err)
	}
	if s.GetTransport() != "http" || s.GetHeaders()["X-A"] != "1" || s.GetHeaders()["Authorization"] != "Bearer gh-1" ||
		s.GetPricePerCallNanos() != 2_000_000 || s.GetTimeoutMs() != 30_000 {
		t.Fatalf("server %v", s)
	}
	f = mcpAddFlags{stdio: "npx -y server-x /srv", env: []string{"TOKEN=t"}}
	if s, err = f.server(a, "x"); err != nil || s.GetTransport() != "stdio" || len(s.GetCommand()) != 4 || s.GetEnv()["TOKEN"] != "t" {
		t.Fatalf("stdio server %v %v", s, err)
	}
	for _, bad := range []mcpAddFlags{
		{},
		{url: "http://x", stdio: "y"},
		{url: "http://x", headerEnv: []string{"A=MISSING"}},
		{url: "http://x", timeout: "soon"},
		{url: "http://x", price: "-1"},
	} {
		var ue *usageError
		if _, err := bad.server(a, "x"); !errors.As(err, &ue) {
			t.Errorf("%+v: %v, want a usage error", bad, err)
		}
	}
}
