package admin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	ErrSessionEnded   = errors.New("console session ended (logged out); log in again")
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

// ConsoleTokenBinding is the Nonce of a local user's session: a
// fingerprint of the token the user logged in with. The admin API accepts
// the session only while it is the user's current token, so rotating a
// (leaked) token ends the sessions opened with it too.
func ConsoleTokenBinding(token string) []byte {
	h := raftstore.HashSecret(token)
	return tokenBinding(h[:])
}

func tokenBinding(tokenHash []byte) []byte {
	m := sha256.New()
	m.Write([]byte("tollgate console token\x00"))
	m.Write(tokenHash)
	return m.Sum(nil)[:16]
}

// SignConsoleSession returns s signed under the cluster secret:
// base64url(marshalled s) "." base64url(HMAC-SHA256). A session without
// a nonce gets a random one, and one without an id a random id.
func SignConsoleSession(clusterSecret string, s *pb.ConsoleSession) (string, error) {
	if clusterSecret == "" {
		return "", ErrNoClusterKey
	}
	if len(s.GetNonce()) == 0 || len(s.GetId()) == 0 {
		s = proto.Clone(s).(*pb.ConsoleSession)
		for _, b := range []*[]byte{&s.Nonce, &s.Id} {
			if len(*b) == 0 {
				*b = make([]byte, 16)
				_, _ = rand.Read(*b)
			}
		}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(b) + "." + enc.EncodeToString(sessionMAC(clusterSecret, b)), nil
}

// OpenConsoleSession checks the MAC and the expiry of a signed session
// and returns it. It does not look at the user (see consoleIdentity) nor
// whether the session was logged out (see consoleToken).
func OpenConsoleSession(clusterSecret, signed string, now time.Time) (*pb.ConsoleSession, error) {
	s, _, err := openConsoleSession(clusterSecret, signed, now)
	return s, err
}

// sessionID is the fingerprint a logout records a session under
// (raftstore.ConsoleSessionEnded), from the session's MAC: the MAC is a
// function of the session's bytes, so every copy of the cookie that opens
// (base64 decodes some variants of a text to the same bytes) has the same
// one, and it is one-way, so the replicated state never holds a usable
// session.
func sessionID(mac []byte) []byte {
	m := sha256.New()
	m.Write([]byte("tollgate console session id\x00"))
	m.Write(mac)
	return m.Sum(nil)[:raftstore.ConsoleSessionIDLen]
}

// openConsoleSession is OpenConsoleSession, also returning the MAC.
func openConsoleSession(clusterSecret, signed string, now time.Time) (*pb.ConsoleSession, []byte, error) {
	if clusterSecret == "" {
		return nil, nil, ErrNoClusterKey
	}
	body, mac, ok := strings.Cut(signed, ".")
	enc := base64.RawURLEncoding
	b, err1 := enc.DecodeString(body)
	m, err2 := enc.DecodeString(mac)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(m, sessionMAC(clusterSecret, b)) {
		return nil, nil, ErrSessionInvalid
	}
	var s pb.ConsoleSession
	if err := proto.Unmarshal(b, &s); err != nil || s.GetUser() == "" {
		return nil, nil, ErrSessionInvalid
	}
	if now.Unix() >= s.GetExpiresAt() {
		return nil, nil, ErrSessionExpired
	}
	return &s, m, nil
}

// consoleIdentity is the caller a console session stands for: the
// bootstrap admin; a local user as the replicated state has it now (gone,
// revoked or its token rotated since login: refused, so revoking a user or
// rotating its token ends their sessions at once); or a single sign-on
// user with the role the console mapped at login.
// The address is the browser's at login; the console vouches for each
// call's own with MetadataActor, which identify prefers.
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
	if !hmac.Equal(s.GetNonce(), tokenBinding(su.GetTokenHash())) {
		return nil, errors.New("console session of a token that was rotated since; log in again")
	}
	return userIdentity(su.GetUser(), addr), nil
}

// consoleSession is the console session a call was made with: what a
// logout records.
type consoleSession struct {
	mac     []byte
	expires int64 // Unix seconds
	ended   bool  // logged out already (this node applied it)
}

// EndConsoleSession ends the caller's console session on every node: the
// state machine keeps its fingerprint until the session's own expiry, and
// consoleToken refuses it from the moment this call returns. Ending a
// session that is ended already succeeds and writes nothing (a retry whose
// first answer was lost). On the leader one logout at a time checks the
// bound on ended sessions and applies, so concurrent ones cannot pass it.
func (u userService) EndConsoleSession(ctx context.Context, _ *pb.EndConsoleSessionRequest) (*pb.EndConsoleSessionResponse, error) {
	id := IdentityFrom(ctx)
	if id == nil || id.console == nil {
		return nil, status.Error(codes.FailedPrecondition,
			"only a web console session can be ended; this call was made with a token (revoke or rotate it instead)")
	}
	if id.console.ended {
		return &pb.EndConsoleSessionResponse{}, nil
	}
	select {
	case u.s.endSlot <- struct{}{}:
		defer func() { <-u.s.endSlot }()
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if u.s.store.State().EndedConsoleSessionsFull(u.s.maxEnded, u.s.now()) {
		return nil, status.Errorf(codes.ResourceExhausted, "the cluster holds the most ended console sessions it keeps (%d) "+
			"until some expire (rotating a user's token ends all of its sessions)", u.s.maxEnded)
	}
	cmd := &pb.Command{Op: &pb.Command_EndConsoleSession{EndConsoleSession: &pb.EndConsoleSessionCommand{
		Session: &pb.EndedConsoleSession{SessionId: sessionID(id.console.mac), ExpiresAt: id.console.expires}}}}
	if _, err := u.s.apply(ctx, cmd); err != nil {
		return nil, err
	}
	return &pb.EndConsoleSessionResponse{}, nil
}
