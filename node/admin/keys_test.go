package admin

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

var (
	keyIDRe  = regexp.MustCompile(`^key_[0-9a-f]{16}$`)
	secretRe = regexp.MustCompile(`^tg-[A-Za-z0-9_-]{40}$`)
)

func TestCreateKey(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)

	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	resp, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{
		Name:      "billing service",
		Models:    []string{"gpt-4o", "claude-*"},
		ExpiresAt: timestamppb.New(exp),
		Metadata:  map[string]string{"team": "billing"},
	})
	mustOK(t, err)
	k, secret := resp.GetKey(), resp.GetSecret()
	if !keyIDRe.MatchString(k.GetId()) {
		t.Errorf("id %q does not look like key_ + 16 hex", k.GetId())
	}
	if !secretRe.MatchString(secret) {
		t.Errorf("secret %q does not look like tg- + base64url(30 bytes)", secret)
	}
	if k.GetSecretPrefix() != secret[:10] {
		t.Errorf("secret_prefix = %q, want %q", k.GetSecretPrefix(), secret[:10])
	}
	if k.GetName() != "billing service" || len(k.GetModels()) != 2 || k.GetMetadata()["team"] != "billing" ||
		!k.GetExpiresAt().AsTime().Equal(exp) || k.GetCreatedAt() == nil {
		t.Errorf("unexpected key: %v", k)
	}
	// The response never carries the hash, in any form.
	sum := raftstore.HashSecret(secret)
	wire, err := proto.Marshal(resp)
	mustOK(t, err)
	if strings.Contains(string(wire), string(sum[:])) {
		t.Error("response contains the secret hash")
	}

	// The secret resolves through the data plane's lookup.
	v := store.State().KeyByHash(raftstore.HashSecret(secret))
	if v == nil || v.ID != k.GetId() || v.Revoked {
		t.Fatalf("KeyByHash(secret) = %+v", v)
	}
	if !v.Allows("gpt-4o") || !v.Allows("claude-3") || v.Allows("llama") {
		t.Error("allow-list not applied")
	}
	if string(store.State().Key(k.GetId()).GetSecretHash()) != string(sum[:]) {
		t.Error("stored hash is not SHA-256 of the secret")
	}

	// Two keys never share an id or a secret.
	resp2, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "other"})
	mustOK(t, err)
	if resp2.GetKey().GetId() == k.GetId() || resp2.GetSecret() == secret {
		t.Error("second key reuses id or secret")
	}
}

func TestCreateKeyValidation(t *testing.T) {
	env := startServer(t, openStore(t))
	ctx := ctxT(t)
	cases := map[string]*pb.CreateKeyRequest{
		"no name":         {},
		"blank name":      {Name: "  "},
		"long name":       {Name: strings.Repeat("n", 201)},
		"empty pattern":   {Name: "a", Models: []string{"gpt-4o", ""}},
		"space pattern":   {Name: "a", Models: []string{"gpt 4o"}},
		"past expiry":     {Name: "a", ExpiresAt: timestamppb.New(time.Now().Add(-time.Minute))},
		"empty label key": {Name: "a", Metadata: map[string]string{"": "x"}},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := env.keys.CreateKey(ctx, req)
			st := wantCode(t, err, codes.InvalidArgument)
			if st.Message() == "" {
				t.Error("empty message")
			}
		})
	}
	_, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: strings.Repeat("n", 200)})
	mustOK(t, err)
}

