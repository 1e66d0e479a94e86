package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

func parseConsole(t *testing.T, args ...string) (*options, error) {
	t.Helper()
	fs := flag.NewFlagSet("tollgate", flag.ContinueOnError)
	var o options
	o.define(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &o, o.console.finish(&o, fs)
}

func TestConsoleAddrDefaultIsOptionalLoopback(t *testing.T) {
	if _, set := os.LookupEnv("TOLLGATE_CONSOLE_ADDR"); !set {
		o, err := parseConsole(t)
		if err != nil || o.cfg.Console.Addr != defaultConsoleAddr || !o.cfg.Console.Optional {
			t.Fatalf("default: %+v %v, want the optional default address", o.cfg.Console, err)
		}
	}
	t.Setenv("TOLLGATE_CONSOLE_ADDR", "")
	o, err := parseConsole(t, "--console-addr", "127.0.0.1:4400")
	if err != nil || o.cfg.Console.Addr != "127.0.0.1:4400" || o.cfg.Console.Optional {
		t.Fatalf("explicit default address: %+v %v (must not be optional)", o.cfg.Console, err)
	}
	o, err = parseConsole(t, "--console-addr", "")
	if err != nil || o.cfg.Console.Addr != "" {
		t.Fatalf("empty address: %+v %v", o.cfg.Console, err)
	}
}

func TestConsoleAddrBeyondLoopbackNeedsTLSOrInsecure(t *testing.T) {
	_, err := parseConsole(t, "--console-addr", ":4400")
	if err == nil || !strings.Contains(err.Error(), "beyond loopback") {
		t.Fatalf("console on every interface without TLS: %v", err)
	}
	if _, err := parseConsole(t, "--console-addr", "0.0.0.0:4400", "--admin-insecure"); err != nil {
		t.Fatalf("with --admin-insecure: %v", err)
	}
	var out bytes.Buffer
	if code := run([]string{"--console-addr", "0.0.0.0:1", "--data-dir", t.TempDir()}, &out); code != 2 {
		t.Fatalf("run: exit %d, want 2: %s", code, out.String())
	}
}

func TestOIDCFlags(t *testing.T) {
	t.Setenv("TOLLGATE_OIDC_CLIENT_SECRET", "s3cret")
	o, err := parseConsole(t, "--console-addr", "127.0.0.1:4400", "--oidc-issuer", "https://idp.example.com",
		"--oidc-client-id", "tg", "--oidc-role-map", "sre=operator,leads=team-admin:team_a")
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg.Console.OIDC
	if c == nil || c.ClientSecret != "s3cret" || c.RoleClaim != "groups" || len(c.Roles) != 2 || c.Roles[1].TeamID != "team_a" ||
		strings.Join(c.Scopes, " ") != "openid email profile groups" {
		t.Fatalf("OIDC config %+v", c)
	}
	for _, args := range [][]string{
		{"--oidc-issuer", "https://idp", "--oidc-client-id", "tg"},                                                     // no role map
		{"--oidc-issuer", "https://idp", "--oidc-role-map", "a=admin"},                                                 // no client id
		{"--oidc-issuer", "https://idp", "--oidc-client-id", "tg", "--oidc-role-map", "a=root"},                        // no such role
		{"--console-addr", "", "--oidc-issuer", "https://idp", "--oidc-client-id", "tg", "--oidc-role-map", "a=admin"}, // no console
	} {
		if _, err := parseConsole(t, args...); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
