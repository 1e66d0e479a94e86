package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestAdminAPIRefusesPlaintextBeyondLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr          string
		tls, insecure bool
		ok            bool
	}{
		{"127.0.0.1:4100", false, false, true},
		{"localhost:4100", false, false, true},
		{"[::1]:4100", false, false, true},
		{":4100", false, false, false},
		{"0.0.0.0:4100", false, false, false},
		{"10.0.0.5:4100", false, false, false},
		{"node-1.internal:4100", false, false, false},
		{":4100", true, false, true},
		{":4100", false, true, true},
	} {
		err := checkAdminListen(tc.addr, tc.tls, tc.insecure)
		if (err == nil) != tc.ok {
			t.Errorf("%s tls=%v insecure=%v: %v", tc.addr, tc.tls, tc.insecure, err)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"--admin-addr", ":4100", "--data-dir", t.TempDir()}, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "beyond loopback without TLS") || !strings.Contains(stderr.String(), "--admin-insecure") {
		t.Errorf("run with a plaintext admin API on every interface: exit %d, %q", code, stderr.String())
	}
}