func TestKeyLifecycle(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)

	a, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "a", Metadata: map[string]string{"team": "x", "env": "prod"}})
	mustOK(t, err)
	b, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "b"})
	mustOK(t, err)
	id := a.GetKey().GetId()

	// Get.
	got, err := env.keys.GetKey(ctx, &pb.GetKeyRequest{Id: id})
	mustOK(t, err)
	if !proto.Equal(got.GetKey(), a.GetKey()) {
		t.Errorf("GetKey = %v, want %v", got.GetKey(), a.GetKey())
	}
	_, err = env.keys.GetKey(ctx, &pb.GetKeyRequest{Id: "key_0000000000000000"})
	wantCode(t, err, codes.NotFound)
	_, err = env.keys.GetKey(ctx, &pb.GetKeyRequest{})
	wantCode(t, err, codes.InvalidArgument)

	// Update changes only what is set.
	up, err := env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{
		Id:       id,
		Models:   &pb.StringList{Values: []string{"gpt-*"}},
		Metadata: map[string]string{"team": "", "owner": "alice"},
	})
	mustOK(t, err)
	k := up.GetKey()
	if k.GetName() != "a" || len(k.GetModels()) != 1 || k.GetModels()[0] != "gpt-*" {
		t.Errorf("after update: %v", k)
	}
	if md := k.GetMetadata(); len(md) != 2 || md["env"] != "prod" || md["owner"] != "alice" {
		t.Errorf("metadata after update = %v", md)
	}
	up, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: id, Name: proto.String("renamed")})
	mustOK(t, err)
	if up.GetKey().GetName() != "renamed" || up.GetKey().GetModels()[0] != "gpt-*" {
		t.Errorf("after rename: %v", up.GetKey())
	}
	exp := timestamppb.New(time.Now().Add(time.Hour))
	up, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: id, ExpiresAt: exp})
	mustOK(t, err)
	if !proto.Equal(up.GetKey().GetExpiresAt(), exp) {
		t.Errorf("expires_at = %v", up.GetKey().GetExpiresAt())
	}
	up, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: id, ClearExpiresAt: true})
	mustOK(t, err)
	if up.GetKey().GetExpiresAt() != nil {
		t.Error("expiry not cleared")
	}
	for name, req := range map[string]*pb.UpdateKeyRequest{
		"nothing":   {Id: id},
		"no id":     {Name: proto.String("x")},
		"blank":     {Id: id, Name: proto.String("")},
		"pattern":   {Id: id, Models: &pb.StringList{Values: []string{"a b"}}},
		"conflict":  {Id: id, ExpiresAt: exp, ClearExpiresAt: true},
		"label key": {Id: id, Metadata: map[string]string{"a b": "c"}},
	} {
		_, err = env.keys.UpdateKey(ctx, req)
		if st := wantCode(t, err, codes.InvalidArgument); st.Message() == "" {
			t.Errorf("%s: empty message", name)
		}
	}
	_, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: "key_0000000000000000", Name: proto.String("x")})
	st := wantCode(t, err, codes.NotFound)
	if !strings.Contains(st.Message(), "key_0000000000000000") {
		t.Errorf("not-found message does not name the key: %q", st.Message())
	}

	// Rotate: the old secret stops resolving, the new one resolves.
	rot, err := env.keys.RotateKey(ctx, &pb.RotateKeyRequest{Id: id})
	mustOK(t, err)
	if rot.GetSecret() == a.GetSecret() || !secretRe.MatchString(rot.GetSecret()) {
		t.Fatalf("rotated secret %q", rot.GetSecret())
	}
	if rot.GetKey().GetSecretPrefix() != rot.GetSecret()[:10] {
		t.Error("prefix not updated on rotate")
	}
	if store.State().KeyByHash(raftstore.HashSecret(a.GetSecret())) != nil {
		t.Error("old secret still resolves after rotate")
	}
	if v := store.State().KeyByHash(raftstore.HashSecret(rot.GetSecret())); v == nil || v.ID != id {
		t.Error("new secret does not resolve after rotate")
	}
	_, err = env.keys.RotateKey(ctx, &pb.RotateKeyRequest{Id: "key_0000000000000000"})
	wantCode(t, err, codes.NotFound)

	// Revoke: the key stays but is refused.
	rev, err := env.keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Id: id})
	mustOK(t, err)
	if rev.GetKey().GetRevokedAt() == nil {
		t.Error("revoked_at not set")
	}
	if v := store.State().KeyByHash(raftstore.HashSecret(rot.GetSecret())); v == nil || !v.Revoked {
		t.Errorf("KeyByHash after revoke = %+v, want Revoked", v)
	}
	_, err = env.keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Id: "key_0000000000000000"})
	wantCode(t, err, codes.NotFound)
	_, err = env.keys.RotateKey(ctx, &pb.RotateKeyRequest{Id: id})
	wantCode(t, err, codes.FailedPrecondition)

	// List hides revoked keys unless asked.
	list, err := env.keys.ListKeys(ctx, &pb.ListKeysRequest{})
	mustOK(t, err)
	if ids := keyIDs(list.GetKeys()); len(ids) != 1 || ids[0] != b.GetKey().GetId() {
		t.Errorf("ListKeys = %v, want only %s", ids, b.GetKey().GetId())
	}
	list, err = env.keys.ListKeys(ctx, &pb.ListKeysRequest{IncludeRevoked: true})
	mustOK(t, err)
	if ids := keyIDs(list.GetKeys()); len(ids) != 2 || ids[0] != id || ids[1] != b.GetKey().GetId() {
		t.Errorf("ListKeys(include_revoked) = %v, want [%s %s] (creation order)", ids, id, b.GetKey().GetId())
	}
	// No response anywhere carries a hash.
	js, err := protojson.Marshal(list)
	mustOK(t, err)
	if strings.Contains(string(js), "secretHash") || strings.Contains(string(js), "secret_hash") {
		t.Errorf("list leaks a hash: %s", js)
	}
}

func keyIDs(keys []*pb.Key) []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.GetId())
	}
	return out
}

