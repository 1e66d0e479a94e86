package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

type checkFunc func(t *testing.T, before, after *State, val proto.Message, now int64)

type cmdCase struct {
	name    string
	setup   []*pb.Command // applied after the fixture
	cmd     *pb.Command
	wantErr error // nil: the command must succeed
	check   checkFunc
}

func keyView(t *testing.T, st *State, secret string) *Key {
	t.Helper()
	k := st.KeyByHash(HashSecret(secret))
	if k == nil {
		t.Fatalf("KeyByHash(%q) = nil", secret)
	}
	return k
}

func routeView(t *testing.T, st *State, name string) *Route {
	t.Helper()
	r := st.Route(name)
	if r == nil {
		t.Fatalf("Route(%q) = nil", name)
	}
	return r
}

func depIDs(r *Route) []string {
	var ids []string
	for _, d := range r.Deployments {
		ids = append(ids, d.ID)
	}
	return ids
}

func storedKey(t *testing.T, val proto.Message) *pb.StoredKey {
	t.Helper()
	sk, ok := val.(*pb.StoredKey)
	if !ok {
		t.Fatalf("result is %T, want *pb.StoredKey", val)
	}
	return sk
}

func modelRoute(t *testing.T, val proto.Message) *pb.ModelRoute {
	t.Helper()
	r, ok := val.(*pb.ModelRoute)
	if !ok {
		t.Fatalf("result is %T, want *pb.ModelRoute", val)
	}
	return r
}

func wantTS(t *testing.T, what string, got *timestamppb.Timestamp, nanos int64) {
	t.Helper()
	if !proto.Equal(got, ts(nanos)) {
		t.Errorf("%s = %v, want %v", what, got.AsTime(), timeOf(nanos))
	}
}

