package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate/tollgate/node/certs"
)

const tlsUsage = `Usage: tollgate tls <command> [flags]

Creates the certificates of a cluster's TLS: a cluster CA, then one
certificate per node, signed by the CA, that the node presents both as a
server and as a client. Keys are ECDSA P-256; key files get mode 0600.

Commands:
  ca     create the cluster CA: DIR/ca.pem and DIR/ca-key.pem
  cert   create a node certificate: DIR/NAME.pem and DIR/NAME-key.pem

Example:
  tollgate tls ca
  tollgate tls cert --name node-1 --host node-1.internal,10.0.0.11

Run tollgate tls <command> -h for the command's flags.
`

// maxDays bounds --days so the validity fits a time.Duration.
const maxDays = 36500

// runTLS runs "tollgate tls": args are the arguments after "tls".
func runTLS(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, tlsUsage)
		return 2
	}
	switch args[0] {
	case "ca":
		return runTLSCA(args[1:], stdout, stderr)
	case "cert":
		return runTLSCert(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, tlsUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "tollgate tls: unknown command %q\n\n", args[0])
		fmt.Fprint(stderr, tlsUsage)
		return 2
	}
}

func runTLSCA(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("tollgate tls ca", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprint(stderr, `Usage: tollgate tls ca [--dir DIR] [--days N] [--name CN]

Creates a self-signed cluster CA: DIR/ca.pem (the certificate, give it to
every node as --tls-ca) and DIR/ca-key.pem (its private key, mode 0600; keep
it off the nodes, it is needed only to issue certificates). Existing files
are not overwritten.

Flags:
`)
		fset.PrintDefaults()
	}
	dir := fset.String("dir", ".", "directory to write the files to (created if missing)")
	days := fset.Int("days", 3650, "days the CA is valid")
	name := fset.String("name", "Tollgate cluster CA", "common name of the CA certificate")
	if code, ok := parseTLSFlags(fset, args, stderr); !ok {
		return code
	}
	if *days < 1 || *days > maxDays {
		fmt.Fprintf(stderr, "tollgate tls: --days must be 1..%d\n", maxDays)
		return 2
	}
	if strings.TrimSpace(*name) == "" {
		fmt.Fprintln(stderr, "tollgate tls: --name must not be empty")
		return 2
	}
	certFile := filepath.Join(*dir, "ca.pem")
	keyFile := filepath.Join(*dir, "ca-key.pem")
	if err := refuseExisting(certFile, keyFile); err != nil {
		fmt.Fprintf(stderr, "tollgate tls: %v\n", err)
		return 1
	}
	ca, err := certs.NewCA(*name, time.Duration(*days)*24*time.Hour)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate tls: %v\n", err)
		return 1
	}
	if err := writePair(*dir, certFile, ca.CertPEM(), keyFile, ca.KeyPEM()); err != nil {
		fmt.Fprintf(stderr, "tollgate tls: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (CA certificate, valid until %s)\n", certFile, ca.Certificate().NotAfter.Format(time.DateOnly))
	fmt.Fprintf(stdout, "wrote %s (CA private key; keep it safe)\n", keyFile)
	fmt.Fprintf(stdout, "next: tollgate tls cert --name NODE --dir %s\n", *dir)
	return 0
}

func runTLSCert(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("tollgate tls cert", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprint(stderr, `Usage: tollgate tls cert --name NAME [--host H ...] [--dir DIR] [--days N] [--ca FILE] [--ca-key FILE]

Creates a node certificate signed by the cluster CA: DIR/NAME.pem and
DIR/NAME-key.pem (mode 0600). The certificate serves both as the node's
server certificate and as its client certificate towards other nodes. It
names NAME, localhost, 127.0.0.1 and every --host: list each host name and
IP address other nodes and clients reach this node by. It expires no later
than the CA. Existing files are not overwritten.

Flags:
`)
		fset.PrintDefaults()
	}
	var hosts hostList
	name := fset.String("name", "", "node name: the certificate's common name, a host name in it, and the file name (required)")
	fset.Var(&hosts, "host", "host name or IP address to put in the certificate; repeat it or separate several by commas")
	dir := fset.String("dir", ".", "directory to write the files to (created if missing)")
	days := fset.Int("days", 825, "days the certificate is valid")
	caFile := fset.String("ca", "", "CA certificate file (default DIR/ca.pem)")
	caKeyFile := fset.String("ca-key", "", "CA private key file (default DIR/ca-key.pem)")
	if code, ok := parseTLSFlags(fset, args, stderr); !ok {
		return code
	}
	*name = strings.TrimSpace(*name)
	if msg := certNameProblem(*name); msg != "" {
		fmt.Fprintln(stderr, "tollgate tls: "+msg)
		return 2
	}
	if *days < 1 || *days > maxDays {
		fmt.Fprintf(stderr, "tollgate tls: --days must be 1..%d\n", maxDays)
		return 2
	}
	if *caFile == "" {
		*caFile = filepath.Join(*dir, "ca.pem")
	}
	if *caKeyFile == "" {
		*caKeyFile = filepath.Join(*dir, "ca-key.pem")
	}
	certFile := filepath.Join(*dir, *name+".pem")
	keyFile := filepath.Join(*dir, *name+"-key.pem")
	if err := refuseExisting(certFile, keyFile); err != nil {
		fmt.Fprintf(stderr, "tollgate tls: %v\n", err)
		return 1
	}

	ca, err := readCA(*caFile, *caKeyFile)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate tls: %v\n", err)
		return 1
	}
	all := dedupe(append([]string{*name, "localhost", "127.0.0.1"}, hosts...))
	certPEM, keyPEM, err := ca.Issue(*name, all, time.Duration(*days)*24*time.Hour)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate tls: %v\n", err)
		return 1
	}
	if err := writePair(*dir, certFile, certPEM, keyFile, keyPEM); err != nil {
		fmt.Fprintf(stderr, "tollgate tls: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (certificate for %s%s)\n", certFile, strings.Join(all, ", "), validUntil(certPEM, ca))
	fmt.Fprintf(stdout, "wrote %s (private key)\n", keyFile)
	fmt.Fprintf(stdout, "node flags: --tls-cert %s --tls-key %s --tls-ca %s\n", certFile, keyFile, *caFile)
	return 0
}

