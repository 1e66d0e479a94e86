package admin

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

const (
	keyIDPrefix      = "key_"
	secretPrefix     = "tg-"
	secretRandBytes  = 30
	secretPrefixLen  = 10
	keyIDRandomBytes = 8
)

// publicKey returns the key as the API shows it: a copy, without the hash.
func publicKey(sk *pb.StoredKey) *pb.Key {
	if sk.GetKey() == nil {
		return nil
	}
	return proto.Clone(sk.GetKey()).(*pb.Key)
}

func checkKeyName(name string) error {
	if strings.TrimSpace(name) == "" {
		return invalid("key name is required (for example the service or person that uses the key)")
	}
	return checkText("key name", name)
}

func checkKeyID(id string) error {
	if id == "" {
		return invalid("key id is required")
	}
	return nil
}

func checkTimestamp(what string, ts *timestamppb.Timestamp) error {
	if err := ts.CheckValid(); err != nil {
		return invalid("%s is not a valid time: %v", what, err)
	}
	return nil
}

func (k keyService) CreateKey(ctx context.Context, req *pb.CreateKeyRequest) (*pb.CreateKeyResponse, error) {
	if err := checkKeyName(req.GetName()); err != nil {
		return nil, err
	}
	if err := checkModelPatterns(req.GetModels()); err != nil {
		return nil, err
	}
	if err := checkMetadata(req.GetMetadata(), false); err != nil {
		return nil, err
	}
	if req.ExpiresAt != nil {
		if err := checkTimestamp("expires_at", req.ExpiresAt); err != nil {
			return nil, err
		}
		if !req.ExpiresAt.AsTime().After(k.s.now()) {
			return nil, invalid("expires_at %s is in the past; give a time in the future or none for a key that never expires",
				req.ExpiresAt.AsTime().Format("2006-01-02T15:04:05Z07:00"))
		}
	}
	if err := checkBudget("key budget", req.GetBudget()); err != nil {
		return nil, err
	}
	if err := checkRateLimits("key", req.GetLimits()); err != nil {
		return nil, err
	}
	if err := checkTeamExists(k.s.store.State(), req.GetTeamId()); err != nil {
		return nil, err
	}
	rid, err := RequestID(ctx)
	if err != nil {
		return nil, err
	}
	secret, hash, prefix, err := secretFromSeed(req.GetSecretSeed())
	if err != nil {
		return nil, err
	}
	key := &pb.Key{
		Id:           derivedID(keyIDPrefix, "key", rid),
		Name:         req.GetName(),
		SecretPrefix: prefix,
		Models:       append([]string(nil), req.GetModels()...),
		ExpiresAt:    req.GetExpiresAt(),
		Metadata:     maps.Clone(req.GetMetadata()),
		TeamId:       req.GetTeamId(),
		Budget:       cloneBudget(req.GetBudget()),
		Limits:       req.GetLimits(),
	}
	cmd := &pb.Command{Op: &pb.Command_CreateKey{CreateKey: &pb.CreateKeyCommand{
		Key: &pb.StoredKey{Key: key, SecretHash: hash},
	}}}
	res, err := k.s.apply(ctx, cmd)
	sk, err := k.s.retriedKey(ctx, rid, key.GetId(), hash, res, err, "created")
	if err != nil {
		return nil, err
	}
	return &pb.CreateKeyResponse{Key: publicKey(sk), Secret: secret}, nil
}

func (k keyService) ListKeys(_ context.Context, req *pb.ListKeysRequest) (*pb.ListKeysResponse, error) {
	f, err := newKeyFilter(req)
	if err != nil {
		return nil, err
	}
	st := k.s.store.State()
	if req.GetPageSize() == 0 {
		// Every match in one answer, in creation order (tollctl).
		var out []*pb.Key
		for _, sk := range st.Keys() {
			if f.match(sk) {
				out = append(out, publicKey(sk))
			}
		}
		return &pb.ListKeysResponse{Keys: out, Total: uint32(len(out))}, nil
	}
	return f.page(st, int(req.GetPageSize()), &k.s.keyTotals), nil
}

func (k keyService) GetKey(_ context.Context, req *pb.GetKeyRequest) (*pb.GetKeyResponse, error) {
	if err := checkKeyID(req.GetId()); err != nil {
		return nil, err
	}
	st := k.s.store.State()
	sk := st.Key(req.GetId())
	if sk == nil {
		return nil, status.Errorf(codes.NotFound, "key %q not found", req.GetId())
	}
	key := publicKey(sk)
	now := k.s.now()
	resp := &pb.GetKeyResponse{
		Key:          key,
		BudgetStatus: budgetStatus(st, raftstore.KeyBudgetID(key.GetId()), key.GetBudget(), now),
	}
	if tid := key.GetTeamId(); tid != "" {
		resp.TeamBudgetStatus = budgetStatus(st, raftstore.TeamBudgetID(tid), st.TeamConfig(tid).GetBudget(), now)
	}
	return resp, nil
}