func keyCases() []cmdCase {
	badHash := createKeyCmd("k3", "s3")
	badHash.GetCreateKey().Key.SecretHash = bytes.Repeat([]byte{1}, 31)
	noHash := createKeyCmd("k3", "s3")
	noHash.GetCreateKey().Key.SecretHash = nil
	stamped := createKeyCmd("k3", "s3")
	stamped.GetCreateKey().Key.Key.CreatedAt = ts(1)
	stamped.GetCreateKey().Key.Key.UpdatedAt = ts(2)
	stamped.GetCreateKey().Key.Key.RevokedAt = ts(3)
	expiring := createKeyCmd("k3", "s3")
	expiring.GetCreateKey().Key.Key.ExpiresAt = ts(baseNanos + 3600e9)
	expiryAt := baseNanos + 7200e9

	return []cmdCase{
		{name: "CreateKey", cmd: createKeyCmd("k3", "s3", "gpt-4*", "o1"), check: func(t *testing.T, before, after *State, val proto.Message, now int64) {
			sk := storedKey(t, val)
			if !proto.Equal(after.Key("k3"), sk) {
				t.Errorf("Key(k3) = %v, want the result %v", after.Key("k3"), sk)
			}
			wantTS(t, "CreatedAt", sk.Key.CreatedAt, now)
			wantTS(t, "UpdatedAt", sk.Key.UpdatedAt, now)
			if sk.Key.RevokedAt != nil || sk.Key.ExpiresAt != nil {
				t.Errorf("RevokedAt/ExpiresAt = %v/%v, want unset", sk.Key.RevokedAt, sk.Key.ExpiresAt)
			}
			k := keyView(t, after, "s3")
			if k.ID != "k3" || k.Name != "name-k3" || k.Revoked || k.ExpiresAt != 0 {
				t.Errorf("view = %+v", k)
			}
			if !k.Allows("gpt-4o") || !k.Allows("o1") || k.Allows("o1-mini") {
				t.Errorf("view allow-list wrong: %+v", k)
			}
			if before.Key("k3") != nil || before.KeyByHash(HashSecret("s3")) != nil {
				t.Error("old state sees the new key")
			}
			if n := len(after.Keys()); n != 3 {
				t.Errorf("%d keys, want 3", n)
			}
		}},
		{name: "CreateKey ignores proposed timestamps", cmd: stamped, check: func(t *testing.T, _, after *State, val proto.Message, now int64) {
			sk := storedKey(t, val)
			wantTS(t, "CreatedAt", sk.Key.CreatedAt, now)
			wantTS(t, "UpdatedAt", sk.Key.UpdatedAt, now)
			if sk.Key.RevokedAt != nil {
				t.Errorf("RevokedAt = %v, want unset", sk.Key.RevokedAt)
			}
			if keyView(t, after, "s3").Revoked {
				t.Error("new key is revoked")
			}
		}},
		{name: "CreateKey with expiry", cmd: expiring, check: func(t *testing.T, _, after *State, _ proto.Message, _ int64) {
			if got, want := keyView(t, after, "s3").ExpiresAt, baseNanos+3600e9; got != want {
				t.Errorf("ExpiresAt = %d, want %d", got, want)
			}
		}},
		{name: "CreateKey duplicate id", cmd: createKeyCmd("k1", "other"), wantErr: ErrAlreadyExists},
		{name: "CreateKey duplicate hash", cmd: createKeyCmd("k3", "s1"), wantErr: ErrAlreadyExists},
		{name: "CreateKey duplicate hash of revoked key", cmd: createKeyCmd("k3", "s2"), wantErr: ErrAlreadyExists},
		{name: "CreateKey short hash", cmd: badHash, wantErr: ErrInvalid},
		{name: "CreateKey no hash", cmd: noHash, wantErr: ErrInvalid},
		{name: "CreateKey empty id", cmd: createKeyCmd("", "s3"), wantErr: ErrInvalid},
		{name: "CreateKey no key", cmd: &pb.Command{Op: &pb.Command_CreateKey{CreateKey: &pb.CreateKeyCommand{}}}, wantErr: ErrInvalid},

		{name: "UpdateKey name", cmd: updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", Name: proto.String("renamed")}), check: func(t *testing.T, before, after *State, val proto.Message, now int64) {
			sk := storedKey(t, val)
			old := before.Key("k1")
			if sk.Key.Name != "renamed" || keyView(t, after, "s1").Name != "renamed" {
				t.Errorf("name = %q / view %q", sk.Key.Name, keyView(t, after, "s1").Name)
			}
			if !slices.Equal(sk.Key.Models, old.Key.Models) {
				t.Errorf("models = %v, want unchanged %v", sk.Key.Models, old.Key.Models)
			}
			if len(sk.Key.Metadata) != 2 {
				t.Errorf("metadata = %v, want unchanged", sk.Key.Metadata)
			}
			if !proto.Equal(sk.Key.CreatedAt, old.Key.CreatedAt) {
				t.Errorf("CreatedAt changed")
			}
			wantTS(t, "UpdatedAt", sk.Key.UpdatedAt, now)
			if !bytes.Equal(sk.SecretHash, old.SecretHash) || sk.Key.SecretPrefix != old.Key.SecretPrefix {
				t.Error("secret changed")
			}
			if !keyView(t, after, "s1").Allows("gpt-4o") {
				t.Error("allow-list lost")
			}
		}},
		{name: "UpdateKey models replace", cmd: updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", Models: &pb.StringList{Values: []string{"o1", "*-mini"}}}), check: func(t *testing.T, _, after *State, val proto.Message, _ int64) {
			if got := storedKey(t, val).Key.Models; !slices.Equal(got, []string{"o1", "*-mini"}) {
				t.Errorf("models = %v", got)
			}
			k := keyView(t, after, "s1")
			for m, want := range map[string]bool{"o1": true, "gpt-4o-mini": true, "gpt-4o": false, "claude-3": false} {
				if k.Allows(m) != want {
					t.Errorf("Allows(%q) = %v, want %v", m, !want, want)
				}
			}
		}},
		{name: "UpdateKey empty models allows all", cmd: updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", Models: &pb.StringList{}}), check: func(t *testing.T, _, after *State, val proto.Message, _ int64) {
			if got := storedKey(t, val).Key.Models; len(got) != 0 {
				t.Errorf("models = %v, want none", got)
			}
			if k := keyView(t, after, "s1"); !k.Allows("anything") || !k.Allows("") {
				t.Error("key with empty allow-list does not allow everything")
			}
		}},
		{name: "UpdateKey set expiry", cmd: updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", ExpiresAt: ts(expiryAt)}), check: func(t *testing.T, _, after *State, val proto.Message, _ int64) {
			wantTS(t, "ExpiresAt", storedKey(t, val).Key.ExpiresAt, expiryAt)
			k := keyView(t, after, "s1")
			if k.ExpiresAt != expiryAt || k.Expired(expiryAt-1) || !k.Expired(expiryAt) {
				t.Errorf("view ExpiresAt = %d, want %d", k.ExpiresAt, expiryAt)
			}
		}},
		{name: "UpdateKey clear expiry",
			setup: []*pb.Command{updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", ExpiresAt: ts(expiryAt)})},
			cmd:   updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", ClearExpiresAt: true}),
			check: func(t *testing.T, before, after *State, val proto.Message, _ int64) {
				if keyView(t, before, "s1").ExpiresAt != expiryAt {
					t.Fatal("setup did not set the expiry")
				}
				if e := storedKey(t, val).Key.ExpiresAt; e != nil {
					t.Errorf("ExpiresAt = %v, want unset", e)
				}
				if k := keyView(t, after, "s1"); k.ExpiresAt != 0 || k.Expired(1<<62) {
					t.Errorf("view ExpiresAt = %d, want 0", k.ExpiresAt)
				}
			}},
		{name: "UpdateKey clear wins over set", cmd: updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", ExpiresAt: ts(expiryAt), ClearExpiresAt: true}), check: func(t *testing.T, _, _ *State, val proto.Message, _ int64) {
			if e := storedKey(t, val).Key.ExpiresAt; e != nil {
				t.Errorf("ExpiresAt = %v, want unset", e)
			}
		}},
		{name: "UpdateKey metadata merge and delete", cmd: updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", Metadata: map[string]string{"team": "b", "env": "", "new": "x", "absent": ""}}), check: func(t *testing.T, _, after *State, val proto.Message, _ int64) {
			want := map[string]string{"team": "b", "new": "x"}
			if got := storedKey(t, val).Key.Metadata; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("metadata = %v, want %v", got, want)
			}
			if got := after.Key("k1").Key.Metadata; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("stored metadata = %v, want %v", got, want)
			}
		}},
		{name: "UpdateKey metadata on key without any", cmd: updateKeyCmd(&pb.UpdateKeyRequest{Id: "k2", Metadata: map[string]string{"owner": "ops"}}), check: func(t *testing.T, _, _ *State, val proto.Message, _ int64) {
			if got := storedKey(t, val).Key.Metadata; len(got) != 1 || got["owner"] != "ops" {
				t.Errorf("metadata = %v", got)
			}
		}},
		{name: "UpdateKey revoked key stays revoked", cmd: updateKeyCmd(&pb.UpdateKeyRequest{Id: "k2", Name: proto.String("x")}), check: func(t *testing.T, _, after *State, val proto.Message, _ int64) {
			if storedKey(t, val).Key.RevokedAt == nil || !keyView(t, after, "s2").Revoked {
				t.Error("update un-revoked the key")
			}
		}},
		{name: "UpdateKey not found", cmd: updateKeyCmd(&pb.UpdateKeyRequest{Id: "nope", Name: proto.String("x")}), wantErr: ErrNotFound},
		{name: "UpdateKey no request", cmd: &pb.Command{Op: &pb.Command_UpdateKey{UpdateKey: &pb.UpdateKeyCommand{}}}, wantErr: ErrNotFound},

		{name: "RevokeKey", cmd: revokeKeyCmd("k1"), check: func(t *testing.T, before, after *State, val proto.Message, now int64) {
			sk := storedKey(t, val)
			wantTS(t, "RevokedAt", sk.Key.RevokedAt, now)
			wantTS(t, "UpdatedAt", sk.Key.UpdatedAt, now)
			if k := keyView(t, after, "s1"); !k.Revoked || k.ID != "k1" {
				t.Errorf("view = %+v, want revoked k1", k)
			}
			if keyView(t, before, "s1").Revoked {
				t.Error("old view is revoked")
			}
		}},
		{name: "RevokeKey again is a no-op", cmd: revokeKeyCmd("k2"), check: func(t *testing.T, before, after *State, val proto.Message, _ int64) {
			sk := storedKey(t, val)
			if !proto.Equal(sk, before.Key("k2")) {
				t.Errorf("result = %v, want the unchanged key %v", sk, before.Key("k2"))
			}
			if !bytes.Equal(contentBytes(t, before), contentBytes(t, after)) {
				t.Error("second revoke changed the state")
			}
			if after.Index != before.Index+1 {
				t.Errorf("Index = %d, want %d", after.Index, before.Index+1)
			}
		}},
		{name: "RevokeKey not found", cmd: revokeKeyCmd("nope"), wantErr: ErrNotFound},

		{name: "RotateKey", cmd: rotateKeyCmd("k1", "s1-new"), check: func(t *testing.T, before, after *State, val proto.Message, now int64) {
			sk := storedKey(t, val)
			if !bytes.Equal(sk.SecretHash, hashOf("s1-new")) || sk.Key.SecretPrefix != "s1-n" {
				t.Errorf("secret = %x / %q", sk.SecretHash, sk.Key.SecretPrefix)
			}
			wantTS(t, "UpdatedAt", sk.Key.UpdatedAt, now)
			if after.KeyByHash(HashSecret("s1")) != nil {
				t.Error("old secret still resolves")
			}
			if k := keyView(t, after, "s1-new"); k.ID != "k1" || !k.Allows("gpt-4o") {
				t.Errorf("new secret resolves to %+v", k)
			}
			if before.KeyByHash(HashSecret("s1")) == nil || before.KeyByHash(HashSecret("s1-new")) != nil {
				t.Error("old state changed")
			}
			if !proto.Equal(after.Key("k1"), sk) {
				t.Error("Key(k1) is not the result")
			}
			if after.keys.Len() != 2 || after.keysByHash.Len() != 2 || after.keysByCreated.Len() != 2 {
				t.Errorf("%d keys / %d hashes / %d by time, want 2 / 2 / 2", after.keys.Len(), after.keysByHash.Len(), after.keysByCreated.Len())
			}
			old := before.Key("k1").Key
			if !proto.Equal(sk.Key.CreatedAt, old.CreatedAt) || len(sk.Key.Metadata) != 2 || !slices.Equal(sk.Key.Models, old.Models) {
				t.Error("rotation changed more than the secret")
			}
		}},
		{name: "RotateKey revoked", cmd: rotateKeyCmd("k2", "s2-new"), wantErr: ErrFailedPrecondition},
		{name: "RotateKey not found", cmd: rotateKeyCmd("nope", "x"), wantErr: ErrNotFound},
		{name: "RotateKey to another key's secret", cmd: rotateKeyCmd("k1", "s2"), wantErr: ErrAlreadyExists},
		{name: "RotateKey to its own secret", cmd: rotateKeyCmd("k1", "s1"), wantErr: ErrAlreadyExists},
		{name: "RotateKey bad hash", cmd: &pb.Command{Op: &pb.Command_RotateKey{RotateKey: &pb.RotateKeyCommand{Id: "k1", SecretHash: []byte("short")}}}, wantErr: ErrInvalid},
	}
}

