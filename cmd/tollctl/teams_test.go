package main

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// createTeam creates a team through the CLI and returns its id.
func createTeam(t *testing.T, f *fake, args ...string) string {
	t.Helper()
	r := f.mustRun(t, append([]string{"team", "create", "-o", "json"}, args...)...)
	return decodeObject(t, r.stdout)["id"].(string)
}

func TestTeamCreate(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "team", "create", "--name", "research", "--budget", "$100", "--period", "month",
		"--allow-unpriced", "--meta", "owner=alice")
	req, _ := f.teams.lastRequests()
	want := &tollgatev1.Budget{LimitNanos: 100_000_000_000, Period: "month", AllowUnpriced: true}
	if req.Name != "research" || !proto.Equal(req.Budget, want) || req.Metadata["owner"] != "alice" {
		t.Errorf("create sent %v", req)
	}
	for _, want := range []string{"Created team team_0001.", "research", "$100.0000 per month (unpriced models allowed)", "owner=alice"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}

	m := decodeObject(t, f.mustRun(t, "team", "create", "--name", "plain", "-o", "json").stdout)
	req, _ = f.teams.lastRequests()
	if req.Budget != nil || len(req.Metadata) != 0 {
		t.Errorf("create without budget sent %v", req)
	}
	if m["id"] != "team_0002" || m["name"] != "plain" || m["budget"] != nil {
		t.Errorf("json = %v", m)
	}

	f.mustRun(t, "team", "create", "--name", "tiny", "--budget", "0.1", "--period", "day")
	if req, _ = f.teams.lastRequests(); req.Budget.GetLimitNanos() != 100_000_000 || req.Budget.GetAllowUnpriced() {
		t.Errorf("--budget 0.1 sent %v", req.Budget)
	}

	f.teams.takeCalls()
	for _, args := range [][]string{
		{"team", "create"},
		{"team", "create", "--name", "x", "--budget", "10"},                              // no period
		{"team", "create", "--name", "x", "--period", "month"},                           // no budget
		{"team", "create", "--name", "x", "--allow-unpriced"},                            // no budget
		{"team", "create", "--name", "x", "--budget", "0", "--period", "month"},          // not positive
		{"team", "create", "--name", "x", "--budget", "-1", "--period", "month"},         // negative
		{"team", "create", "--name", "x", "--budget", "1e3", "--period", "month"},        // exponent
		{"team", "create", "--name", "x", "--budget", "0.0000000001", "--period", "day"}, // 10 decimals
		{"team", "create", "--name", "x", "--budget", "10", "--period", "year"},
		{"team", "create", "--name", "x", "--meta", "novalue"},
		{"team", "create", "--name", "x", "--no-budget"}, // update only
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if calls := f.teams.takeCalls(); len(calls) != 0 {
		t.Errorf("invalid input reached the server: %v", calls)
	}
}