func TestKeyTeamAndBudget(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)
	red, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "red"})
	mustOK(t, err)
	blue, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: "blue"})
	mustOK(t, err)
	redID, blueID := red.GetTeam().GetId(), blue.GetTeam().GetId()

	// Create with a team and a budget.
	budget := &pb.Budget{LimitNanos: 10_000_000_000, Period: "day"}
	resp, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "a", TeamId: redID, Budget: budget})
	mustOK(t, err)
	k := resp.GetKey()
	if k.GetTeamId() != redID || !proto.Equal(k.GetBudget(), budget) {
		t.Errorf("created key = %v", k)
	}
	v := store.State().KeyByHash(raftstore.HashSecret(resp.GetSecret()))
	if v == nil || v.TeamID != redID || v.Budget == nil || v.Budget.ID != raftstore.KeyBudgetID(k.GetId()) ||
		v.Budget.LimitNanos != budget.LimitNanos {
		t.Errorf("data plane key = %+v", v)
	}
	id := k.GetId()

	_, err = env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "b", TeamId: "team_0000000000000000"})
	st := wantCode(t, err, codes.FailedPrecondition)
	if !strings.Contains(st.Message(), "team_0000000000000000") || !strings.Contains(st.Message(), "tollctl team create") {
		t.Errorf("unknown-team message = %q", st.Message())
	}
	for name, c := range map[string]struct {
		b    *pb.Budget
		want string
	}{
		"zero limit":     {&pb.Budget{Period: "month"}, "limit_nanos must be positive"},
		"negative limit": {&pb.Budget{LimitNanos: -5, Period: "month"}, "limit_nanos must be positive"},
		"bad period":     {&pb.Budget{LimitNanos: 5, Period: "monthly"}, `period "monthly"`},
		"no period":      {&pb.Budget{LimitNanos: 5}, "period is required"},
	} {
		_, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "b", Budget: c.b})
		if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), c.want) {
			t.Errorf("%s: message %q does not contain %q", name, st.Message(), c.want)
		}
	}
	if n := len(store.State().Keys()); n != 1 {
		t.Errorf("%d keys after rejected creates, want 1", n)
	}

	// Each of the new fields alone is an update.
	up, err := env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: id, TeamId: proto.String(blueID)})
	mustOK(t, err)
	if k := up.GetKey(); k.GetTeamId() != blueID || !proto.Equal(k.GetBudget(), budget) || k.GetName() != "a" {
		t.Errorf("after team move: %v", k)
	}
	budget2 := &pb.Budget{LimitNanos: 3, Period: "total", AllowUnpriced: true}
	up, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: id, Budget: budget2})
	mustOK(t, err)
	if k := up.GetKey(); k.GetTeamId() != blueID || !proto.Equal(k.GetBudget(), budget2) {
		t.Errorf("after budget update: %v", k)
	}
	if v := store.State().Key(id); v == nil || v.GetKey().GetBudget().GetPeriod() != "total" {
		t.Errorf("stored key = %v", v)
	}
	up, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: id, ClearBudget: true})
	mustOK(t, err)
	if k := up.GetKey(); k.GetBudget() != nil || k.GetTeamId() != blueID {
		t.Errorf("after clear_budget: %v", k)
	}
	up, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: id, TeamId: proto.String("")})
	mustOK(t, err)
	if k := up.GetKey(); k.GetTeamId() != "" {
		t.Errorf("after leaving the team: %v", k)
	}
	if v := store.State().KeyByHash(raftstore.HashSecret(resp.GetSecret())); v == nil || v.TeamID != "" || v.Budget != nil {
		t.Errorf("data plane key after updates = %+v", v)
	}

	for name, c := range map[string]struct {
		req  *pb.UpdateKeyRequest
		want string
	}{
		"both":       {&pb.UpdateKeyRequest{Id: id, Budget: budget, ClearBudget: true}, "both set"},
		"zero limit": {&pb.UpdateKeyRequest{Id: id, Budget: &pb.Budget{Period: "day"}}, "limit_nanos must be positive"},
		"bad period": {&pb.UpdateKeyRequest{Id: id, Budget: &pb.Budget{LimitNanos: 1, Period: "fortnight"}}, `period "fortnight"`},
	} {
		_, err := env.keys.UpdateKey(ctx, c.req)
		if st := wantCode(t, err, codes.InvalidArgument); !strings.Contains(st.Message(), c.want) {
			t.Errorf("%s: message %q does not contain %q", name, st.Message(), c.want)
		}
	}
	_, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: id, TeamId: proto.String("team_0000000000000000")})
	st = wantCode(t, err, codes.FailedPrecondition)
	if !strings.Contains(st.Message(), "tollctl team create") {
		t.Errorf("unknown-team message = %q", st.Message())
	}
	_, err = env.keys.UpdateKey(ctx, &pb.UpdateKeyRequest{Id: "key_0000000000000000", ClearBudget: true})
	wantCode(t, err, codes.NotFound)
}
