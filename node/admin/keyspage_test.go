package admin

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"testing"
	"weak"

	"google.golang.org/grpc/codes"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// importKeys creates n keys named prefix-0000... in batches, spread over
// teams when teams is not empty, and returns their ids.
func importKeys(tb testing.TB, ctx context.Context, keys pb.KeyServiceClient, prefix string, n int, teams []string) []string {
	tb.Helper()
	var ids []string
	for start := 0; start < n; start += raftstore.MaxImportBatch {
		req := &pb.ImportKeysRequest{ImportId: fmt.Sprintf("%s-%d", prefix, start)}
		for i := start; i < min(n, start+raftstore.MaxImportBatch); i++ {
			k := &pb.ImportedKey{Name: fmt.Sprintf("%s-%06d", prefix, i)}
			if len(teams) > 0 {
				k.TeamId = teams[i%len(teams)]
			}
			req.Keys = append(req.Keys, k)
		}
		resp, err := keys.ImportKeys(ctx, req)
		if err != nil {
			tb.Fatalf("import: %v", err)
		}
		for _, r := range resp.GetResults() {
			ids = append(ids, r.GetId())
		}
	}
	return ids
}

// listAll pages through ListKeys with req and returns the ids in order.
func listAll(t *testing.T, ctx context.Context, keys pb.KeyServiceClient, req *pb.ListKeysRequest) (ids []string, total uint32) {
	t.Helper()
	for pages := 0; pages < 100; pages++ {
		resp, err := keys.ListKeys(ctx, req)
		mustOK(t, err)
		if pages > 0 && resp.GetTotal() != total {
			t.Fatalf("total changed between pages: %d then %d", total, resp.GetTotal())
		}
		total = resp.GetTotal()
		for _, k := range resp.GetKeys() {
			ids = append(ids, k.GetId())
		}
		if resp.GetNextPageToken() == "" {
			return ids, total
		}
		if len(resp.GetKeys()) != int(req.GetPageSize()) {
			t.Fatalf("a page with a next page holds %d keys, want %d", len(resp.GetKeys()), req.GetPageSize())
		}
		req.PageToken = resp.GetNextPageToken()
	}
	t.Fatal("more than 100 pages")
	return nil, 0
}

func TestListKeysPagesInIDOrderWithTotal(t *testing.T) {
	env := startServer(t, openStore(t))
	ctx := ctxT(t)
	ids := importKeys(t, ctx, env.keys, "svc", 23, nil)
	slices.Sort(ids)
	got, total := listAll(t, ctx, env.keys, &pb.ListKeysRequest{PageSize: 5})
	if !slices.Equal(got, ids) || total != 23 {
		t.Fatalf("paged ids %v (total %d), want %v (23)", got, total, ids)
	}
	// A write between pages: the next page goes on after the first and
	// keeps the listing's total (its token carries it: a listing that
	// writes interleave does not count every key again per page); a new
	// listing counts again.
	first, err := env.keys.ListKeys(ctx, &pb.ListKeysRequest{PageSize: 5})
	mustOK(t, err)
	importKeys(t, ctx, env.keys, "late", 2, nil)
	next, err := env.keys.ListKeys(ctx, &pb.ListKeysRequest{PageSize: 5, PageToken: first.GetNextPageToken()})
	mustOK(t, err)
	if first.GetTotal() != 23 || next.GetTotal() != 23 || len(next.GetKeys()) != 5 || next.GetKeys()[0].GetId() <= first.GetKeys()[4].GetId() {
		t.Fatalf("after a write: totals %d then %d, next page %v", first.GetTotal(), next.GetTotal(), next.GetKeys())
	}
	if again, err := env.keys.ListKeys(ctx, &pb.ListKeysRequest{PageSize: 5}); err != nil || again.GetTotal() != 25 {
		t.Fatalf("a new listing after the write: total %d, %v; want 25", again.GetTotal(), err)
	}
	// A token of the release before totals were carried (the id alone)
	// still reads, and that page counts the total.
	old, err := env.keys.ListKeys(ctx, &pb.ListKeysRequest{PageSize: 5,
		PageToken: base64.RawURLEncoding.EncodeToString([]byte(first.GetKeys()[4].GetId()))})
	if err != nil || old.GetTotal() != 25 || old.GetKeys()[0].GetId() != next.GetKeys()[0].GetId() {
		t.Fatalf("a page from an id-only token: %v %v", old, err)
	}
	// page_size 0: every key in one answer, as before paging.
	all, err := env.keys.ListKeys(ctx, &pb.ListKeysRequest{})
	mustOK(t, err)
	if len(all.GetKeys()) != 25 || all.GetNextPageToken() != "" {
		t.Fatalf("unpaged list: %d keys, token %q", len(all.GetKeys()), all.GetNextPageToken())
	}
}

func TestListKeysSearchIsCaseInsensitiveOnIDAndName(t *testing.T) {
	env := startServer(t, openStore(t))
	ctx := ctxT(t)
	importKeys(t, ctx, env.keys, "Billing", 7, nil)
	importKeys(t, ctx, env.keys, "search", 4, nil)
	got, total := listAll(t, ctx, env.keys, &pb.ListKeysRequest{PageSize: 3, Query: "bILLing"})
	if len(got) != 7 || total != 7 {
		t.Fatalf("query by name: %d keys, total %d; want 7", len(got), total)
	}
	one := got[0]
	got, total = listAll(t, ctx, env.keys, &pb.ListKeysRequest{PageSize: 3, Query: one[len(one)-6:]})
	if !slices.Contains(got, one) || total < 1 {
		t.Fatalf("query by id fragment %q: %v", one[len(one)-6:], got)
	}
	got, total = listAll(t, ctx, env.keys, &pb.ListKeysRequest{PageSize: 3, Query: "nothing-like-this"})
	if len(got) != 0 || total != 0 {
		t.Fatalf("query without match: %v, total %d", got, total)
	}
}

