package admin

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// ConsoleScheme is the authorization scheme of the web console's calls:
// "authorization: Console <session>", where the session is what
// SignConsoleSession returns (also the console's cookie).
const ConsoleScheme = "Console"

// OIDCUserPrefix starts the name of a user who logged in to the console
// through single sign-on; local user names cannot contain ':'.
const OIDCUserPrefix = "oidc:"

// Errors of OpenConsoleSession. They say nothing of the session's content.
var (
	ErrSessionInvalid = errors.New("console session is not valid")
	ErrSessionExpired = errors.New("console session expired; log in again")
	ErrNoClusterKey   = errors.New("the cluster secret is not replicated yet; retry in a moment")
)

// consoleKey derives the console's signing key from the replicated cluster
// secret, apart from every other use of it.
func consoleKey(clusterSecret string) []byte {
	m := hmac.New(sha256.New, []byte("tollgate console session\x00"))
	m.Write([]byte(clusterSecret))
	return m.Sum(nil)
}

func sessionMAC(clusterSecret string, b []byte) []byte {
	m := hmac.New(sha256.New, consoleKey(clusterSecret))
	m.Write(b)
	return m.Sum(nil)
}

// SignConsoleSession returns s signed under the cluster secret:
// base64url(marshalled s) "." base64url(HMAC-SHA256). A session without
// a nonce gets a random one.
func SignConsoleSession(clusterSecret string, s *pb.ConsoleSession) (string, error) {
	if clusterSecret == "" {
		return "", ErrNoClusterKey
	}
	if len(s.GetNonce()) == 0 {
		s = proto.Clone(s).(*pb.ConsoleSession)
		s.Nonce = make([]byte, 16)
		_, _ = rand.Read(s.Nonce)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(b) + "." + enc.EncodeToString(sessionMAC(clusterSecret, b)), nil
}

// OpenConsoleSession checks the MAC and the expiry of a signed session
// and returns it. It does not look at the user: see consoleIdentity.
func OpenConsoleSession(clusterSecret, signed string, now time.Time) (*pb.ConsoleSession, error) {
	if clusterSecret == "" {
		return nil, ErrNoClusterKey
	}
	body, mac, ok := strings.Cut(signed, ".")
	enc := base64.RawURLEncoding
	b, err1 := enc.DecodeString(body)
	m, err2 := enc.DecodeString(mac)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(m, sessionMAC(clusterSecret, b)) {
		return nil, ErrSessionInvalid
	}
	var s pb.ConsoleSession
	if err := proto.Unmarshal(b, &s); err != nil || s.GetUser() == "" {
		return nil, ErrSessionInvalid
	}
	if now.Unix() >= s.GetExpiresAt() {
		return nil, ErrSessionExpired
	}
	return &s, nil
}

// consoleIdentity is the caller a console session stands for: the
// bootstrap admin; a local user as the replicated state has it now (gone
// or revoked: refused, so revoking a user ends their sessions at once);
// or a single sign-on user with the role the console mapped at login.
// The address is the browser's, as the console saw it.
func consoleIdentity(st *raftstore.State, s *pb.ConsoleSession) (*Identity, error) {
	addr := s.GetAddress()
	switch {
	case s.GetOidc():
		if !strings.HasPrefix(s.GetUser(), OIDCUserPrefix) || !slices.Contains(raftstore.Roles, s.GetRole()) ||
			(s.GetRole() == raftstore.RoleTeamAdmin) != (s.GetTeamId() != "") {
			return nil, ErrSessionInvalid
		}
		return &Identity{User: s.GetUser(), Role: s.GetRole(), TeamID: s.GetTeamId(), Models: s.GetModels(), Address: addr}, nil
	case s.GetUser() == raftstore.BootstrapUser:
		// The admin token's holder, but through the console: not the
		// nodes' internal RPCs.
		return &Identity{User: raftstore.BootstrapUser, Role: raftstore.RoleAdmin, Address: addr}, nil
	}
	su := st.User(s.GetUser())
	if su == nil || su.GetUser().GetRevokedAt() != nil {
		return nil, errors.New("console session of a user that is revoked or gone")
	}
	return userIdentity(su.GetUser(), addr), nil
}