func routeCases() []cmdCase {
	zeroWeight := dep("z", "demo", "")
	zeroWeight.Weight = 0
	return []cmdCase{
		{name: "AddDeployment creates route", cmd: addDeploymentCmd("o1", dep("x", "openai", "openai")), check: func(t *testing.T, before, after *State, val proto.Message, now int64) {
			r := modelRoute(t, val)
			if !proto.Equal(after.RouteConfig("o1"), r) {
				t.Error("RouteConfig(o1) is not the result")
			}
			wantTS(t, "CreatedAt", r.CreatedAt, now)
			wantTS(t, "UpdatedAt", r.UpdatedAt, now)
			if !proto.Equal(r.Deployments[0], dep("x", "openai", "openai")) {
				t.Errorf("deployment = %v", r.Deployments[0])
			}
			if got := after.RouteNames(); !slices.Equal(got, []string{"gpt-4o", "o1", "solo"}) {
				t.Errorf("RouteNames = %v", got)
			}
			v := routeView(t, after, "o1")
			want := Deployment{ID: "x", Provider: "openai", BaseURL: "https://x.example/v1", UpstreamModel: "up-x",
				Weight: 2, Priority: 1, TimeoutMillis: 3000, Credential: "sk-openai", CredentialName: "openai", Key: "o1/x"}
			if v.Name != "o1" || v.Created != now/1e9 || len(v.Deployments) != 1 || !reflect.DeepEqual(*v.Deployments[0], want) {
				t.Errorf("view = %+v %+v, want created %d and %+v", v, v.Deployments, now/1e9, want)
			}
			if before.Route("o1") != nil || slices.Contains(before.RouteNames(), "o1") {
				t.Error("old state sees the new route")
			}
		}},
		{name: "AddDeployment appends", cmd: addDeploymentCmd("gpt-4o", dep("d3", "openai", "")), check: func(t *testing.T, before, after *State, val proto.Message, now int64) {
			r := modelRoute(t, val)
			if !proto.Equal(r.CreatedAt, before.RouteConfig("gpt-4o").CreatedAt) {
				t.Error("CreatedAt changed")
			}
			wantTS(t, "UpdatedAt", r.UpdatedAt, now)
			if got := depIDs(routeView(t, after, "gpt-4o")); !slices.Equal(got, []string{"d1", "d2", "d3"}) {
				t.Errorf("deployments = %v", got)
			}
			if got := depIDs(routeView(t, before, "gpt-4o")); !slices.Equal(got, []string{"d1", "d2"}) {
				t.Errorf("old deployments = %v", got)
			}
		}},
		{name: "AddDeployment zero weight counts as one", cmd: addDeploymentCmd("z", zeroWeight), check: func(t *testing.T, _, after *State, _ proto.Message, _ int64) {
			if w := routeView(t, after, "z").Deployments[0].Weight; w != 1 {
				t.Errorf("Weight = %d, want 1", w)
			}
		}},
		{name: "AddDeployment same id on another route", cmd: addDeploymentCmd("solo", dep("d1", "demo", "")), check: func(t *testing.T, _, after *State, _ proto.Message, _ int64) {
			if got := depIDs(routeView(t, after, "solo")); !slices.Equal(got, []string{"only", "d1"}) {
				t.Errorf("deployments = %v", got)
			}
		}},
		{name: "AddDeployment duplicate id", cmd: addDeploymentCmd("gpt-4o", dep("d1", "openai", "")), wantErr: ErrAlreadyExists},
		{name: "AddDeployment empty route", cmd: addDeploymentCmd("", dep("x", "openai", "")), wantErr: ErrInvalid},
		{name: "AddDeployment empty id", cmd: addDeploymentCmd("o1", dep("", "openai", "")), wantErr: ErrInvalid},
		{name: "AddDeployment empty provider", cmd: addDeploymentCmd("o1", dep("x", "", "")), wantErr: ErrInvalid},
		{name: "AddDeployment no deployment", cmd: addDeploymentCmd("o1", nil), wantErr: ErrInvalid},

		{name: "UpdateDeployment patches set fields only", cmd: updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "gpt-4o", DeploymentId: "d1", BaseUrl: proto.String("https://new.example/v2//"), Weight: proto.Uint32(9)}), check: func(t *testing.T, before, after *State, val proto.Message, now int64) {
			r := modelRoute(t, val)
			want := proto.Clone(before.RouteConfig("gpt-4o").Deployments[0]).(*pb.Deployment)
			want.BaseUrl, want.Weight = "https://new.example/v2//", 9
			if !proto.Equal(r.Deployments[0], want) {
				t.Errorf("d1 = %v, want %v", r.Deployments[0], want)
			}
			if !proto.Equal(r.Deployments[1], before.RouteConfig("gpt-4o").Deployments[1]) {
				t.Error("d2 changed")
			}
			wantTS(t, "UpdatedAt", r.UpdatedAt, now)
			if d := routeView(t, after, "gpt-4o").Deployments[0]; d.BaseURL != "https://new.example/v2" || d.Weight != 9 || d.Credential != "sk-openai" {
				t.Errorf("view = %+v", d)
			}
		}},
		{name: "UpdateDeployment every field", cmd: updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "gpt-4o", DeploymentId: "d2",
			Provider: proto.String("openai-compatible"), BaseUrl: proto.String("http://b"), UpstreamModel: proto.String("m"),
			Credential: proto.String("openai"), Weight: proto.Uint32(5), Priority: proto.Uint32(0), TimeoutMs: proto.Uint32(10),
			SetOptions: true, Options: map[string]string{"region": "eu-west-1"}, FirstTokenTimeoutMs: proto.Uint32(700)}),
			check: func(t *testing.T, _, after *State, _ proto.Message, _ int64) {
				want := Deployment{ID: "d2", Provider: "openai-compatible", BaseURL: "http://b", UpstreamModel: "m",
					Weight: 5, Priority: 0, TimeoutMillis: 10, Credential: "sk-openai", CredentialName: "openai", Key: "gpt-4o/d2",
					Options: map[string]string{"region": "eu-west-1"}, FirstTokenTimeoutMillis: 700}
				if d := routeView(t, after, "gpt-4o").Deployments[1]; !reflect.DeepEqual(*d, want) {
					t.Errorf("view = %+v, want %+v", *d, want)
				}
			}},
		{name: "UpdateDeployment clear credential", cmd: updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "gpt-4o", DeploymentId: "d1", Credential: proto.String("")}), check: func(t *testing.T, _, after *State, _ proto.Message, _ int64) {
			if d := routeView(t, after, "gpt-4o").Deployments[0]; d.Credential != "" || d.CredentialName != "" || d.CredentialMissing {
				t.Errorf("view = %+v", d)
			}
		}},
		{name: "UpdateDeployment missing credential", cmd: updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "gpt-4o", DeploymentId: "d2", Credential: proto.String("nope")}), check: func(t *testing.T, _, after *State, _ proto.Message, _ int64) {
			if d := routeView(t, after, "gpt-4o").Deployments[1]; d.Credential != "" || d.CredentialName != "nope" || !d.CredentialMissing {
				t.Errorf("view = %+v", d)
			}
		}},
		{name: "UpdateDeployment empty provider", cmd: updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "gpt-4o", DeploymentId: "d1", Provider: proto.String("")}), wantErr: ErrInvalid},
		{name: "UpdateDeployment unknown route", cmd: updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "nope", DeploymentId: "d1", Weight: proto.Uint32(1)}), wantErr: ErrNotFound},
		{name: "UpdateDeployment unknown deployment", cmd: updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "gpt-4o", DeploymentId: "nope", Weight: proto.Uint32(1)}), wantErr: ErrNotFound},

		{name: "RemoveDeployment", cmd: removeDeploymentCmd("gpt-4o", "d1"), check: func(t *testing.T, before, after *State, val proto.Message, now int64) {
			r := modelRoute(t, val)
			wantTS(t, "UpdatedAt", r.UpdatedAt, now)
			if got := depIDs(routeView(t, after, "gpt-4o")); !slices.Equal(got, []string{"d2"}) {
				t.Errorf("deployments = %v", got)
			}
			if len(after.RouteConfig("gpt-4o").Deployments) != 1 || len(before.RouteConfig("gpt-4o").Deployments) != 2 {
				t.Error("route configs wrong")
			}
		}},
		{name: "RemoveDeployment last deletes route", cmd: removeDeploymentCmd("solo", "only"), check: func(t *testing.T, before, after *State, val proto.Message, _ int64) {
			if val != nil {
				t.Errorf("result = %v, want nil", val)
			}
			if after.Route("solo") != nil || after.RouteConfig("solo") != nil || slices.Contains(after.RouteNames(), "solo") {
				t.Error("route solo still exists")
			}
			if before.Route("solo") == nil {
				t.Error("old state lost the route")
			}
		}},
		{name: "RemoveDeployment unknown route", cmd: removeDeploymentCmd("nope", "d1"), wantErr: ErrNotFound},
		{name: "RemoveDeployment unknown deployment", cmd: removeDeploymentCmd("gpt-4o", "nope"), wantErr: ErrNotFound},

		{name: "DeleteRoute", cmd: deleteRouteCmd("gpt-4o"), check: func(t *testing.T, _, after *State, val proto.Message, _ int64) {
			if val != nil {
				t.Errorf("result = %v, want nil", val)
			}
			if after.Route("gpt-4o") != nil || after.RouteConfig("gpt-4o") != nil || !slices.Equal(after.RouteNames(), []string{"solo"}) {
				t.Errorf("route not deleted: names %v", after.RouteNames())
			}
		}},
		{name: "DeleteRoute not found", cmd: deleteRouteCmd("nope"), wantErr: ErrNotFound},
	}
}

