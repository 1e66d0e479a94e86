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
	// old open values sealed with earlier keys, by key id (rotation).
	old map[string]cipher.AEAD
}

// NewSealer makes a Sealer from a 32-byte key (AES-256-GCM). Values sealed
// with any of oldKeys still open (a key being rotated out); Seal uses key.
func NewSealer(key []byte, oldKeys ...[]byte) (*Sealer, error) {
	aead, kid, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	s := &Sealer{aead: aead, keyID: kid, old: map[string]cipher.AEAD{}}
	for _, k := range oldKeys {
		a, id, err := newAEAD(k)
		if err != nil {
			return nil, fmt.Errorf("old %w", err)
		}
		if id != kid {
			s.old[id] = a
		}
	}
	return s, nil
}

func newAEAD(key []byte) (cipher.AEAD, string, error) {
	if len(key) != 32 {
		return nil, "", fmt.Errorf("secrets key: %d bytes; want 32 (generate one with: openssl rand -base64 32)", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, "", err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(key)
	return aead, hex.EncodeToString(sum[:4]), nil
}

// Current reports whether a stored value is sealed with this Sealer's
// key (not in the clear, nor with an old key).
func (s *Sealer) Current(stored string) bool {
	return s != nil && strings.HasPrefix(stored, sealedPrefix+s.keyID+":")
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
	aead := s.aead
	if kid != s.keyID {
		if aead = s.old[kid]; aead == nil {
			return "", fmt.Errorf("sealed with secrets key %s, and this node's key is %s (TOLLGATE_SECRETS_KEY differs between nodes? a key being rotated out belongs in TOLLGATE_SECRETS_OLD_KEYS)", kid, s.keyID)
		}
	}
	ct, err := base64.RawStdEncoding.DecodeString(b64)
	if err != nil || len(ct) < aead.NonceSize() {
		return "", errors.New("malformed sealed value")
	}
	pt, err := aead.Open(nil, ct[:aead.NonceSize()], ct[aead.NonceSize():], []byte(name))
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

// NeedsSeal reports whether a stored value should be sealed (again) with
// this node's key: it is in the clear, or sealed with an old key that
// opens here. A value that does not open is left alone.
func (s *State) NeedsSeal(name, stored string) bool {
	if s.sealer == nil || s.sealer.Current(stored) {
		return false
	}
	_, err := s.sealer.Open(name, stored)
	return err == nil
}

// Sealing reports whether this node seals credentials.
func (s *State) Sealing() bool { return s.sealer != nil }
