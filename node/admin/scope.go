package admin

import (
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// A team-admin's permissions reach one team: scopeRequest refuses a call
// about another team's keys, spend or settings (or fills in the team when
// the call names none), before the call runs or is forwarded, and
// filterResponse drops what a list shows of other teams.

// scopeRequest returns the request to run for id (a copy when it fills in
// the team), or a PermissionDenied status.
func (s *Server) scopeRequest(id *Identity, req any) (any, error) {
	if id.Role != raftstore.RoleTeamAdmin {
		return req, nil
	}
	sc := teamScope{id: id, st: s.store.State()}
	switch r := req.(type) {
	case *pb.CreateKeyRequest:
		r = proto.Clone(r).(*pb.CreateKeyRequest)
		return r, sc.newKey(&r.TeamId, r.GetModels(), r.GetBudget())
	case *pb.ImportKeysRequest:
		r = proto.Clone(r).(*pb.ImportKeysRequest)
		for _, k := range r.GetKeys() {
			if err := sc.newKey(&k.TeamId, k.GetModels(), k.GetBudget()); err != nil {
				return nil, err
			}
		}
		return r, nil
	case *pb.UpdateKeyRequest:
		return r, sc.updateKey(r)
	case *pb.ListKeysRequest:
		// Its own team's keys, so that pages and totals count only those.
		r = proto.Clone(r).(*pb.ListKeysRequest)
		if r.TeamId == "" {
			r.TeamId = id.TeamID
		}
		return r, sc.team(r.GetTeamId())
	case *pb.GetKeyRequest:
		return r, sc.key(r.GetId())
	case *pb.RevokeKeyRequest:
		return r, sc.key(r.GetId())
	case *pb.RotateKeyRequest:
		return r, sc.key(r.GetId())
	case *pb.GetTeamRequest:
		return r, sc.team(r.GetId())
	case *pb.SpendReportRequest:
		r = proto.Clone(r).(*pb.SpendReportRequest)
		return r, sc.spend(&r.TeamId, r.GetKeyId())
	case *pb.SpendLogsRequest:
		r = proto.Clone(r).(*pb.SpendLogsRequest)
		return r, sc.spend(&r.TeamId, r.GetKeyId())
	case *pb.NodeLogsRequest:
		r = proto.Clone(r).(*pb.NodeLogsRequest)
		if r.Query == nil {
			r.Query = &pb.SpendLogsRequest{}
		}
		return r, sc.spend(&r.Query.TeamId, r.Query.GetKeyId())
	}
	return req, nil
}

type teamScope struct {
	id *Identity
	st *raftstore.State
}

func (sc teamScope) deny(format string, args ...any) error {
	args = append([]any{sc.id.User, sc.id.TeamID}, args...)
	return status.Errorf(codes.PermissionDenied, "permission denied: %s is a team-admin of team %s only; "+format, args...)
}

func (sc teamScope) team(id string) error {
	if id != sc.id.TeamID {
		return sc.deny("team %s is another team", id)
	}
	return nil
}

// key checks that key id belongs to the team.
func (sc teamScope) key(id string) error {
	if k := sc.st.Key(id); k == nil || k.GetKey().GetTeamId() != sc.id.TeamID {
		return sc.deny("key %q is not one of its keys", id)
	}
	return nil
}

// newKey puts a new key into the team (when it names none) and checks
// its models and budget.
func (sc teamScope) newKey(team *string, models []string, b *pb.Budget) error {
	if *team == "" {
		*team = sc.id.TeamID
	}
	if err := sc.team(*team); err != nil {
		return err
	}
	if err := sc.models(models); err != nil {
		return err
	}
	return sc.budget(b)
}

func (sc teamScope) updateKey(r *pb.UpdateKeyRequest) error {
	if err := sc.key(r.GetId()); err != nil {
		return err
	}
	if r.TeamId != nil {
		if err := sc.team(r.GetTeamId()); err != nil {
			return err
		}
	}
	if r.Models != nil {
		if err := sc.models(r.GetModels().GetValues()); err != nil {
			return err
		}
	}
	return sc.budget(r.GetBudget())
}

// models checks that a key's model list stays within the team-admin's:
// every entry must be matched by one of the team-admin's patterns (a
// pattern of the key's matches as plain text, which is sound: a '*' of
// the key's can only be matched by a '*' of the team-admin's).
func (sc teamScope) models(models []string) error {
	allowed := sc.id.Models
	if len(allowed) == 0 {
		return nil
	}
	if len(models) == 0 {
		return sc.deny("a key it manages must name its models (within %v)", allowed)
	}
	for _, m := range models {
		if !slices.ContainsFunc(allowed, func(p string) bool { return raftstore.MatchPattern(p, m) }) {
			return sc.deny("model %q is outside its models %v", m, allowed)
		}
	}
	return nil
}

// budget checks that a key's budget is no larger than the team's.
func (sc teamScope) budget(b *pb.Budget) error {
	tb := sc.st.TeamConfig(sc.id.TeamID).GetBudget()
	if b == nil || tb == nil || b.GetLimitNanos() <= tb.GetLimitNanos() {
		return nil
	}
	return sc.deny("a key budget of %d nano-dollars exceeds the team's %d", b.GetLimitNanos(), tb.GetLimitNanos())
}

// spend limits a spend query to the team.
func (sc teamScope) spend(team *string, key string) error {
	if *team == "" {
		*team = sc.id.TeamID
	}
	if err := sc.team(*team); err != nil {
		return err
	}
	if key != "" {
		return sc.key(key)
	}
	return nil
}

// filterResponse drops from a list what id may not see: a team-admin
// sees its own team and its keys only, and a viewer no credential hints
// (the last characters of a credential's value).
func filterResponse(id *Identity, resp any) any {
	switch r := resp.(type) {
	case *pb.ListKeysResponse:
		if id.Role == raftstore.RoleTeamAdmin {
			r.Keys = slices.DeleteFunc(r.Keys, func(k *pb.Key) bool { return k.GetTeamId() != id.TeamID })
		}
	case *pb.ListTeamsResponse:
		if id.Role == raftstore.RoleTeamAdmin {
			r.Teams = slices.DeleteFunc(r.Teams, func(t *pb.Team) bool { return t.GetId() != id.TeamID })
		}
	case *pb.ListCredentialsResponse:
		if id.Role == raftstore.RoleViewer {
			for _, c := range r.GetCredentials() {
				c.Hint = ""
			}
		}
	}
	return resp
}
