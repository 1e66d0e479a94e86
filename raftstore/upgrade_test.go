package raftstore

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// The fixture testdata/v0-datadir is the data dir of a single `tollgate`
// node of the release before the scalable state (main at 4c55a96), made with
// tollctl: two teams, five keys (one revoked, one rotated), two routes with
// aliases and fallbacks, a credential, and chat traffic whose spend reports
// and budget leases reached Raft. testdata/v0-manifest.json lists what it
// holds, as that release read it.

var updateFixture = flag.Bool("update-fixture-manifest", false, "rewrite testdata/v0-manifest.json from the fixture data dir")

type fixtureManifest struct {
	Release    string `json:"release"`
	NodeID     string `json:"node_id"`
	AdminToken string `json:"admin_token"`
	// KeySecret authenticates as KeySecretID (test data only).
	KeySecretID string            `json:"key_secret_id"`
	KeySecret   string            `json:"key_secret"`
	Keys        []fixtureKey      `json:"keys"`
	Teams       []fixtureTeam     `json:"teams"`
	Routes      []fixtureRoute    `json:"routes"`
	Credentials []string          `json:"credentials"`
	Periods     []fixturePeriod   `json:"budget_periods"`
	NodeSeqs    map[string]uint64 `json:"node_seqs"`
	Rollups     fixtureRollups    `json:"rollups"`
}

type fixtureKey struct {
	ID, Name, Team, SecretHash, Period string
	Revoked, Expires                   bool
	BudgetNanos, RPM                   int64
	Models                             []string
	Metadata                           map[string]string
}

type fixtureTeam struct {
	ID, Name    string
	BudgetNanos int64
}

type fixtureRoute struct {
	Name, Strategy string
	Deployments    []string
	Aliases        []string
	Fallbacks      []string
}

type fixturePeriod struct {
	Budget string
	Start  int64
	Spent  int64
	Leases map[string]int64
}

type fixtureRollups struct {
	Rows, Requests, CostNanos int64
}

// manifestOf describes st the way the fixture manifest does.
func manifestOf(st *State, periods []fixturePeriod) fixtureManifest {
	m := fixtureManifest{NodeSeqs: map[string]uint64{}, Periods: periods}
	for _, sk := range st.Keys() {
		k := sk.GetKey()
		m.Keys = append(m.Keys, fixtureKey{ID: k.GetId(), Name: k.GetName(), Team: k.GetTeamId(),
			SecretHash: hex.EncodeToString(sk.GetSecretHash()), Period: k.GetBudget().GetPeriod(),
			Revoked: k.GetRevokedAt() != nil, Expires: k.GetExpiresAt() != nil, BudgetNanos: k.GetBudget().GetLimitNanos(),
			RPM: k.GetLimits().GetRpm(), Models: k.GetModels(), Metadata: k.GetMetadata()})
	}
	for _, t := range st.Teams() {
		m.Teams = append(m.Teams, fixtureTeam{ID: t.GetId(), Name: t.GetName(), BudgetNanos: t.GetBudget().GetLimitNanos()})
	}
	for _, r := range st.RouteConfigs() {
		fr := fixtureRoute{Name: r.GetName(), Strategy: r.GetOptions().GetStrategy(),
			Aliases: r.GetOptions().GetAliases(), Fallbacks: r.GetOptions().GetFallbacks()}
		for _, d := range r.GetDeployments() {
			fr.Deployments = append(fr.Deployments, d.GetId())
		}
		m.Routes = append(m.Routes, fr)
	}
	for _, c := range st.Credentials() {
		m.Credentials = append(m.Credentials, c.GetName())
	}
	st.WalkRollups(0, 1<<62, func(r *pb.SpendRollup) bool {
		m.Rollups.Rows++
		m.Rollups.Requests += r.GetRequests()
		m.Rollups.CostNanos += r.GetCostNanos()
		return true
	})
	return m
}

