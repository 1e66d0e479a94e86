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
