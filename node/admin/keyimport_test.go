package admin

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

func TestImportKeysIsIdempotentAndKeepsGivenSecrets(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)

	const migrated = "sk-litellm-0123456789abcdef"
	req := &pb.ImportKeysRequest{ImportId: "crm-1", Keys: []*pb.ImportedKey{
		{Name: "cust-1", Models: []string{"gpt-*"}, Budget: &pb.Budget{LimitNanos: 25e9, Period: "month"}},
		{Name: "cust-2", Secret: migrated, Limits: &pb.RateLimits{Rpm: 60}},
	}}
	resp, err := env.keys.ImportKeys(ctx, req)
	mustOK(t, err)
	if resp.GetImported() != 2 || resp.GetSkipped() != 0 || len(resp.GetResults()) != 2 {
		t.Fatalf("first import = %v", resp)
	}
	drawn := resp.GetResults()[0].GetSecret()
	if !secretRe.MatchString(drawn) || resp.GetResults()[1].GetSecret() != "" {
		t.Fatalf("secrets: drawn %q, migrated key's %q (want none shown)", drawn, resp.GetResults()[1].GetSecret())
	}
	st := store.State()
	for secret, name := range map[string]string{drawn: "cust-1", migrated: "cust-2"} {
		k := st.KeyByHash(raftstore.HashSecret(secret))
		if k == nil || k.Name != name {
			t.Fatalf("secret of %s resolves to %+v", name, k)
		}
	}
	if k := st.KeyByHash(raftstore.HashSecret(migrated)); k.Limits == nil || k.Limits.RPM != 60 {
		t.Errorf("cust-2 limits = %+v", k.Limits)
	}

	// The same import again changes nothing and reports both as skipped.

	again, err := env.keys.ImportKeys(ctx, req)
	mustOK(t, err)
	if again.GetImported() != 0 || again.GetSkipped() != 2 || again.GetResults()[0].GetSecret() != "" {
		t.Fatalf("second import = %v", again)
	}
	if n := len(store.State().Keys()); n != 2 {
		t.Fatalf("%d keys after importing twice, want 2", n)
	}
	if store.State().KeyByHash(raftstore.HashSecret(drawn)) == nil {
		t.Error("a re-run replaced the first run's secret")
	}

	// The same names under another import id are other keys.
	other, err := env.keys.ImportKeys(ctx, &pb.ImportKeysRequest{ImportId: "crm-2", Keys: []*pb.ImportedKey{{Name: "cust-1"}}})
	mustOK(t, err)
	if other.GetImported() != 1 || other.GetResults()[0].GetId() == resp.GetResults()[0].GetId() {
		t.Fatalf("other import = %v", other)
	}
}

func TestImportKeysRefusesWholeBatchNamingTheBadKey(t *testing.T) {
	store := openStore(t)
	env := startServer(t, store)
	ctx := ctxT(t)

	cases := []struct {
		name string
		keys []*pb.ImportedKey
		want string
	}{
		{"unknown team", []*pb.ImportedKey{{Name: "a"}, {Name: "b", TeamId: "team_missing"}}, "key 2 of the batch"},
		{"duplicate name", []*pb.ImportedKey{{Name: "a"}, {Name: "a"}}, "same name as key 1"},
		{"short secret", []*pb.ImportedKey{{Name: "a", Secret: "short"}}, "secret must be at least"},
		{"bad budget", []*pb.ImportedKey{{Name: "a", Budget: &pb.Budget{LimitNanos: -1, Period: "day"}}}, "key 1 of the batch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := env.keys.ImportKeys(ctx, &pb.ImportKeysRequest{ImportId: "x", Keys: c.keys})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.want) {
				t.Fatalf("err = %v, want InvalidArgument naming %q", err, c.want)
			}
			if n := len(store.State().Keys()); n != 0 {
				t.Fatalf("%d keys applied from a refused batch", n)
			}
		})
	}

	// A secret already held by another key refuses the batch in the FSM.
	ck, err := env.keys.CreateKey(ctx, &pb.CreateKeyRequest{Name: "existing"})
	mustOK(t, err)
	_, err = env.keys.ImportKeys(ctx, &pb.ImportKeysRequest{ImportId: "x", Keys: []*pb.ImportedKey{
		{Name: "fine"}, {Name: "clash", Secret: ck.GetSecret()},
	}})
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "key 2 of the batch") {
		t.Fatalf("clashing secret: err = %v", err)
	}
	if n := len(store.State().Keys()); n != 1 {
		t.Fatalf("%d keys after a refused batch, want 1", n)
	}

	big := make([]*pb.ImportedKey, raftstore.MaxImportBatch+1)
	for i := range big {
		big[i] = &pb.ImportedKey{Name: fmt.Sprint("k", i)}
	}
	if _, err := env.keys.ImportKeys(ctx, &pb.ImportKeysRequest{ImportId: "x", Keys: big}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("oversized batch: err = %v", err)
	}
}
