package admin

import (
	"context"
	"maps"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

const teamIDPrefix = "team_"

func checkTeamName(name string) error {
	if strings.TrimSpace(name) == "" {
		return invalid("team name is required")
	}
	return checkText("team name", name)
}

func checkTeamID(id string) error {
	if id == "" {
		return invalid("team id is required")
	}
	return nil
}

// checkTeamExists checks that a team a key is put in exists; "" means no
// team.
func checkTeamExists(st *raftstore.State, id string) error {
	if id == "" || st.TeamConfig(id) != nil {
		return nil
	}
	return status.Errorf(codes.FailedPrecondition,
		"team %q does not exist; create it first with: tollctl team create", id)
}

func cloneTeam(t *pb.Team) *pb.Team {
	if t == nil {
		return nil
	}
	return proto.Clone(t).(*pb.Team)
}

func cloneBudget(b *pb.Budget) *pb.Budget {
	if b == nil {
		return nil
	}
	return proto.Clone(b).(*pb.Budget)
}

func (t teamService) CreateTeam(ctx context.Context, req *pb.CreateTeamRequest) (*pb.CreateTeamResponse, error) {
	if err := checkTeamName(req.GetName()); err != nil {
		return nil, err
	}
	if err := checkBudget("team budget", req.GetBudget()); err != nil {
		return nil, err
	}
	if err := checkRateLimits("team", req.GetLimits()); err != nil {
		return nil, err
	}
	if err := checkMetadata(req.GetMetadata(), false); err != nil {
		return nil, err
	}
	rid, err := RequestID(ctx)
	if err != nil {
		return nil, err
	}
	team := &pb.Team{
		Id:       derivedID(teamIDPrefix, "team", rid),
		Name:     req.GetName(),
		Budget:   cloneBudget(req.GetBudget()),
		Metadata: maps.Clone(req.GetMetadata()),
		Limits:   req.GetLimits(),
	}
	cmd := &pb.Command{Op: &pb.Command_CreateTeam{CreateTeam: &pb.CreateTeamCommand{Team: team}}}
	res, err := applyAs[*pb.Team](ctx, t.s, cmd, false)
	if rid != "" && (err == nil || status.Code(err) == codes.AlreadyExists) {
		// A retry whose first attempt was applied: the team exists under
		// the id this request derives.
		if cur := t.s.store.State().TeamConfig(team.GetId()); cur != nil && cur.GetName() == team.GetName() {
			res, err = cur, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if rid != "" && res.GetName() != team.GetName() {
		// The state machine answered an earlier request with this id.
		return nil, status.Errorf(codes.AlreadyExists, "request id %s was used already, to create team %s (%q); send a new id for a new request",
			rid, res.GetId(), res.GetName())
	}
	return &pb.CreateTeamResponse{Team: cloneTeam(res)}, nil
}

func (t teamService) ListTeams(context.Context, *pb.ListTeamsRequest) (*pb.ListTeamsResponse, error) {
	var out []*pb.Team
	for _, team := range t.s.store.State().Teams() {
		out = append(out, cloneTeam(team))
	}
	return &pb.ListTeamsResponse{Teams: out}, nil
}

func (t teamService) GetTeam(_ context.Context, req *pb.GetTeamRequest) (*pb.GetTeamResponse, error) {
	if err := checkTeamID(req.GetId()); err != nil {
		return nil, err
	}
	st := t.s.store.State()
	team := st.TeamConfig(req.GetId())
	if team == nil {
		return nil, status.Errorf(codes.NotFound, "team %q not found", req.GetId())
	}
	return &pb.GetTeamResponse{
		Team:         cloneTeam(team),
		BudgetStatus: budgetStatus(st, raftstore.TeamBudgetID(team.GetId()), team.GetBudget(), t.s.now()),
		KeyIds:       st.KeysOfTeam(team.GetId()),
	}, nil
}

func (t teamService) UpdateTeam(ctx context.Context, req *pb.UpdateTeamRequest) (*pb.UpdateTeamResponse, error) {
	if err := checkTeamID(req.GetId()); err != nil {
		return nil, err
	}
	if req.Name == nil && req.Budget == nil && !req.GetClearBudget() && len(req.GetMetadata()) == 0 && req.Limits == nil {
		return nil, invalid("nothing to update: set at least one of name, budget, clear_budget, metadata, limits")
	}
	if err := checkRateLimits("team", req.GetLimits()); err != nil {
		return nil, err
	}
	if req.Name != nil {
		if err := checkTeamName(req.GetName()); err != nil {
			return nil, err
		}
	}
	if req.Budget != nil {
		if req.GetClearBudget() {
			return nil, invalid("budget and clear_budget are both set; give one")
		}
		if err := checkBudget("team budget", req.Budget); err != nil {
			return nil, err
		}
	}
	if err := checkMetadata(req.GetMetadata(), true); err != nil {
		return nil, err
	}
	cmd := &pb.Command{Op: &pb.Command_UpdateTeam{UpdateTeam: &pb.UpdateTeamCommand{
		Update: proto.Clone(req).(*pb.UpdateTeamRequest),
	}}}
	res, err := applyAs[*pb.Team](ctx, t.s, cmd, false)
	if err != nil {
		return nil, err
	}
	return &pb.UpdateTeamResponse{Team: cloneTeam(res)}, nil
}

func (t teamService) DeleteTeam(ctx context.Context, req *pb.DeleteTeamRequest) (*pb.DeleteTeamResponse, error) {
	if err := checkTeamID(req.GetId()); err != nil {
		return nil, err
	}
	cmd := &pb.Command{Op: &pb.Command_DeleteTeam{DeleteTeam: &pb.DeleteTeamCommand{Id: req.GetId()}}}
	if _, err := t.s.apply(ctx, cmd); err != nil {
		return nil, err
	}
	return &pb.DeleteTeamResponse{}, nil
}
