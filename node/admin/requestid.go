package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/raftstore"
)

// MetadataRequestID is the metadata key of a mutating call's request id.
// A client that retries a call sends the same id on every attempt; the id
// goes into the Raft command, so the state machine applies it once, and
// the ids a create draws (key and team ids) are derived from it, so a
// retry proposes the very same command.
const MetadataRequestID = "x-tollgate-request-id"

// maxRequestIDLen bounds a request id (tollctl sends 32 hex characters).
const maxRequestIDLen = 128

// RequestID returns the call's request id, "" when it has none, or an
// InvalidArgument status for an id that is too long or not printable
// ASCII.
func RequestID(ctx context.Context) (string, error) {
	// (Not FromIncomingContext: that copies every header of the call, and
	// a write asks for its request id three times.)
	v := metadata.ValueFromIncomingContext(ctx, MetadataRequestID)
	if len(v) == 0 {
		return "", nil
	}
	id := v[0]
	if len(id) > maxRequestIDLen {
		return "", status.Errorf(codes.InvalidArgument, "request id (%s) is longer than %d characters", MetadataRequestID, maxRequestIDLen)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return "", status.Errorf(codes.InvalidArgument, "request id (%s) must be printable ASCII without spaces", MetadataRequestID)
		}
	}
	return id, nil
}

// NewRequestID returns a random request id: 32 lowercase hex characters.
func NewRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// derivedID returns prefix followed by 16 hex characters derived from the
// request id: the same request yields the same id on every attempt and on
// every leader. Without a request id it is random.
func derivedID(prefix, kind, requestID string) string {
	if requestID == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		return prefix + hex.EncodeToString(b)
	}
	h := sha256.Sum256([]byte("tollgate " + kind + " id\x00" + requestID))
	return prefix + hex.EncodeToString(h[:8])
}

// SecretSeedLen is the length of a key secret's random part, which a
// client may send (CreateKeyRequest.secret_seed) so that a retry yields
// the same secret.
const SecretSeedLen = secretRandBytes

// NewSecretSeed returns random material for a key secret.
func NewSecretSeed() []byte {
	b := make([]byte, SecretSeedLen)
	_, _ = rand.Read(b)
	return b
}

// secretFromSeed returns the secret made of seed (or of fresh random
// bytes when seed is empty), its SHA-256 and its display prefix.
func secretFromSeed(seed []byte) (secret string, hash []byte, prefix string, err error) {
	switch len(seed) {
	case 0:
		seed = NewSecretSeed()
	case SecretSeedLen:
	default:
		return "", nil, "", invalid("secret_seed must be %d random bytes (or empty), not %d", SecretSeedLen, len(seed))
	}
	secret = secretPrefix + base64.RawURLEncoding.EncodeToString(seed)
	h := raftstore.HashSecret(secret)
	return secret, h[:], secret[:secretPrefixLen], nil
}

// newSecret returns a fresh key secret, its SHA-256 and its display prefix.
func newSecret() (secret string, hash []byte, prefix string) {
	secret, hash, prefix, _ = secretFromSeed(nil)
	return secret, hash, prefix
}
