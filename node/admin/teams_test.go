package admin

import (
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

var teamIDRe = regexp.MustCompile(`^team_[0-9a-f]{16}$`)

func TestCreateTeam(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)

	budget := &pb.Budget{LimitNanos: 50_000_000_000, Period: "month", AllowUnpriced: true}
	resp, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{
		Name: "platform", Budget: budget, Metadata: map[string]string{"cost-center": "42"},
	})
	mustOK(t, err)
	tm := resp.GetTeam()
	if !teamIDRe.MatchString(tm.GetId()) {
		t.Errorf("id %q does not look like team_ + 16 hex", tm.GetId())
	}
	if tm.GetName() != "platform" || !proto.Equal(tm.GetBudget(), budget) || tm.GetMetadata()["cost-center"] != "42" ||
		tm.GetCreatedAt() == nil || tm.GetUpdatedAt() == nil {
		t.Errorf("unexpected team: %v", tm)
	}
	if v := store.State().Team(tm.GetId()); v == nil || v.Budget == nil || v.Budget.LimitNanos != budget.LimitNanos {
		t.Errorf("data plane team = %+v", v)
	}
	// No budget is fine: a team can just group keys.
	resp2, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "research"})
	mustOK(t, err)
	if resp2.GetTeam().GetId() == tm.GetId() || resp2.GetTeam().GetBudget() != nil {
		t.Errorf("second team: %v", resp2.GetTeam())
	}

	cases := map[string]struct {
		req  *pb.CreateTeamRequest
		want string // in the message
	}{
		"no name":         {&pb.CreateTeamRequest{}, "team name is required"},
		"blank name":      {&pb.CreateTeamRequest{Name: " \t"}, "team name is required"},
		"long name":       {&pb.CreateTeamRequest{Name: strings.Repeat("n", 201)}, "limit is 200"},
		"zero limit":      {&pb.CreateTeamRequest{Name: "a", Budget: &pb.Budget{Period: "day"}}, "limit_nanos must be positive"},
		"negative limit":  {&pb.CreateTeamRequest{Name: "a", Budget: &pb.Budget{LimitNanos: -1, Period: "day"}}, "limit_nanos must be positive"},
		"bad period":      {&pb.CreateTeamRequest{Name: "a", Budget: &pb.Budget{LimitNanos: 1, Period: "year"}}, `period "year"`},
		"no period":       {&pb.CreateTeamRequest{Name: "a", Budget: &pb.Budget{LimitNanos: 1}}, "period is required"},
		"empty label key": {&pb.CreateTeamRequest{Name: "a", Metadata: map[string]string{"": "x"}}, "metadata key"},
		"empty label":     {&pb.CreateTeamRequest{Name: "a", Metadata: map[string]string{"k": ""}}, "empty value"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := env.teams.CreateTeam(ctx, c.req)
			st := wantCode(t, err, codes.InvalidArgument)
			if !strings.Contains(st.Message(), c.want) {
				t.Errorf("message %q does not contain %q", st.Message(), c.want)
			}
		})
	}
	_, err = env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: strings.Repeat("n", 200)})
	mustOK(t, err)
	for _, p := range []string{"day", "week", "month", "total"} {
		_, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "p-" + p, Budget: &pb.Budget{LimitNanos: 1, Period: p}})
		mustOK(t, err)
	}
}

