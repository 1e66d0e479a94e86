package raftstore

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Roles of admin users. What each may do is the admin API's business
// (node/admin); the state machine only refuses a role it does not know.
const (
	RoleAdmin     = "admin"
	RoleOperator  = "operator"
	RoleViewer    = "viewer"
	RoleTeamAdmin = "team-admin"
)

// Roles lists every role, most powerful first.
var Roles = []string{RoleAdmin, RoleOperator, RoleViewer, RoleTeamAdmin}

// BootstrapUser is the name the bootstrap admin token (and every other
// registered admin token) acts under.
const BootstrapUser = "bootstrap"

// NodeUser is the name a node calling another with the cluster secret
// acts under.
const NodeUser = "node"

// users holds the admin users: few, so plain maps, cloned on change.
type users struct {
	byName map[string]*pb.StoredUser
	byHash map[[32]byte]string // token hash → name, active users only
}

func (u users) clone() users {
	return users{byName: maps.Clone(u.byName), byHash: maps.Clone(u.byHash)}
}

// put stores su (u must be a private clone).
func (u *users) put(su *pb.StoredUser) {
	if u.byName == nil {
		u.byName, u.byHash = map[string]*pb.StoredUser{}, map[[32]byte]string{}
	}
	name := su.GetUser().GetName()
	if old := u.byName[name]; old != nil {
		if h, err := hash32(old.GetTokenHash()); err == nil && u.byHash[h] == name {
			delete(u.byHash, h)
		}
	}
	u.byName[name] = su
	if h, err := hash32(su.GetTokenHash()); err == nil && su.GetUser().GetRevokedAt() == nil {
		u.byHash[h] = name
	}
}

// UserByToken returns the active user whose token hashes to h, or nil.
func (s *State) UserByToken(h [32]byte) *pb.StoredUser {
	name, ok := s.users.byHash[h]
	if !ok {
		return nil
	}
	return s.users.byName[name]
}

// User returns the user called name (revoked ones too), or nil. The
// result must not be modified.
func (s *State) User(name string) *pb.StoredUser { return s.users.byName[name] }

// Users returns every user sorted by name.
func (s *State) Users() []*pb.StoredUser {
	out := make([]*pb.StoredUser, 0, len(s.users.byName))
	for _, n := range slices.Sorted(maps.Keys(s.users.byName)) {
		out = append(out, s.users.byName[n])
	}
	return out
}

// ValidateUserName checks a user name: 1 to 64 letters, digits, '.', '_',
// '-' or '@', and not the reserved BootstrapUser or NodeUser.
func ValidateUserName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("user name %q: give 1 to 64 characters: %w", name, ErrInvalid)
	}
	if name == BootstrapUser || name == NodeUser {
		return fmt.Errorf("user name %q is reserved for the bootstrap admin token and the nodes: %w", name, ErrInvalid)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-@", c)
		if !ok {
			return fmt.Errorf("user name %q: use letters, digits, '.', '_', '-' and '@': %w", name, ErrInvalid)
		}
	}
	return nil
}

// ValidateUserRole checks a user's role and team: a team-admin manages
// one existing team, other roles none.
func ValidateUserRole(st *State, u *pb.User) error {
	role := u.GetRole()
	if !slices.Contains(Roles, role) {
		return fmt.Errorf("role %q: one of %s: %w", role, strings.Join(Roles, ", "), ErrInvalid)
	}
	if role != RoleTeamAdmin {
		if u.GetTeamId() != "" || len(u.GetModels()) > 0 {
			return fmt.Errorf("only a team-admin has a team and models, not a %s: %w", role, ErrInvalid)
		}
		return nil
	}
	if u.GetTeamId() == "" {
		return fmt.Errorf("a team-admin needs a team: %w", ErrInvalid)
	}
	if st.team(u.GetTeamId()) == nil {
		return fmt.Errorf("team %q does not exist: %w", u.GetTeamId(), ErrFailedPrecondition)
	}
	return nil
}

