package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"

	"google.golang.org/grpc/status"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// minImportedSecret is the shortest secret an import may bring along: a
// migrated key must still be hard to guess.
const minImportedSecret = 20

// importedKeyID is the id of the key called name in the import importID:
// the same on every run, so a run again recognises the keys it made.
func importedKeyID(importID, name string) string {
	h := sha256.Sum256([]byte(importID + "\x00" + name))
	return keyIDPrefix + hex.EncodeToString(h[:keyIDRandomBytes])
}

// ImportKeys creates a batch of keys in one replicated write: all of them,
// or none when one is refused (the error names its position, counted from
// 1). Keys already made by an earlier run of the same import are skipped.
func (k keyService) ImportKeys(ctx context.Context, req *pb.ImportKeysRequest) (*pb.ImportKeysResponse, error) {
	if err := checkName("import_id", req.GetImportId()); err != nil {
		return nil, err
	}
	if n := len(req.GetKeys()); n == 0 || n > raftstore.MaxImportBatch {
		return nil, invalid("an import batch holds 1 to %d keys; got %d", raftstore.MaxImportBatch, n)
	}
	st := k.s.store.State()
	now := k.s.now()
	cmd := &pb.ImportKeysCommand{Keys: make([]*pb.StoredKey, len(req.GetKeys()))}
	secrets := make([]string, len(req.GetKeys()))
	seen := make(map[string]int, len(req.GetKeys()))
	for i, ik := range req.GetKeys() {
		if err := checkImportedKey(st, ik, now.UnixNano()); err != nil {
			return nil, invalid("key %d of the batch (%q): %s", i+1, ik.GetName(), statusMessage(err))
		}
		if j, dup := seen[ik.GetName()]; dup {
			return nil, invalid("key %d of the batch has the same name as key %d (%q): names identify keys within an import", i+1, j+1, ik.GetName())
		}
		seen[ik.GetName()] = i
		secret, hash, prefix := ik.GetSecret(), []byte(nil), ""
		if secret == "" {
			secret, hash, prefix = newSecret()
			secrets[i] = secret
		} else {
			h := raftstore.HashSecret(secret)
			hash, prefix = h[:], secret[:min(secretPrefixLen, len(secret)/2)]
		}
		cmd.Keys[i] = &pb.StoredKey{SecretHash: hash, Key: &pb.Key{
			Id:           importedKeyID(req.GetImportId(), ik.GetName()),
			Name:         ik.GetName(),
			SecretPrefix: prefix,
			Models:       append([]string(nil), ik.GetModels()...),
			ExpiresAt:    ik.GetExpiresAt(),
			Metadata:     maps.Clone(ik.GetMetadata()),
			TeamId:       ik.GetTeamId(),
			Budget:       cloneBudget(ik.GetBudget()),
			Limits:       ik.GetLimits(),
		}}
	}
	res, err := applyAs[*pb.ImportKeysResult](ctx, k.s, &pb.Command{Op: &pb.Command_ImportKeys{ImportKeys: cmd}}, false)
	if err != nil {
		return nil, err
	}
	out := &pb.ImportKeysResponse{Results: make([]*pb.ImportKeyResult, len(cmd.Keys))}
	for i, sk := range cmd.Keys {
		r := &pb.ImportKeyResult{Id: sk.GetKey().GetId()}
		if i < len(res.GetSkipped()) && res.GetSkipped()[i] {
			r.Skipped = true
			out.Skipped++
		} else {
			r.Secret = secrets[i]
			out.Imported++
		}
		out.Results[i] = r
	}
	return out, nil
}

// checkImportedKey checks one key of an import as CreateKey checks its
// request; nowNanos is the time expiries must lie after.
func checkImportedKey(st *raftstore.State, ik *pb.ImportedKey, nowNanos int64) error {
	if err := checkKeyName(ik.GetName()); err != nil {
		return err
	}
	if err := checkModelPatterns(ik.GetModels()); err != nil {
		return err
	}
	if err := checkMetadata(ik.GetMetadata(), false); err != nil {
		return err
	}
	if ik.ExpiresAt != nil {
		if err := checkTimestamp("expires_at", ik.ExpiresAt); err != nil {
			return err
		}
		if ik.ExpiresAt.AsTime().UnixNano() <= nowNanos {
			return invalid("expires_at %s is in the past", ik.ExpiresAt.AsTime().Format("2006-01-02T15:04:05Z07:00"))
		}
	}
	if s := ik.GetSecret(); s != "" && (len(s) < minImportedSecret || strings.TrimSpace(s) != s || !isPrintableASCII(s)) {
		return invalid("secret must be at least %d printable ASCII characters without spaces", minImportedSecret)
	}
	if err := checkBudget("key budget", ik.GetBudget()); err != nil {
		return err
	}
	if err := checkRateLimits("key", ik.GetLimits()); err != nil {
		return err
	}
	return checkTeamExists(st, ik.GetTeamId())
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// statusMessage is the message of a gRPC status error, without its code.
func statusMessage(err error) string { return status.Convert(err).Message() }