func TestTeamListAndGet(t *testing.T) {
	f := startFake(t)
	if r := f.mustRun(t, "team", "list"); !strings.Contains(r.stdout, "No teams") {
		t.Errorf("empty list:\n%s", r.stdout)
	}
	if r := f.mustRun(t, "team", "list", "-o", "json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("empty json list = %q", r.stdout)
	}
	research := createTeam(t, f, "--name", "research", "--budget", "500", "--period", "month")
	plain := createTeam(t, f, "--name", "plain")

	r := f.mustRun(t, "team", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header and 2 rows:\n%s", r.stdout)
	}
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"ID", "NAME", "BUDGET", "PERIOD", "LIMITS"}) {
		t.Errorf("header = %v", got)
	}
	if got := strings.Fields(lines[1]); !slices.Equal(got, []string{research, "research", "$500.0000", "month", "-"}) {
		t.Errorf("row = %v", got)
	}
	if got := strings.Fields(lines[2]); !slices.Equal(got, []string{plain, "plain", "-", "-", "-"}) {
		t.Errorf("row = %v", got)
	}
	teams := decodeArray(t, f.mustRun(t, "team", "list", "-o", "json").stdout)
	if len(teams) != 2 || teams[0]["budget"].(map[string]any)["limit_nanos"] != "500000000000" || teams[1]["budget"] != nil {
		t.Errorf("json list = %v", teams)
	}

	k1, _ := createKey(t, f, "--name", "a", "--team", research)
	k2, _ := createKey(t, f, "--name", "b", "--team", research)
	f.keys.statuses.set("team:"+research, &tollgatev1.BudgetStatus{
		LimitNanos: 500_000_000_000, Period: "month", PeriodStart: 1793491200, ResetAt: 1796083200,
		SpentNanos: 123_456_789_012, LeasedNanos: 5_000_000_000, RemainingNanos: 376_543_210_988,
	})
	r = f.mustRun(t, "team", "get", research)
	for _, want := range []string{
		"research", "$500.0000 per month (unpriced models refused)",
		"Spent:", "$123.4568", "Leased:", "$5.0000", "Remaining:", "$376.5432",
		"Period start:", "2026-11-01T00:00:00Z", "Resets at:", "2026-12-01T00:00:00Z",
		"Keys:", k1 + ", " + k2 + " (2)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, r.stdout)
		}
	}
	m := decodeObject(t, f.mustRun(t, "team", "get", research, "-o", "json").stdout)
	st := m["budget_status"].(map[string]any)
	if m["id"] != research || m["name"] != "research" || st["spent_nanos"] != "123456789012" || st["reset_at"] != "1796083200" {
		t.Errorf("json = %v", m)
	}
	if ids := m["key_ids"].([]any); len(ids) != 2 || ids[0] != k1 {
		t.Errorf("key_ids = %v", ids)
	}

	// Without a budget or keys.
	r = f.mustRun(t, "team", "get", plain)
	if strings.Contains(r.stdout, "Spent:") || !strings.Contains(r.stdout, "Keys:") {
		t.Errorf("get plain:\n%s", r.stdout)
	}
	m = decodeObject(t, f.mustRun(t, "team", "get", plain, "-o", "json").stdout)
	if m["budget_status"] != nil || len(m["key_ids"].([]any)) != 0 {
		t.Errorf("plain json = %v", m)
	}
	// A total budget never resets.
	f.keys.statuses.set("team:"+plain, &tollgatev1.BudgetStatus{LimitNanos: 1e9, Period: "total"})
	f.mustRun(t, "team", "update", plain, "--budget", "1", "--period", "total")
	if r := f.mustRun(t, "team", "get", plain); !strings.Contains(r.stdout, "never") {
		t.Errorf("total budget:\n%s", r.stdout)
	}

	if r := f.run(t, "team", "get", "team_nope"); r.code != 1 || r.stderr != "tollctl: team team_nope not found\n" {
		t.Errorf("missing team: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestTeamUpdateSendsOnlyChangedFields(t *testing.T) {
	f := startFake(t)
	id := createTeam(t, f, "--name", "research", "--budget", "500", "--period", "month", "--allow-unpriced", "--meta", "owner=al")
	last := func() *tollgatev1.UpdateTeamRequest {
		_, u := f.teams.lastRequests()
		return u
	}
	f.teams.takeCalls()

	f.mustRun(t, "team", "update", id, "--name", "renamed")
	if req := last(); req.GetId() != id || req.Name == nil || *req.Name != "renamed" || req.Budget != nil || req.ClearBudget || len(req.Metadata) != 0 {
		t.Errorf("--name sent %v", req)
	}
	if calls := f.teams.takeCalls(); !slices.Equal(calls, []string{"UpdateTeam"}) {
		t.Errorf("--name calls = %v", calls)
	}

	// --budget alone keeps the period and allow_unpriced of the current budget.
	f.mustRun(t, "team", "update", id, "--budget", "750")
	want := &tollgatev1.Budget{LimitNanos: 750_000_000_000, Period: "month", AllowUnpriced: true}
	if req := last(); req.Name != nil || !proto.Equal(req.Budget, want) || req.ClearBudget {
		t.Errorf("--budget sent %v", req)
	}
	if calls := f.teams.takeCalls(); !slices.Equal(calls, []string{"GetTeam", "UpdateTeam"}) {
		t.Errorf("--budget calls = %v", calls)
	}

	f.mustRun(t, "team", "update", id, "--allow-unpriced=false")
	want = &tollgatev1.Budget{LimitNanos: 750_000_000_000, Period: "month"}
	if req := last(); !proto.Equal(req.Budget, want) {
		t.Errorf("--allow-unpriced=false sent %v", req.Budget)
	}
	f.mustRun(t, "team", "update", id, "--period", "week")
	want = &tollgatev1.Budget{LimitNanos: 750_000_000_000, Period: "week"}
	if req := last(); !proto.Equal(req.Budget, want) {
		t.Errorf("--period sent %v", req.Budget)
	}
	f.teams.takeCalls()

	// All three given: nothing to fetch.
	r := f.mustRun(t, "team", "update", id, "--budget", "12.5", "--period", "day", "--allow-unpriced", "--meta", "owner=", "-o", "json")
	want = &tollgatev1.Budget{LimitNanos: 12_500_000_000, Period: "day", AllowUnpriced: true}
	if req := last(); !proto.Equal(req.Budget, want) || len(req.Metadata) != 1 || req.Metadata["owner"] != "" {
		t.Errorf("full budget sent %v", req)
	}
	if calls := f.teams.takeCalls(); !slices.Equal(calls, []string{"UpdateTeam"}) {
		t.Errorf("full budget calls = %v", calls)
	}
	m := decodeObject(t, r.stdout)
	if m["budget"].(map[string]any)["period"] != "day" || len(m["metadata"].(map[string]any)) != 0 {
		t.Errorf("json = %v", m)
	}

	r = f.mustRun(t, "team", "update", id, "--no-budget")
	if req := last(); !req.ClearBudget || req.Budget != nil || req.Name != nil {
		t.Errorf("--no-budget sent %v", req)
	}
	if !strings.Contains(r.stdout, "Updated team "+id) || f.teams.team(id).Budget != nil {
		t.Errorf("--no-budget:\n%s", r.stdout)
	}

	// Without a budget, --budget needs --period.
	f.teams.takeCalls()
	r = f.run(t, "team", "update", id, "--budget", "5")
	if r.code != 2 || !strings.Contains(r.stderr, "has no budget yet") {
		t.Errorf("--budget without period: exit %d stderr %q", r.code, r.stderr)
	}
	if r := f.run(t, "team", "update", id, "--allow-unpriced"); r.code != 2 {
		t.Errorf("--allow-unpriced without budget: exit %d stderr %q", r.code, r.stderr)
	}
	if calls := f.teams.takeCalls(); !slices.Equal(calls, []string{"GetTeam", "GetTeam"}) {
		t.Errorf("calls = %v, want only the two GetTeam", calls)
	}
	f.mustRun(t, "team", "update", id, "--budget", "5", "--period", "week")
	if req := last(); !proto.Equal(req.Budget, &tollgatev1.Budget{LimitNanos: 5e9, Period: "week"}) {
		t.Errorf("new budget sent %v", req.Budget)
	}

	for _, args := range [][]string{
		{"team", "update", id},
		{"team", "update"},
		{"team", "update", id, "--no-budget", "--budget", "5"},
		{"team", "update", id, "--no-budget", "--allow-unpriced"},
		{"team", "update", id, "--budget", "abc"},
		{"team", "update", id, "--budget", "0"},
		{"team", "update", id, "--period", "fortnight"},
		{"team", "update", id, "--allow-unpriced=maybe"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if r := f.run(t, "team", "update", "team_nope", "--budget", "5"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("missing team: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestTeamDelete(t *testing.T) {
	f := startFake(t)
	id := createTeam(t, f, "--name", "busy")
	key, _ := createKey(t, f, "--name", "k", "--team", id)
	r := f.run(t, "team", "delete", id)
	if r.code != 1 || !strings.Contains(r.stderr, "still has 1 key") {
		t.Errorf("delete with keys: exit %d stderr %q", r.code, r.stderr)
	}
	f.mustRun(t, "key", "update", key, "--team", "")
	r = f.mustRun(t, "team", "delete", id)
	if r.stdout != "Deleted team "+id+".\n" || f.teams.team(id) != nil {
		t.Errorf("delete: %q", r.stdout)
	}
	other := createTeam(t, f, "--name", "other")
	if r := f.mustRun(t, "team", "delete", other, "-o", "json"); strings.TrimSpace(r.stdout) != "{}" {
		t.Errorf("json delete = %q", r.stdout)
	}
	if r := f.run(t, "team", "delete", other); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("delete again: exit %d stderr %q", r.code, r.stderr)
	}
}