// tokenTaken reports whether h is already some user's or admin token.
func (s *State) tokenTaken(h [32]byte) bool {
	if _, ok := s.users.byHash[h]; ok {
		return true
	}
	_, ok := s.adminTokens[h]
	return ok
}

func createUser(cur *State, c *pb.CreateUserCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	u := c.GetUser().GetUser()
	if err := ValidateUserName(u.GetName()); err != nil {
		return nil, nil, err
	}
	if err := ValidateUserRole(cur, u); err != nil {
		return nil, nil, err
	}
	if cur.User(u.GetName()) != nil {
		return nil, nil, fmt.Errorf("user %q: %w", u.GetName(), ErrAlreadyExists)
	}
	h, err := hash32(c.GetUser().GetTokenHash())
	if err != nil {
		return nil, nil, fmt.Errorf("user %q token: %w", u.GetName(), err)
	}
	if cur.tokenTaken(h) {
		return nil, nil, fmt.Errorf("user %q: token collides with another: %w", u.GetName(), ErrAlreadyExists)
	}
	su := proto.Clone(c.GetUser()).(*pb.StoredUser)
	su.User.CreatedAt, su.User.UpdatedAt, su.User.RevokedAt = ts, ts, nil
	return cur.withUser(su), su, nil
}

func (s *State) withUser(su *pb.StoredUser) *State {
	next := *s
	next.users = s.users.clone()
	next.users.put(su)
	return &next
}

func (s *State) userOrErr(name string) (*pb.StoredUser, error) {
	su := s.User(name)
	if su == nil {
		return nil, fmt.Errorf("user %q: %w", name, ErrNotFound)
	}
	return su, nil
}

func revokeUser(cur *State, name string, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	old, err := cur.userOrErr(name)
	if err != nil {
		return nil, nil, err
	}
	if old.GetUser().GetRevokedAt() != nil {
		return nil, old, nil // already revoked
	}
	su := proto.Clone(old).(*pb.StoredUser)
	su.User.RevokedAt, su.User.UpdatedAt = ts, ts
	return cur.withUser(su), su, nil
}

func rotateUser(cur *State, c *pb.RotateUserCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	old, err := cur.userOrErr(c.GetName())
	if err != nil {
		return nil, nil, err
	}
	if old.GetUser().GetRevokedAt() != nil {
		return nil, nil, fmt.Errorf("user %q is revoked: %w", c.GetName(), ErrFailedPrecondition)
	}
	h, err := hash32(c.GetTokenHash())
	if err != nil {
		return nil, nil, fmt.Errorf("user %q token: %w", c.GetName(), err)
	}
	if cur.tokenTaken(h) {
		return nil, nil, fmt.Errorf("user %q: new token collides with another: %w", c.GetName(), ErrAlreadyExists)
	}
	su := proto.Clone(old).(*pb.StoredUser)
	su.TokenHash = append([]byte(nil), h[:]...)
	su.User.TokenPrefix, su.User.UpdatedAt = c.GetTokenPrefix(), ts
	return cur.withUser(su), su, nil
}

// addUsers loads a snapshot's users into b's state.
func (b *stateBuilder) addUsers(list []*pb.StoredUser) error {
	if len(list) == 0 {
		return nil
	}
	u := b.st.users.clone()
	for _, su := range list {
		if _, err := hash32(su.GetTokenHash()); err != nil {
			return fmt.Errorf("snapshot user %q: %w", su.GetUser().GetName(), err)
		}
		u.put(su)
	}
	b.st.users = u
	return nil
}

// mergeUsers keeps, in a restored state, every user of the running
// cluster (as it is now: a user revoked since the backup stays revoked),
// so that whoever restores keeps access.
func mergeUsers(restored, cur *State) {
	if len(cur.users.byName) == 0 {
		return
	}
	u := restored.users.clone()
	for _, su := range cur.users.byName {
		u.put(su)
	}
	restored.users = u
}