// periodsOfSnapshot lists the budget periods of st, as the old release's
// snapshot message carries them.
func periodsOfSnapshot(st *State) []fixturePeriod {
	var out []fixturePeriod
	for _, bp := range st.Snapshot().GetBudgetPeriods() {
		out = append(out, fixturePeriod{Budget: bp.GetBudget(), Start: bp.GetPeriodStart(), Spent: bp.GetSpentNanos(), Leases: bp.GetLeases()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Budget != out[j].Budget {
			return out[i].Budget < out[j].Budget
		}
		return out[i].Start < out[j].Start
	})
	return out
}

// copyDir copies the fixture into a temporary dir, so the test never
// changes the committed files.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatalf("copy fixture: %v", err)
	}
	return dst
}

func readManifest(t *testing.T) fixtureManifest {
	t.Helper()
	b, err := os.ReadFile("testdata/v0-manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m fixtureManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode manifest: %v", err)
	}
	return m
}

// TestOpensDataDirOfPreviousRelease opens a copy of the previous release's
// data dir and finds every key, team, route, credential, budget period,
// spend rollup and node report counter it held; the key secret and admin
// token recorded at its creation still authenticate, and the store takes
// new writes.
func TestOpensDataDirOfPreviousRelease(t *testing.T) {
	want := readManifest(t)
	dir := copyDir(t, "testdata/v0-datadir")
	cfg := testConfig(filepath.Join(dir, "raft"))
	cfg.NodeID = want.NodeID
	cfg.Bootstrap = false
	// What a new data dir would get if asked: this one keeps its raft.db
	// (its snapshot alone would hide an empty new log).
	cfg.LogStore = LogStoreWAL
	s := openReady(t, cfg)
	if got := s.LogStoreKind(); got != LogStoreBolt {
		t.Fatalf("the previous release's data dir opened with the %q log store, want %q", got, LogStoreBolt)
	}
	st := s.State()

	got := manifestOf(st, periodsOfSnapshot(st))
	for n := range want.NodeSeqs {
		got.NodeSeqs[n] = st.NodeSeq(n)
	}
	if *updateFixture {
		want.Keys, want.Teams, want.Routes, want.Credentials = got.Keys, got.Teams, got.Routes, got.Credentials
		want.Periods, want.Rollups, want.NodeSeqs = got.Periods, got.Rollups, got.NodeSeqs
		b, _ := json.MarshalIndent(want, "", "  ")
		if err := os.WriteFile("testdata/v0-manifest.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if len(want.Keys) != 5 || len(want.Teams) != 2 || len(want.Routes) < 2 || len(want.Periods) == 0 || want.Rollups.Rows == 0 {
		t.Fatalf("manifest is incomplete: %+v", want)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"keys", got.Keys, want.Keys}, {"teams", got.Teams, want.Teams}, {"routes", got.Routes, want.Routes},
		{"credentials", got.Credentials, want.Credentials}, {"budget periods", got.Periods, want.Periods},
		{"node seqs", got.NodeSeqs, want.NodeSeqs}, {"rollups", got.Rollups, want.Rollups},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.what, c.got, c.want)
		}
	}
	for _, p := range want.Periods {
		if st.BudgetPeriod(p.Budget, p.Start) == nil {
			t.Errorf("BudgetPeriod(%q, %d) = nil", p.Budget, p.Start)
		}
	}
	k := st.KeyByHash(HashSecret(want.KeySecret))
	if k == nil || k.ID != want.KeySecretID || k.Revoked {
		t.Fatalf("the recorded key secret does not authenticate: %+v", k)
	}
	if !st.HasAdminToken(HashSecret(want.AdminToken)) {
		t.Error("the recorded admin token is not registered")
	}
	// The upgraded store serves writes.
	waitLeader(t, s)
	mustApply(t, s, createKeyCmd("key_after_upgrade", "after-upgrade-secret"))
	if s.State().KeyByHash(HashSecret("after-upgrade-secret")) == nil {
		t.Error("a key created after the upgrade is missing")
	}
}

// waitLeader waits until s, a single voter, has won its election.
func waitLeader(t *testing.T, s *Store) {
	t.Helper()
	ctx := ctxT(t)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !s.IsLeader() {
		select {
		case <-ctx.Done():
			t.Fatal("no leader")
		case <-tick.C:
		}
	}
}