func (k keyService) UpdateKey(ctx context.Context, req *pb.UpdateKeyRequest) (*pb.UpdateKeyResponse, error) {
	if err := checkKeyID(req.GetId()); err != nil {
		return nil, err
	}
	if req.Name == nil && req.Models == nil && req.ExpiresAt == nil && !req.GetClearExpiresAt() && len(req.GetMetadata()) == 0 &&
		req.TeamId == nil && req.Budget == nil && !req.GetClearBudget() && req.Limits == nil {
		return nil, invalid("nothing to update: set at least one of name, models, expires_at, clear_expires_at, metadata, " +
			"team_id, budget, clear_budget, limits")
	}
	if err := checkRateLimits("key", req.GetLimits()); err != nil {
		return nil, err
	}
	if req.Name != nil {
		if err := checkKeyName(req.GetName()); err != nil {
			return nil, err
		}
	}
	if err := checkModelPatterns(req.GetModels().GetValues()); err != nil {
		return nil, err
	}
	if req.ExpiresAt != nil {
		if req.GetClearExpiresAt() {
			return nil, invalid("expires_at and clear_expires_at are both set; give one")
		}
		if err := checkTimestamp("expires_at", req.ExpiresAt); err != nil {
			return nil, err
		}
	}
	if err := checkMetadata(req.GetMetadata(), true); err != nil {
		return nil, err
	}
	if req.Budget != nil {
		if req.GetClearBudget() {
			return nil, invalid("budget and clear_budget are both set; give one")
		}
		if err := checkBudget("key budget", req.Budget); err != nil {
			return nil, err
		}
	}
	if req.TeamId != nil {
		if err := checkTeamExists(k.s.store.State(), req.GetTeamId()); err != nil {
			return nil, err
		}
	}
	cmd := &pb.Command{Op: &pb.Command_UpdateKey{UpdateKey: &pb.UpdateKeyCommand{
		Update: proto.Clone(req).(*pb.UpdateKeyRequest),
	}}}
	sk, err := applyAs[*pb.StoredKey](ctx, k.s, cmd, false)
	if err != nil {
		return nil, err
	}
	return &pb.UpdateKeyResponse{Key: publicKey(sk)}, nil
}

func (k keyService) RevokeKey(ctx context.Context, req *pb.RevokeKeyRequest) (*pb.RevokeKeyResponse, error) {
	if err := checkKeyID(req.GetId()); err != nil {
		return nil, err
	}
	cmd := &pb.Command{Op: &pb.Command_RevokeKey{RevokeKey: &pb.RevokeKeyCommand{Id: req.GetId()}}}
	sk, err := applyAs[*pb.StoredKey](ctx, k.s, cmd, false)
	if err != nil {
		return nil, err
	}
	return &pb.RevokeKeyResponse{Key: publicKey(sk)}, nil
}

func (k keyService) RotateKey(ctx context.Context, req *pb.RotateKeyRequest) (*pb.RotateKeyResponse, error) {
	if err := checkKeyID(req.GetId()); err != nil {
		return nil, err
	}
	rid, err := RequestID(ctx)
	if err != nil {
		return nil, err
	}
	secret, hash, prefix, err := secretFromSeed(req.GetSecretSeed())
	if err != nil {
		return nil, err
	}
	cmd := &pb.Command{Op: &pb.Command_RotateKey{RotateKey: &pb.RotateKeyCommand{
		Id: req.GetId(), SecretHash: hash, SecretPrefix: prefix,
	}}}
	res, err := k.s.apply(ctx, cmd)
	sk, err := k.s.retriedKey(ctx, rid, req.GetId(), hash, res, err, "rotated")
	if err != nil {
		return nil, err
	}
	return &pb.RotateKeyResponse{Key: publicKey(sk), Secret: secret}, nil
}

// retriedKey returns the key a create or rotate applied. When the call
// carries a request id it may be a retry whose first attempt was applied
// already (the leader lost office before it answered): the state machine
// then reports the key as existing (or, remembering the request id, hands
// back the first attempt's result), and the key in the state tells
// whether it holds this call's secret. A retry with the same secret seed
// succeeds as the first attempt would have; one without cannot show the
// secret again, and says to rotate.
func (s *Server) retriedKey(ctx context.Context, rid, id string, hash []byte, res proto.Message, err error, did string) (*pb.StoredKey, error) {
	if rid == "" || (err != nil && status.Code(err) != codes.AlreadyExists) {
		if err != nil {
			return nil, err
		}
		return asKey(ctx, s, res)
	}
	sk, ok := res.(*pb.StoredKey)
	if err != nil || !ok {
		sk = s.store.State().Key(id)
	}
	switch {
	case sk == nil && err != nil:
		return nil, err
	case sk == nil:
		return asKey(ctx, s, res)
	case bytes.Equal(sk.GetSecretHash(), hash):
		return sk, nil
	}
	return nil, status.Errorf(codes.FailedPrecondition,
		"key %s was %s by an earlier attempt of this request (request id %s), whose secret cannot be shown again: rotate it with: tollctl key rotate %s",
		id, did, rid, id)
}

func asKey(ctx context.Context, s *Server, res proto.Message) (*pb.StoredKey, error) {
	sk, ok := res.(*pb.StoredKey)
	if !ok {
		s.log.ErrorContext(ctx, "admin: unexpected apply result", "want", "*StoredKey", "got", fmt.Sprintf("%T", res))
		return nil, status.Error(codes.Internal, "internal error: unexpected result from the store")
	}
	return sk, nil
}
