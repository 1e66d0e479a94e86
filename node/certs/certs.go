// Package certs creates the certificates of a Tollgate cluster's TLS: a
// self-signed cluster CA, and node certificates the CA signs that serve both
// as TLS server and TLS client certificates, so nodes can authenticate each
// other mutually. Keys are ECDSA P-256.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// clockSkew is how far into the past a certificate's NotBefore is set, so
// that a machine whose clock runs a little behind still accepts it.
const clockSkew = time.Hour

// CA is a certificate authority: a CA certificate and its private key.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// NewCA creates a self-signed CA certificate valid from an hour ago until
// validity from now, with a new ECDSA P-256 key. The CA may sign leaf
// certificates only, not further CAs.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	if strings.TrimSpace(commonName) == "" {
		return nil, errors.New("certs: CA common name is empty")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("certs: CA validity %v is not positive", validity)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("certs: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parse new CA certificate: %w", err)
	}
	return newCA(cert, key)
}

// LoadCA parses a CA from its PEM certificate and PEM private key. The key
// may be a SEC 1 "EC PRIVATE KEY" or a PKCS #8 "PRIVATE KEY". It fails if
// the certificate is not a CA certificate or the key is not its key.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	certBlock := findBlock(certPEM, "CERTIFICATE")
	if certBlock == nil {
		return nil, errors.New("certs: no CERTIFICATE PEM block in the CA certificate")
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: parse CA certificate: %w", err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("certs: certificate %q is not a CA certificate", cert.Subject.CommonName)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("certs: CA certificate %q may not sign certificates (no cert-sign key usage)", cert.Subject.CommonName)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("certs: the private key does not match the CA certificate %q", cert.Subject.CommonName)
	}
	return newCA(cert, key)
}

func newCA(cert *x509.Certificate, key crypto.Signer) (*CA, error) {
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		keyPEM:  keyPEM,
	}, nil
}

// CertPEM returns the CA certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// KeyPEM returns the CA's private key as a PEM-encoded PKCS #8 "PRIVATE
// KEY".
func (ca *CA) KeyPEM() []byte { return bytes.Clone(ca.keyPEM) }

// Certificate returns the parsed CA certificate. The caller must not
// modify it.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Pool returns a new certificate pool holding the CA certificate, for
// tls.Config.RootCAs and ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Issue creates a leaf certificate for commonName with a new ECDSA P-256
// key, signed by the CA, usable as both a TLS server and a TLS client
// certificate. Each host that parses as an IP address becomes an IP
// address SAN, any other a DNS name SAN. The certificate is valid from an
// hour ago (but not before the CA) for validity, but not after the CA
// expires. It returns the PEM certificate and the PEM PKCS #8 key.
func (ca *CA) Issue(commonName string, hosts []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	return ca.issue(commonName, hosts, validity)
}

// IssueTLS is Issue as a tls.Certificate, for programs (and tests) that
// use it at once.
func (ca *CA) IssueTLS(commonName string, hosts []string, validity time.Duration) (tls.Certificate, error) {
	c, k, err := ca.issue(commonName, hosts, validity)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(c, k)
}

func (ca *CA) issue(commonName string, hosts []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if strings.TrimSpace(commonName) == "" {
		return nil, nil, errors.New("certs: certificate common name is empty")
	}
	if validity <= 0 {
		return nil, nil, fmt.Errorf("certs: certificate validity %v is not positive", validity)
	}
	now := time.Now()
	notBefore := now.Add(-clockSkew)
	if notBefore.Before(ca.cert.NotBefore) {
		notBefore = ca.cert.NotBefore
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, nil, fmt.Errorf("certs: the CA certificate %q expired at %s", ca.cert.Subject.CommonName, ca.cert.NotAfter.Format(time.RFC3339))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	seen := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: create certificate for %q: %w", commonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// newSerial returns a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("certs: generate serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// findBlock returns the first PEM block of type typ in data, or nil.
func findBlock(data []byte, typ string) *pem.Block {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil
		}
		if b.Type == typ {
			return b
		}
	}
}

// parseKey parses the first private key PEM block in data.
func parseKey(data []byte) (crypto.Signer, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New(`certs: no "EC PRIVATE KEY" or "PRIVATE KEY" PEM block in the CA key`)
		}
		switch b.Type {
		case "EC PRIVATE KEY":
			key, err := x509.ParseECPrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("certs: parse CA key: %w", err)
			}
			return key, nil
		case "PRIVATE KEY":
			key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("certs: parse CA key: %w", err)
			}
			signer, ok := key.(crypto.Signer)
			if !ok {
				return nil, fmt.Errorf("certs: CA key of type %T cannot sign", key)
			}
			return signer, nil
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("certs: the CA key is encrypted; decrypt it first")
		}
	}
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("certs: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