// certNameProblem says what is wrong with a node name for tls cert, "" when nothing is.
func certNameProblem(name string) string {
	switch {
	case name == "":
		return "--name is required (see tollgate tls cert -h)"
	case strings.ContainsAny(name, `/\`) || name == "." || name == ".." || strings.HasPrefix(name, "-"):
		return fmt.Sprintf("--name %q must be a plain name such as node-1, usable as a file name", name)
	case name == "ca":
		return "--name ca would clash with the CA's files ca.pem and ca-key.pem; choose another name"
	}
	return ""
}

// readCA loads the CA that signs node certificates from its two files.
func readCA(caFile, caKeyFile string) (*certs.CA, error) {
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read the CA certificate (create a CA with tollgate tls ca, or give --ca): %w", err)
	}
	caKeyPEM, err := os.ReadFile(caKeyFile)
	if err != nil {
		return nil, fmt.Errorf("read the CA key (give --ca-key): %w", err)
	}
	ca, err := certs.LoadCA(caPEM, caKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("load CA %s / %s: %w", caFile, caKeyFile, err)
	}
	return ca, nil
}

// validUntil describes when a new certificate expires, for the message after tls cert.
func validUntil(certPEM []byte, ca *certs.CA) string {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return ""
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return ""
	}
	until := ", valid until " + cert.NotAfter.Format(time.DateOnly)
	if cert.NotAfter.Equal(ca.Certificate().NotAfter) {
		until += " when the CA expires"
	}
	return until
}

// parseTLSFlags parses a subcommand's flags. ok false means the command
// ends with code: 0 after -h, 2 after a usage error.
func parseTLSFlags(fset *flag.FlagSet, args []string, stderr io.Writer) (code int, ok bool) {
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate tls: unexpected argument %q (see %s -h)\n", fset.Arg(0), fset.Name())
		return 2, false
	}
	return 0, true
}

// hostList is a repeatable flag of comma-separated values.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }

func (h *hostList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		// "[::1]" is an IPv6 address in URL form.
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
			s = s[1 : len(s)-1]
		}
		if net.ParseIP(s) == nil && strings.ContainsAny(s, ":/[] ") {
			return fmt.Errorf("%q is not a host name or IP address (leave out ports and schemes)", s)
		}
		*h = append(*h, s)
	}
	return nil
}

// dedupe returns hosts without repeats, in their first order.
func dedupe(hosts []string) []string {
	seen := make(map[string]bool, len(hosts))
	out := hosts[:0]
	for _, h := range hosts {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// refuseExisting fails if any of files exists.
func refuseExisting(files ...string) error {
	var existing []string
	for _, f := range files {
		if _, err := os.Lstat(f); err == nil {
			existing = append(existing, f)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("check %s: %w", f, err)
		}
	}
	switch len(existing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s already exists and is not overwritten; remove it or choose another --dir", existing[0])
	default:
		return fmt.Errorf("%s already exist and are not overwritten; remove them or choose another --dir", strings.Join(existing, " and "))
	}
}

// writePair creates dir if missing and writes the certificate (mode 0644)
// and the key (mode 0600), neither over an existing file. If the second
// write fails, the first file is removed again.
func writePair(dir, certFile string, certPEM []byte, keyFile string, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	if err := writeNew(keyFile, keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeNew(certFile, certPEM, 0o644); err != nil {
		os.Remove(keyFile)
		return err
	}
	return nil
}

// writeNew writes data to a new file; it fails if the file exists.
func writeNew(name string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists; remove it or choose another --dir", name)
		}
		return fmt.Errorf("create %s: %w", name, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
