package main

import (
	"fmt"
	"net"
)

// checkAdminListen refuses an admin API that would listen beyond loopback
// in plaintext: it carries the admin token, and provider credentials on
// their way in. TLS (--tls-cert, --tls-key, --tls-ca) or an explicit
// --admin-insecure lifts the refusal.
func checkAdminListen(addr string, tls, insecure bool) error {
	if tls || insecure {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad --admin-addr %q: %w", addr, err)
	}
	if loopbackHost(host) {
		return nil
	}
	return fmt.Errorf("--admin-addr %q listens beyond loopback without TLS: the admin token and provider "+
		"credentials would cross the network in plaintext. Set --tls-cert, --tls-key and --tls-ca, listen on "+
		"127.0.0.1, or pass --admin-insecure (TOLLGATE_ADMIN_INSECURE=true) on a network you trust", addr)
}

// loopbackHost reports whether host names only this machine's loopback:
// "localhost" or a loopback address ("" and 0.0.0.0 are every interface).
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
