package node

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// clusterTLS holds the TLS configurations a node derives from its
// certificate, key and cluster CA. The files are read again when they
// change (reload), so certificates and the CA bundle roll without a
// restart; the configurations below fetch the current material on every
// handshake.
type clusterTLS struct {
	certFile, keyFile, caFile string
	cur                       atomic.Pointer[tlsMaterial]
	mu                        sync.Mutex // serializes reload
	stamp                     string     // the files' hash at the last load

	// admin serves the admin gRPC API: a client certificate is verified if
	// one is given, since the admin token is what authenticates people and
	// scripts.
	admin *tls.Config
	// data serves the data plane with --http-tls.
	data *tls.Config
	// peerServer serves Raft: a peer must present a certificate the
	// cluster CA signed.
	peerServer *tls.Config
	// peerClient dials other nodes (Raft, and their admin API) with this
	// node's certificate, accepting a peer whose certificate the cluster CA
	// signed.
	peerClient *tls.Config
}

// tlsMaterial is one loading of the files, with the server
// configurations built from it.
type tlsMaterial struct {
	cert                    *tls.Certificate
	pool                    *x509.CertPool
	admin, data, peerServer *tls.Config
}

// loadClusterTLS reads the node's certificate, key and cluster CA. All
// three or none must be given.
func loadClusterTLS(certFile, keyFile, caFile string) (*clusterTLS, error) {
	if certFile == "" && keyFile == "" && caFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, errors.New("TLS needs all of --tls-cert, --tls-key and --tls-ca")
	}
	c := &clusterTLS{certFile: certFile, keyFile: keyFile, caFile: caFile}
	c.stamp = c.fileStamp()
	m, err := loadTLSMaterial(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	c.cur.Store(m)
	c.admin = &tls.Config{MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return c.cur.Load().admin, nil }}
	c.data = &tls.Config{MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return c.cur.Load().data, nil }}
	c.peerServer = &tls.Config{MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return c.cur.Load().peerServer, nil }}
	c.peerClient = &tls.Config{MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return c.cur.Load().cert, nil },
		// Peers are dialed at the addresses they gossip, which their
		// certificates need not name: membership in the cluster is proven
		// by a certificate the cluster's own CA signed, so the chain is
		// checked here instead of the host name.
		InsecureSkipVerify: true,
		VerifyConnection:   verifyPeer(func() *x509.CertPool { return c.cur.Load().pool })}
	return c, nil
}

// loadTLSMaterial reads and checks the files.
func loadTLSMaterial(certFile, keyFile, caFile string) (*tlsMaterial, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load --tls-cert %s / --tls-key %s: %w", certFile, keyFile, err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read --tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", caFile)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("parse --tls-cert: %w", err)
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	// A node presents its certificate as a server and as a client; Verify
	// accepts either usage of a list, so each is checked on its own.
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			return nil, fmt.Errorf("--tls-cert %s is not a server and client certificate of the cluster CA %s: %w", certFile, caFile, err)
		}
	}
	cert.Leaf = leaf
	certs := []tls.Certificate{cert}
	return &tlsMaterial{cert: &cert, pool: pool,
		// grpc needs h2 negotiated; a config returned by GetConfigForClient
		// is used as it is.
		admin: &tls.Config{Certificates: certs, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool,
			MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}},
		data:       &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
		peerServer: &tls.Config{Certificates: certs, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS13},
	}, nil
}

// fileStamp is a hash of the files' contents: a reissued key pair has the
// old sizes, and a copy may keep the old modification time.
func (c *clusterTLS) fileStamp() string {
	h := sha256.New()
	for _, f := range []string{c.certFile, c.keyFile, c.caFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			b = []byte("missing")
		}
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	return string(h.Sum(nil))
}

// reload reads the files again if they changed since the last load. It
// reports whether new material took effect; on an error the old material
// stays.
func (c *clusterTLS) reload() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stamp := c.fileStamp()
	if stamp == c.stamp {
		return false, nil
	}
	m, err := loadTLSMaterial(c.certFile, c.keyFile, c.caFile)
	if err != nil {
		return false, err
	}
	c.stamp = stamp
	c.cur.Store(m)
	return true, nil
}

// tlsReloadInterval is how often the TLS files are checked for changes.
const tlsReloadInterval = 30 * time.Second

// watchTLS reloads the TLS files when they change, until ctx ends.
func (n *Node) watchTLS(ctx context.Context) {
	t := time.NewTicker(orDefault(n.cfg.tlsReloadInterval, tlsReloadInterval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch ok, err := n.tls.reload(); {
		case err != nil:
			n.log.Error("TLS files changed but do not load; keeping the previous ones", "err", err)
		case ok:
			n.log.Info("reloaded the TLS certificate and CA", "cert", n.tls.certFile,
				"expires", n.tls.cur.Load().cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	}
}

// verifyPeer accepts a connection whose peer certificate chains to the
// cluster CA and may act as a server.
func verifyPeer(pool func() *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("peer sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool(), Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		if err != nil {
			return fmt.Errorf("peer certificate not signed by the cluster CA: %w", err)
		}
		return nil
	}
}

// peerCredentials are the transport credentials for calls to other nodes'
// admin API.
func (c *clusterTLS) peerCredentials() credentials.TransportCredentials {
	if c == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(c.peerClient)
}

// ParseSecretsKey decodes the key that seals credentials: base64 of 32
// bytes (AES-256).
func ParseSecretsKey(s string) ([]byte, error) { return parseKey("secrets key", s, 32) }

// ParseGossipKey decodes a gossip encryption key: base64 of 16, 24 or 32
// bytes (AES-128, -192 or -256).
func ParseGossipKey(s string) ([]byte, error) { return parseKey("gossip key", s, 16, 24, 32) }

// parseKey decodes a base64 key of one of sizes bytes; "" is no key.
func parseKey(what, s string, sizes ...int) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%s: not base64: %w", what, err)
	}
	if !slices.Contains(sizes, len(k)) {
		want := strconv.Itoa(sizes[len(sizes)-1])
		for i := len(sizes) - 2; i >= 0; i-- {
			sep := ", "
			if i == len(sizes)-2 {
				sep = " or "
			}
			want = strconv.Itoa(sizes[i]) + sep + want
		}
		return nil, fmt.Errorf("%s: %d bytes; want %s (generate one with: openssl rand -base64 32)", what, len(k), want)
	}
	return k, nil
}
