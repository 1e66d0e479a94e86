package main

import (
	"flag"
	"fmt"
	"net"
	"os"
)

// consoleOptions are the web console's flags.
type consoleOptions struct {
	addr string
	oidc oidcOptions
}

// defaultConsoleAddr is where the console listens unless told otherwise.
const defaultConsoleAddr = "127.0.0.1:4400"

func (c *consoleOptions) define(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "console-addr", envOr("TOLLGATE_CONSOLE_ADDR", defaultConsoleAddr), "listen address of the web console (log in with a user token, the admin token or single sign-on); empty: off. Over TLS with --tls-cert; beyond loopback only with TLS or --admin-insecure. When the default address is taken (another node on this machine) the node runs without a console [TOLLGATE_CONSOLE_ADDR]")
	c.oidc.define(fs)
}

// finish checks the console's flags and puts them into o.cfg.
func (c *consoleOptions) finish(o *options, fs *flag.FlagSet) error {
	cfg := &o.cfg.Console
	cfg.Addr = c.addr
	var err error
	if cfg.OIDC, err = c.oidc.config(c.addr); err != nil || c.addr == "" {
		return err
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "console-addr" })
	_, fromEnv := os.LookupEnv("TOLLGATE_CONSOLE_ADDR")
	cfg.Optional = c.addr == defaultConsoleAddr && !explicit && !fromEnv
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		return fmt.Errorf("bad --console-addr %q: %w", c.addr, err)
	}
	tls := o.cfg.TLSCert != "" && o.cfg.TLSKey != "" && o.cfg.TLSCA != ""
	if !tls && !o.adminInsecure && !loopbackHost(host) {
		return fmt.Errorf("--console-addr %q listens beyond loopback without TLS: tokens and session cookies would cross "+
			"the network in plaintext. Set --tls-cert, --tls-key and --tls-ca, listen on 127.0.0.1, or pass --admin-insecure "+
			"on a network you trust", c.addr)
	}
	return nil
}