func credentialCases() []cmdCase {
	return []cmdCase{
		{name: "SetCredential resolves waiting deployment",
			setup: []*pb.Command{addDeploymentCmd("c1", dep("a", "openai", "anthropic"))},
			cmd:   setCredentialCmd("anthropic", "sk-ant"),
			check: func(t *testing.T, before, after *State, val proto.Message, now int64) {
				sc, ok := val.(*pb.StoredCredential)
				if !ok || sc.Name != "anthropic" || sc.Value != "sk-ant" {
					t.Fatalf("result = %v", val)
				}
				wantTS(t, "UpdatedAt", sc.UpdatedAt, now)
				if !proto.Equal(after.Credential("anthropic"), sc) {
					t.Error("Credential(anthropic) is not the result")
				}
				if d := routeView(t, before, "c1").Deployments[0]; !d.CredentialMissing || d.Credential != "" {
					t.Errorf("before: %+v, want CredentialMissing", d)
				}
				if d := routeView(t, after, "c1").Deployments[0]; d.CredentialMissing || d.Credential != "sk-ant" || d.CredentialName != "anthropic" {
					t.Errorf("after: %+v, want resolved", d)
				}
			}},
		{name: "SetCredential replaces value in every route", cmd: setCredentialCmd("openai", "sk-new"), check: func(t *testing.T, before, after *State, _ proto.Message, _ int64) {
			if got := after.Credential("openai").Value; got != "sk-new" {
				t.Errorf("value = %q", got)
			}
			for _, r := range []string{"gpt-4o", "solo"} {
				if d := routeView(t, after, r).Deployments[0]; d.Credential != "sk-new" {
					t.Errorf("%s: credential = %q, want sk-new", r, d.Credential)
				}
				if d := routeView(t, before, r).Deployments[0]; d.Credential != "sk-openai" {
					t.Errorf("%s: old view credential = %q, want sk-openai", r, d.Credential)
				}
			}
			if d := routeView(t, after, "gpt-4o").Deployments[1]; d.Credential != "" || d.CredentialMissing {
				t.Errorf("deployment without credential = %+v", d)
			}
			if len(after.Credentials()) != 1 {
				t.Errorf("%d credentials, want 1", len(after.Credentials()))
			}
		}},
		{name: "SetCredential empty name", cmd: setCredentialCmd("", "v"), wantErr: ErrInvalid},
		{name: "SetCredential empty value", cmd: setCredentialCmd("x", ""), wantErr: ErrInvalid},

		{name: "DeleteCredential unused",
			setup: []*pb.Command{setCredentialCmd("spare", "v")},
			cmd:   deleteCredentialCmd("spare"),
			check: func(t *testing.T, before, after *State, val proto.Message, _ int64) {
				if val != nil {
					t.Errorf("result = %v, want nil", val)
				}
				if after.Credential("spare") != nil || before.Credential("spare") == nil {
					t.Error("credential not deleted, or deleted from the old state")
				}
			}},
		{name: "DeleteCredential in use", cmd: deleteCredentialCmd("openai"), wantErr: ErrFailedPrecondition},
		{name: "DeleteCredential in use by one route only",
			setup: []*pb.Command{removeDeploymentCmd("gpt-4o", "d1")},
			cmd:   deleteCredentialCmd("openai"), wantErr: ErrFailedPrecondition},
		{name: "DeleteCredential after its users are gone",
			setup: []*pb.Command{removeDeploymentCmd("gpt-4o", "d1"), deleteRouteCmd("solo")},
			cmd:   deleteCredentialCmd("openai"),
			check: func(t *testing.T, _, after *State, _ proto.Message, _ int64) {
				if after.Credential("openai") != nil || len(after.Credentials()) != 0 {
					t.Error("credential not deleted")
				}
			}},
		{name: "DeleteCredential not found", cmd: deleteCredentialCmd("nope"), wantErr: ErrNotFound},

		{name: "AddAdminToken", cmd: addAdminTokenCmd(hashOf("admin2")), check: func(t *testing.T, before, after *State, val proto.Message, _ int64) {
			if val != nil {
				t.Errorf("result = %v, want nil", val)
			}
			if !after.HasAdminToken(HashSecret("admin2")) || !after.HasAdminToken(HashSecret("admin")) || after.AdminTokenCount() != 2 {
				t.Error("token not added")
			}
			if before.HasAdminToken(HashSecret("admin2")) || before.AdminTokenCount() != 1 {
				t.Error("old state sees the new token")
			}
		}},
		{name: "AddAdminToken is idempotent", cmd: addAdminTokenCmd(hashOf("admin")), check: func(t *testing.T, before, after *State, _ proto.Message, _ int64) {
			if after.AdminTokenCount() != 1 || !after.HasAdminToken(HashSecret("admin")) {
				t.Errorf("count = %d", after.AdminTokenCount())
			}
			if !bytes.Equal(contentBytes(t, before), contentBytes(t, after)) {
				t.Error("re-adding a token changed the state")
			}
		}},
		{name: "AddAdminToken bad hash", cmd: addAdminTokenCmd([]byte("short")), wantErr: ErrInvalid},
	}
}

