package node

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// clusterTLS holds the TLS configurations a node derives from its
// certificate, key and cluster CA.
type clusterTLS struct {
	// admin serves the admin gRPC API (and the data plane with
	// --http-tls): a client certificate is verified if one is given, since
	// the admin token is what authenticates people and scripts.
	admin *tls.Config
	// peerServer serves Raft: a peer must present a certificate the
	// cluster CA signed.
	peerServer *tls.Config
	// peerClient dials other nodes (Raft, and their admin API) with this
	// node's certificate, accepting a peer whose certificate the cluster CA
	// signed.
	peerClient *tls.Config
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
	return &clusterTLS{
		admin: &tls.Config{Certificates: certs, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pool,
			MinVersion: tls.VersionTLS12},
		peerServer: &tls.Config{Certificates: certs, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
			MinVersion: tls.VersionTLS13},
		peerClient: &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS13,
			// Peers are dialed at the addresses they gossip, which their
			// certificates need not name: membership in the cluster is
			// proven by a certificate the cluster's own CA signed, so the
			// chain is checked here instead of the host name.
			InsecureSkipVerify: true,
			VerifyConnection:   verifyPeer(pool)},
	}, nil
}

// verifyPeer accepts a connection whose peer certificate chains to the
// cluster CA and may act as a server.
func verifyPeer(pool *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("peer sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
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
func ParseSecretsKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("secrets key: not base64: %w", err)
	}
	if len(k) != 32 {
		return nil, fmt.Errorf("secrets key: %d bytes; want 32 (generate one with: openssl rand -base64 32)", len(k))
	}
	return k, nil
}

// ParseGossipKey decodes a gossip encryption key: base64 of 16, 24 or 32
// bytes (AES-128, -192 or -256).
func ParseGossipKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("gossip key: not base64: %w", err)
	}
	switch len(k) {
	case 16, 24, 32:
		return k, nil
	}
	return nil, fmt.Errorf("gossip key: %d bytes; want 16, 24 or 32 (generate one with: openssl rand -base64 32)", len(k))
}
