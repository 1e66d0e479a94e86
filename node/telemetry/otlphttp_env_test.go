package telemetry

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

// An endpoint that does not parse is reported (the node logs it) without
// the endpoint itself: its user info may be a password.
func TestHTTPExporterBadEndpointErrorShowsNoCredentials(t *testing.T) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		for _, ep := range []string{"https://user:s3cret@collector:4318/%zz", "https://user:s3cret@collector:port/"} {
			_, err := httpConfigFrom(mapEnv(map[string]string{name: ep}), nil)
			if err == nil {
				t.Fatalf("%s=%s: no error", name, ep)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s=%s: error %q shows the password", name, ep, err)
			}
		}
	}
}

// A signal's variable that cannot be used leaves the general one in
// effect, as with the upstream client (which applies the general
// variables, then each signal one that parses): a bad traces endpoint or
// timeout falls back to the general one, and the client certificate and
// key come as a pair, the signal's if both are set, else the general ones.
func TestHTTPExporterBadSignalVariableLeavesTheGeneralOne(t *testing.T) {
	files := map[string][]byte{}
	files["a.crt"], files["a.key"] = testKeyPair(t)
	files["b.crt"], _ = testKeyPair(t)
	readFile := func(name string) ([]byte, error) {
		if b, ok := files[name]; ok {
			return b, nil
		}
		return nil, errors.New("no file")
	}
	cfg, err := httpConfigFrom(mapEnv(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "https://general:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces:port/",
		"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "soon",
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "a.crt", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "a.key",
		"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": "b.crt"}), readFile)
	if err == nil {
		t.Error("bad traces endpoint and timeout: no error")
	}
	if cfg.url != "https://general:4318/v1/traces" {
		t.Errorf("url %q, want the general endpoint's", cfg.url)
	}
	if cfg.timeout != 2500*time.Millisecond {
		t.Errorf("timeout %v, want the general one", cfg.timeout)
	}
	want, _ := tls.X509KeyPair(files["a.crt"], files["a.key"])
	if cfg.tls == nil || len(cfg.tls.Certificates) != 1 || !bytes.Equal(cfg.tls.Certificates[0].Certificate[0], want.Certificate[0]) {
		t.Errorf("client certificate %+v, want the general pair", cfg.tls)
	}
}

// testKeyPair is a self-signed certificate and its key, PEM encoded.
func testKeyPair(t *testing.T) (crt, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
