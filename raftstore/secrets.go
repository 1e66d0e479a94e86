package raftstore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// sealedPrefix marks a credential value sealed by a Sealer:
// "tgsealed:v1:<key id>:<base64 of nonce and AES-GCM ciphertext>".
const sealedPrefix = "tgsealed:v1:"

// Sealer encrypts credential values before they enter the Raft log, so that
// the log, snapshots and backups hold them sealed. Every node of a cluster
// needs the same key to use them. The credential's name is bound to its
// sealed value (additional data), so a sealed value copied to another
// credential does not open.
type Sealer struct {
	aead  cipher.AEAD
	keyID string // hex of the first 4 bytes of the key's SHA-256
}

// NewSealer makes a Sealer from a 32-byte key (AES-256-GCM).
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("secrets key: %d bytes; want 32 (generate one with: openssl rand -base64 32)", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(key)
	return &Sealer{aead: aead, keyID: hex.EncodeToString(sum[:4])}, nil
}

// KeyID names the key without giving it away, for messages and logs;
// "" for a nil Sealer.
func (s *Sealer) KeyID() string {
	if s == nil {
		return ""
	}
	return s.keyID
}

// Seal returns the sealed form of a credential's value.
func (s *Sealer) Seal(name, value string) (string, error) {
	if s == nil {
		return "", errors.New("no secrets key to seal with")
	}
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(value)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	ct := s.aead.Seal(nonce, nonce, []byte(value), []byte(name))
	return sealedPrefix + s.keyID + ":" + base64.RawStdEncoding.EncodeToString(ct), nil
}

// IsSealed reports whether a stored value is sealed.
func IsSealed(stored string) bool { return strings.HasPrefix(stored, sealedPrefix) }

// Open returns a credential's value from its stored form. A value stored
// before sealing was turned on is returned as it is. A nil Sealer opens
// nothing sealed.
func (s *Sealer) Open(name, stored string) (string, error) {
	if !IsSealed(stored) {
		return stored, nil
	}
	kid, b64, ok := strings.Cut(strings.TrimPrefix(stored, sealedPrefix), ":")
	if !ok {
		return "", errors.New("malformed sealed value")
	}
	if s == nil {
		return "", fmt.Errorf("sealed with secrets key %s, and this node has no secrets key (TOLLGATE_SECRETS_KEY)", kid)
	}
	if kid != s.keyID {
		return "", fmt.Errorf("sealed with secrets key %s, and this node's key is %s (TOLLGATE_SECRETS_KEY differs between nodes?)", kid, s.keyID)
	}
	ct, err := base64.RawStdEncoding.DecodeString(b64)
	if err != nil || len(ct) < s.aead.NonceSize() {
		return "", errors.New("malformed sealed value")
	}
	pt, err := s.aead.Open(nil, ct[:s.aead.NonceSize()], ct[s.aead.NonceSize():], []byte(name))
	if err != nil {
		return "", errors.New("sealed value does not open with this node's secrets key (tampered, or sealed for another credential)")
	}
	return string(pt), nil
}

// SealCredential returns the value to store for a credential: sealed when
// this node has a secrets key, else value itself.
func (s *State) SealCredential(name, value string) (string, error) {
	if s.sealer == nil {
		return value, nil
	}
	return s.sealer.Seal(name, value)
}

// OpenCredential returns a stored credential's value (see Sealer.Open).
func (s *State) OpenCredential(c *pb.StoredCredential) (string, error) {
	return s.sealer.Open(c.GetName(), c.GetValue())
}

// Sealing reports whether this node seals credentials, and with which key.
func (s *State) Sealing() (keyID string, ok bool) {
	if s.sealer == nil {
		return "", false
	}
	return s.sealer.keyID, true
}