func TestApplyCommands(t *testing.T) {
	var cases []cmdCase
	cases = append(cases, keyCases()...)
	cases = append(cases, routeCases()...)
	cases = append(cases, credentialCases()...)
	allErrs := []error{ErrNotFound, ErrAlreadyExists, ErrInvalid, ErrFailedPrecondition}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newFixture(t)
			h.must(tc.setup...)
			before := h.state()
			fr := freeze(before)

			val, err := h.apply(tc.cmd)
			after := h.state()
			if after.Index != before.Index+1 {
				t.Errorf("Index = %d, want %d", after.Index, before.Index+1)
			}
			fr.checkUnchanged(t)

			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				for _, other := range allErrs {
					if other != tc.wantErr && errors.Is(err, other) {
						t.Errorf("err = %v also matches %v", err, other)
					}
				}
				if val != nil {
					t.Errorf("result = %v, want nil with an error", val)
				}
				if !bytes.Equal(contentBytes(t, before), contentBytes(t, after)) {
					t.Error("failed command changed the state")
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if tc.check != nil {
				tc.check(t, before, after, val, tc.cmd.UnixNanos)
			}
		})
	}
}

// applyCommand itself must leave cur alone and return nil when nothing
// changed.
func TestApplyCommandDirect(t *testing.T) {
	h := newFixture(t)
	cur := h.state()
	fr := freeze(cur)

	next, res := applyCommand(cur, at(revokeKeyCmd("k2"), baseNanos+100e9))
	if next != nil || res.err != nil || res.value == nil {
		t.Errorf("revoking a revoked key: next=%v res=%+v, want nil state and the key", next, res)
	}
	next, res = applyCommand(cur, at(addAdminTokenCmd(hashOf("admin")), baseNanos+100e9))
	if next != nil || res.err != nil {
		t.Errorf("re-adding a token: next=%v res=%+v, want nil state", next, res)
	}
	next, res = applyCommand(cur, at(deleteRouteCmd("nope"), baseNanos+100e9))
	if next != nil || !errors.Is(res.err, ErrNotFound) {
		t.Errorf("deleting a missing route: next=%v res=%+v", next, res)
	}
	next, res = applyCommand(cur, at(createKeyCmd("k9", "s9"), baseNanos+100e9))
	if next == nil || res.err != nil || next.Key("k9") == nil || cur.Key("k9") != nil {
		t.Errorf("create: next=%v res=%+v", next, res)
	}
	if next.Index != cur.Index {
		t.Errorf("applyCommand set Index %d; only (*fsm).Apply should", next.Index)
	}
	fr.checkUnchanged(t)
}