func TestListKeysFiltersByTeamAndRevoked(t *testing.T) {
	env := startServer(t, openStore(t))
	ctx := ctxT(t)
	var teams []string
	for _, name := range []string{"ta", "tb"} {
		r, err := env.teams.CreateTeam(ctx, &pb.CreateTeamRequest{Name: name})
		mustOK(t, err)
		teams = append(teams, r.GetTeam().GetId())
	}
	ids := importKeys(t, ctx, env.keys, "k", 10, teams)
	_, err := env.keys.RevokeKey(ctx, &pb.RevokeKeyRequest{Id: ids[0]}) // a ta key
	mustOK(t, err)
	got, total := listAll(t, ctx, env.keys, &pb.ListKeysRequest{PageSize: 2, TeamId: teams[0]})
	if len(got) != 4 || total != 4 || slices.Contains(got, ids[0]) {
		t.Fatalf("team ta without revoked: %v (total %d)", got, total)
	}
	got, total = listAll(t, ctx, env.keys, &pb.ListKeysRequest{PageSize: 2, TeamId: teams[0], IncludeRevoked: true})
	if len(got) != 5 || total != 5 {
		t.Fatalf("team ta with revoked: %v (total %d)", got, total)
	}
	got, _ = listAll(t, ctx, env.keys, &pb.ListKeysRequest{PageSize: 50, TeamId: teams[1], Query: "k-00000"})
	if len(got) != 5 {
		t.Fatalf("team tb and query: %v", got)
	}
}

func TestListKeysRefusesBadPageTokenAndSize(t *testing.T) {
	env := startServer(t, openStore(t))
	ctx := ctxT(t)
	_, err := env.keys.ListKeys(ctx, &pb.ListKeysRequest{PageSize: 5, PageToken: "%%%"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = env.keys.ListKeys(ctx, &pb.ListKeysRequest{PageSize: maxKeysPage + 1})
	wantCode(t, err, codes.InvalidArgument)
}

func TestContainsFold(t *testing.T) {
	for _, c := range []struct {
		s, sub string
		want   bool
	}{{"Key_ABC", "abc", true}, {"key", "", true}, {"ab", "abc", false}, {"Ünïcode-Name", "ünï", true}, {"x", "y", false}} {
		if got := containsFold(c.s, c.sub); got != c.want {
			t.Errorf("containsFold(%q, %q) = %v", c.s, c.sub, got)
		}
	}
}

// BenchmarkListKeysPage measures one 50-key page of ListKeys (the
// handler, without gRPC) on a state of 100,000 keys in 10 teams: the first
// page and page 1001 (the total remembered), and with the total counted
// again (as after every write): the first page, a search, a team's page.
func BenchmarkListKeysPage(b *testing.B) {
	st := openStore(b)
	ks := keyService{s: New(Config{Store: st})}
	ctx := context.Background()
	teams := make([]string, 10)
	for i := range teams {
		r, err := (teamService{s: ks.s}).CreateTeam(ctx, &pb.CreateTeamRequest{Name: fmt.Sprintf("team-%d", i)})
		if err != nil {
			b.Fatal(err)
		}
		teams[i] = r.GetTeam().GetId()
	}
	for start := 0; start < 100_000; start += raftstore.MaxImportBatch {
		req := &pb.ImportKeysRequest{ImportId: fmt.Sprintf("bench-%d", start)}
		for i := start; i < start+raftstore.MaxImportBatch; i++ {
			req.Keys = append(req.Keys, &pb.ImportedKey{Name: fmt.Sprintf("service-%06d", i), TeamId: teams[i%len(teams)]})
		}
		if _, err := ks.ImportKeys(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	first, err := ks.ListKeys(ctx, &pb.ListKeysRequest{PageSize: 50})
	if err != nil || first.GetTotal() != 100_000 {
		b.Fatalf("first page: total %d, %v", first.GetTotal(), err)
	}
	deep := &pb.ListKeysRequest{PageSize: 50}
	for range 1000 { // page 1001 of 2000
		r, err := ks.ListKeys(ctx, deep)
		if err != nil {
			b.Fatal(err)
		}
		deep.PageToken = r.GetNextPageToken()
	}
	for _, c := range []struct {
		name string
		req  *pb.ListKeysRequest
		cold bool // count the total again on every call, as after a write
	}{
		{"first", &pb.ListKeysRequest{PageSize: 50}, false},
		{"deep", deep, false},
		{"first-cold", &pb.ListKeysRequest{PageSize: 50}, true},
		{"search-cold", &pb.ListKeysRequest{PageSize: 50, Query: "ICE-0042"}, true},
		{"team-cold", &pb.ListKeysRequest{PageSize: 50, TeamId: teams[3]}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.cold {
					ks.s.keyTotals.st = weak.Pointer[raftstore.State]{}
				}
				if _, err := ks.ListKeys(ctx, c.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