func TestTeamLifecycle(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)

	zeta, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "zeta", Metadata: map[string]string{"a": "1", "b": "2"}})
	mustOK(t, err)
	alpha, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "alpha"})
	mustOK(t, err)
	id := zeta.GetTeam().GetId()

	// List is sorted by name.
	list, err := env.teams.ListTeams(ctx, &pb.ListTeamsRequest{})
	mustOK(t, err)
	if ts := list.GetTeams(); len(ts) != 2 || ts[0].GetName() != "alpha" || ts[1].GetName() != "zeta" {
		t.Fatalf("ListTeams = %v", ts)
	}

	// Get.
	got, err := env.teams.GetTeam(ctx, &pb.GetTeamRequest{Id: id})
	mustOK(t, err)
	if !proto.Equal(got.GetTeam(), zeta.GetTeam()) || got.GetBudgetStatus() != nil || len(got.GetKeyIds()) != 0 {
		t.Errorf("GetTeam = %v", got)
	}
	_, err = env.teams.GetTeam(ctx, &pb.GetTeamRequest{Id: "team_0000000000000000"})
	st := wantCode(t, err, codes.NotFound)
	if !strings.Contains(st.Message(), "team_0000000000000000") {
		t.Errorf("not-found message does not name the team: %q", st.Message())
	}
	_, err = env.teams.GetTeam(ctx, &pb.GetTeamRequest{})
	wantCode(t, err, codes.InvalidArgument)

	// Update changes only what is set.
	budget := &pb.Budget{LimitNanos: 1_000_000_000, Period: "week"}
	up, err := env.teams.UpdateTeam(ctx, &pb.UpdateTeamRequest{Id: id, Budget: budget})
	mustOK(t, err)
	if tm := up.GetTeam(); tm.GetName() != "zeta" || !proto.Equal(tm.GetBudget(), budget) || len(tm.GetMetadata()) != 2 {
		t.Errorf("after budget update: %v", tm)
	}
	up, err = env.teams.UpdateTeam(ctx, &pb.UpdateTeamRequest{Id: id, Name: proto.String("omega"), Metadata: map[string]string{"a": "", "c": "3"}})
	mustOK(t, err)
	if tm := up.GetTeam(); tm.GetName() != "omega" || !proto.Equal(tm.GetBudget(), budget) {
		t.Errorf("after rename: %v", tm)
	} else if md := tm.GetMetadata(); len(md) != 2 || md["b"] != "2" || md["c"] != "3" {
		t.Errorf("metadata after update = %v", md)
	}
	if v := store.State().Team(id); v == nil || v.Name != "omega" || v.Budget == nil || v.Budget.Period != "week" {
		t.Errorf("data plane team = %+v", v)
	}
	up, err = env.teams.UpdateTeam(ctx, &pb.UpdateTeamRequest{Id: id, ClearBudget: true})
	mustOK(t, err)
	if up.GetTeam().GetBudget() != nil || up.GetTeam().GetName() != "omega" {
		t.Errorf("after clear_budget: %v", up.GetTeam())
	}
	if v := store.State().Team(id); v == nil || v.Budget != nil {
		t.Errorf("data plane team after clear_budget = %+v", v)
	}
	for name, c := range map[string]struct {
		req  *pb.UpdateTeamRequest
		want string
	}{
		"nothing":     {&pb.UpdateTeamRequest{Id: id}, "nothing to update"},
		"no id":       {&pb.UpdateTeamRequest{Name: proto.String("x")}, "team id is required"},
		"blank name":  {&pb.UpdateTeamRequest{Id: id, Name: proto.String(" ")}, "team name is required"},
		"both":        {&pb.UpdateTeamRequest{Id: id, Budget: budget, ClearBudget: true}, "both set"},
		"zero limit":  {&pb.UpdateTeamRequest{Id: id, Budget: &pb.Budget{Period: "day"}}, "limit_nanos must be positive"},
		"bad period":  {&pb.UpdateTeamRequest{Id: id, Budget: &pb.Budget{LimitNanos: 5, Period: "hour"}}, `period "hour"`},
		"bad label":   {&pb.UpdateTeamRequest{Id: id, Metadata: map[string]string{"a b": "c"}}, "metadata key"},
		"long name":   {&pb.UpdateTeamRequest{Id: id, Name: proto.String(strings.Repeat("x", 201))}, "limit is 200"},
		"blank label": {&pb.UpdateTeamRequest{Id: id, Metadata: map[string]string{"": "c"}}, "metadata key"},
	} {
		_, err := env.teams.UpdateTeam(ctx, c.req)
		if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), c.want) {
			t.Errorf("%s: message %q does not contain %q", name, st.Message(), c.want)
		}
	}
	_, err = env.teams.UpdateTeam(ctx, &pb.UpdateTeamRequest{Id: "team_0000000000000000", Name: proto.String("x")})
	wantCode(t, err, codes.NotFound)

	// Delete is refused while keys belong to the team.
	k1, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "k1", TeamId: id})
	mustOK(t, err)
	k2, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "k2", TeamId: id})
	mustOK(t, err)
	_, err = env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "other", TeamId: alpha.GetTeam().GetId()})
	mustOK(t, err)
	got, err = env.teams.GetTeam(ctx, &pb.GetTeamRequest{Id: id})
	mustOK(t, err)
	wantIDs := []string{k1.GetKey().GetId(), k2.GetKey().GetId()}
	if wantIDs[0] > wantIDs[1] {
		wantIDs[0], wantIDs[1] = wantIDs[1], wantIDs[0]
	}
	if ids := got.GetKeyIds(); len(ids) != 2 || ids[0] != wantIDs[0] || ids[1] != wantIDs[1] {
		t.Errorf("key_ids = %v, want %v (sorted)", ids, wantIDs)
	}
	_, err = env.teams.DeleteTeam(ctx, &pb.DeleteTeamRequest{Id: id})
	st = wantCode(t, err, codes.FailedPrecondition)
	if !strings.Contains(st.Message(), "2 key(s)") {
		t.Errorf("delete-refused message = %q", st.Message())
	}
	// Moving the keys out (to no team, to another team) allows it.
	_, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: k1.GetKey().GetId(), TeamId: proto.String("")})
	mustOK(t, err)
	_, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: k2.GetKey().GetId(), TeamId: proto.String(alpha.GetTeam().GetId())})
	mustOK(t, err)
	got, err = env.teams.GetTeam(ctx, &pb.GetTeamRequest{Id: id})
	mustOK(t, err)
	if len(got.GetKeyIds()) != 0 {
		t.Errorf("key_ids after moving the keys out = %v", got.GetKeyIds())
	}
	_, err = env.teams.DeleteTeam(ctx, &pb.DeleteTeamRequest{Id: id})
	mustOK(t, err)
	_, err = env.teams.DeleteTeam(ctx, &pb.DeleteTeamRequest{Id: id})
	wantCode(t, err, codes.NotFound)
	_, err = env.teams.DeleteTeam(ctx, &pb.DeleteTeamRequest{})
	wantCode(t, err, codes.InvalidArgument)
	_, err = env.teams.GetTeam(ctx, &pb.GetTeamRequest{Id: id})
	wantCode(t, err, codes.NotFound)
	list, err = env.teams.ListTeams(ctx, &pb.ListTeamsRequest{})
	mustOK(t, err)
	if ts := list.GetTeams(); len(ts) != 1 || ts[0].GetId() != alpha.GetTeam().GetId() {
		t.Errorf("teams left: %v", ts)
	}
	// alpha still has two keys.
	_, err = env.teams.DeleteTeam(ctx, &pb.DeleteTeamRequest{Id: alpha.GetTeam().GetId()})
	wantCode(t, err, codes.FailedPrecondition)
}