func TestFSMApplyLogs(t *testing.T) {
	t.Run("non-command entry", func(t *testing.T) {
		h := newFixture(t)
		before := h.state()
		if res := h.f.Apply(&raft.Log{Index: 60, Type: raft.LogConfiguration}); res != nil {
			t.Errorf("result = %+v, want nil", res)
		}
		if h.state() != before {
			t.Error("a configuration entry published a state")
		}
	})
	t.Run("every apply publishes and signals", func(t *testing.T) {
		h := newFixture(t)
		for _, cmd := range []*pb.Command{createKeyCmd("k9", "s9"), deleteRouteCmd("nope"), addAdminTokenCmd(hashOf("admin"))} {
			before := h.state()
			ch := h.f.changedCh()
			_, _ = h.apply(cmd)
			select {
			case <-ch:
			default:
				t.Errorf("%v: change channel not closed", cmd)
			}
			if h.state() == before {
				t.Errorf("%v: state pointer not replaced", cmd)
			}
		}
	})
	t.Run("result pointer for Store.Apply", func(t *testing.T) {
		h := newHarness(t)
		data, _ := proto.Marshal(at(createKeyCmd("k1", "s1"), baseNanos))
		resp := h.f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
		if res, ok := resp.(*applyResult); !ok || res.err != nil || res.value.(*pb.StoredKey).Key.Id != "k1" {
			t.Errorf("Apply returned %#v", resp)
		}
	})
}

// TestImmutability holds on to a State and its views while every kind of
// command is applied, then checks that nothing reachable from them changed.
func TestImmutability(t *testing.T) {
	h := newFixture(t)
	old := h.state()
	fr := freeze(old)
	k1 := old.KeyByHash(HashSecret("s1"))
	k1Copy := copyKeyView(k1)
	r := old.Route("gpt-4o")
	rCopy := copyRouteView(r)
	sk1 := old.Key("k1")
	sk1Copy := proto.Clone(sk1)
	keys := old.Keys()
	names := slices.Clone(old.RouteNames())

	h.must(
		updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", Name: proto.String("x"), Models: &pb.StringList{Values: []string{"o1"}},
			ExpiresAt: ts(baseNanos + 1e12), Metadata: map[string]string{"team": "z", "env": ""}}),
		rotateKeyCmd("k1", "s1b"),
		revokeKeyCmd("k1"),
		createKeyCmd("k3", "s3"),
		addDeploymentCmd("gpt-4o", dep("d3", "openai", "openai")),
		updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "gpt-4o", DeploymentId: "d1", Weight: proto.Uint32(99), BaseUrl: proto.String("http://x")}),
		removeDeploymentCmd("gpt-4o", "d2"),
		setCredentialCmd("openai", "sk-changed"),
		addDeploymentCmd("new", dep("n", "demo", "")),
		removeDeploymentCmd("solo", "only"),
		addAdminTokenCmd(hashOf("admin2")),
	)
	h.must(deleteRouteCmd("gpt-4o"), deleteCredentialCmd("openai"))

	fr.checkUnchanged(t)
	if got := copyKeyView(k1); !reflect.DeepEqual(got, k1Copy) {
		t.Errorf("held key view changed: %+v, was %+v", got, k1Copy)
	}
	if got := copyRouteView(r); !reflect.DeepEqual(got, rCopy) {
		t.Errorf("held route view changed: %+v, was %+v", got, rCopy)
	}
	if !proto.Equal(sk1, sk1Copy) {
		t.Errorf("held stored key changed: %v, was %v", sk1, sk1Copy)
	}
	if len(keys) != 2 || !proto.Equal(keys[0], old.Key("k1")) || !slices.Equal(names, old.RouteNames()) {
		t.Error("listings of the old state changed")
	}
	if old.KeyByHash(HashSecret("s1b")) != nil || old.Route("new") != nil || old.HasAdminToken(HashSecret("admin2")) {
		t.Error("old state sees later changes")
	}
}

// TestConcurrentReaders lets readers walk the published state while the FSM
// applies; the race detector catches any write to a published State.
func TestConcurrentReaders(t *testing.T) {
	h := newFixture(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				st := h.state()
				if k := st.KeyByHash(HashSecret("s1")); k != nil {
					_ = k.Allows("gpt-4o") || k.Expired(baseNanos)
				}
				for _, n := range st.RouteNames() {
					for _, d := range st.Route(n).Deployments {
						_ = d.Credential + d.BaseURL
					}
				}
				_ = snapshotOf(st)
			}
		}()
	}
	for i := range 200 {
		id, secret := fmt.Sprintf("kc%d", i), fmt.Sprintf("sc%d", i)
		h.must(createKeyCmd(id, secret, "gpt-*"),
			updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", Metadata: map[string]string{"i": id}}),
			setCredentialCmd("openai", secret),
			updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "gpt-4o", DeploymentId: "d1", Weight: proto.Uint32(uint32(i))}))
	}
	close(stop)
	wg.Wait()
}

// detSequence is a command sequence exercising every command, including
// failures and several keys created at the same instant.
func detSequence() []*pb.Command {
	cmds := fixture()
	for i, c := range cmds {
		at(c, baseNanos+int64(i)*1e9)
	}
	same := baseNanos + 100e9
	for _, id := range []string{"kz", "ka", "km"} {
		c := createKeyCmd(id, "secret-"+id, "m-*")
		c.GetCreateKey().Key.Key.Metadata = map[string]string{"z": "1", "a": "2", "m": "3"}
		cmds = append(cmds, at(c, same))
	}
	rest := []*pb.Command{
		updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", Metadata: map[string]string{"x": "y", "team": ""}}),
		rotateKeyCmd("ka", "secret-ka-2"),
		revokeKeyCmd("km"),
		createKeyCmd("k1", "dup"), // fails
		addDeploymentCmd("b-route", dep("b1", "demo", "")),
		addDeploymentCmd("a-route", dep("a1", "openai", "openai")),
		updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "gpt-4o", DeploymentId: "d2", Priority: proto.Uint32(3)}),
		removeDeploymentCmd("gpt-4o", "d1"),
		setCredentialCmd("zz", "v1"),
		setCredentialCmd("aa", "v2"),
		deleteCredentialCmd("openai"), // fails: in use
		addAdminTokenCmd(hashOf("t3")),
		addAdminTokenCmd(hashOf("t1")),
		deleteRouteCmd("b-route"),
	}
	for i, c := range rest {
		cmds = append(cmds, at(c, same+int64(i+1)*1e9))
	}
	return cmds
}

func TestDeterminism(t *testing.T) {
	run := func() (*harness, []byte) {
		h := newHarness(t)
		for _, c := range detSequence() {
			_, _ = h.apply(c)
		}
		return h, snapBytes(t, h.state())
	}
	h1, a := run()
	h2, b := run()
	if !bytes.Equal(a, b) {
		t.Fatal("same commands gave different snapshots")
	}
	if h1.state().Index != uint64(len(detSequence())) {
		t.Errorf("Index = %d, want %d", h1.state().Index, len(detSequence()))
	}
	// The persisted snapshots agree too.
	p1, p2 := persist(t, h1.f), persist(t, h2.f)
	if !bytes.Equal(p1, p2) || !bytes.Equal(snapBytes(t, restored(t, p1)), a) {
		t.Error("persisted snapshots differ")
	}
	// Keys created at the same instant list by id.
	var ids []string
	for _, k := range h1.state().Keys() {
		ids = append(ids, k.Key.Id)
	}
	if want := []string{"k1", "k2", "ka", "km", "kz"}; !slices.Equal(ids, want) {
		t.Errorf("Keys() order = %v, want %v", ids, want)
	}
}

// TestTimestampsFromCommand checks that every stored time is the command's,
// never the clock's.
func TestTimestampsFromCommand(t *testing.T) {
	h := newHarness(t)
	const t1, t2, t3, t4 = int64(1e18), int64(1e18 + 5e9), int64(1e18 + 17e9), int64(1e18 + 30e9 + 123)
	h.must(at(createKeyCmd("k", "s"), t1))
	h.must(at(updateKeyCmd(&pb.UpdateKeyRequest{Id: "k", Name: proto.String("n")}), t2))
	k := h.state().Key("k").Key
	wantTS(t, "CreatedAt", k.CreatedAt, t1)
	wantTS(t, "UpdatedAt", k.UpdatedAt, t2)
	h.must(at(revokeKeyCmd("k"), t3))
	k = h.state().Key("k").Key
	wantTS(t, "RevokedAt", k.RevokedAt, t3)
	wantTS(t, "UpdatedAt", k.UpdatedAt, t3)
	wantTS(t, "CreatedAt", k.CreatedAt, t1)

	h.must(at(addDeploymentCmd("m", dep("d", "demo", "")), t1))
	h.must(at(addDeploymentCmd("m", dep("e", "demo", "")), t4))
	r := h.state().RouteConfig("m")
	wantTS(t, "route CreatedAt", r.CreatedAt, t1)
	wantTS(t, "route UpdatedAt", r.UpdatedAt, t4)
	if got := h.state().Route("m").Created; got != t1/1e9 {
		t.Errorf("Route.Created = %d, want %d", got, t1/1e9)
	}
	h.must(at(updateDeploymentCmd(&pb.UpdateDeploymentRequest{Model: "m", DeploymentId: "d", Weight: proto.Uint32(2)}), t2))
	wantTS(t, "route UpdatedAt", h.state().RouteConfig("m").UpdatedAt, t2)
	h.must(at(removeDeploymentCmd("m", "e"), t3))
	wantTS(t, "route UpdatedAt", h.state().RouteConfig("m").UpdatedAt, t3)

	h.must(at(setCredentialCmd("c", "v"), t4))
	wantTS(t, "credential UpdatedAt", h.state().Credential("c").UpdatedAt, t4)

	// Nanosecond precision survives.
	h.must(at(createKeyCmd("k2", "s2"), t4))
	if got := h.state().Key("k2").Key.CreatedAt.AsTime().UnixNano(); got != t4 {
		t.Errorf("CreatedAt = %d ns, want %d", got, t4)
	}
}
