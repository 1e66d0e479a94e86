package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// decodeObject parses a JSON object from CLI output.
func decodeObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, s)
	}
	return m
}

func decodeArray(t *testing.T, s string) []map[string]any {
	t.Helper()
	var a []map[string]any
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, s)
	}
	return a
}

// createKey creates a key through the CLI and returns its id and secret.
func createKey(t *testing.T, f *fake, args ...string) (id, secret string) {
	t.Helper()
	r := f.mustRun(t, append([]string{"key", "create", "-o", "json"}, args...)...)
	m := decodeObject(t, r.stdout)
	return m["id"].(string), m["secret"].(string)
}

func TestKeyCreateJSON(t *testing.T) {
	f := startFake(t)
	before := time.Now()
	r := f.mustRun(t, "key", "create", "--name", "ci", "--models", "gpt-4o, claude-*", "--expires-in", "30d",
		"--meta", "team=infra", "--meta", "note=a,b", "-o", "json")
	m := decodeObject(t, r.stdout)

	for _, field := range []string{"id", "name", "secret_prefix", "models", "created_at", "updated_at", "expires_at", "revoked_at", "metadata", "secret"} {
		if _, ok := m[field]; !ok {
			t.Errorf("JSON lacks field %q: %s", field, r.stdout)
		}
	}
	if _, nested := m["key"]; nested {
		t.Errorf("JSON must be flat, got nested key: %s", r.stdout)
	}
	id, _ := m["id"].(string)
	secret, _ := m["secret"].(string)
	if !strings.HasPrefix(id, "key_") || !strings.HasPrefix(secret, "tg_") {
		t.Errorf("id %q secret %q", id, secret)
	}
	if m["name"] != "ci" || m["revoked_at"] != nil {
		t.Errorf("name %v revoked_at %v", m["name"], m["revoked_at"])
	}
	if got, _ := json.Marshal(m["models"]); string(got) != `["gpt-4o","claude-*"]` {
		t.Errorf("models = %s", got)
	}
	if meta := m["metadata"].(map[string]any); meta["team"] != "infra" || meta["note"] != "a,b" {
		t.Errorf("metadata = %v", meta)
	}
	exp, err := time.Parse(time.RFC3339, m["expires_at"].(string))
	if err != nil {
		t.Fatalf("expires_at not RFC 3339: %v", err)
	}
	if want := before.Add(30 * 24 * time.Hour); exp.Before(want.Add(-2*time.Second)) || exp.After(want.Add(time.Minute)) {
		t.Errorf("expires_at = %v, want about %v", exp, want)
	}
	if _, err := time.Parse(time.RFC3339, m["created_at"].(string)); err != nil {
		t.Errorf("created_at not RFC 3339: %v", err)
	}
	if !strings.Contains(r.stderr, "shown only once") {
		t.Errorf("no warning on stderr: %q", r.stderr)
	}
}

func TestKeyCreateTable(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "key", "create", "--name", "alice")
	k := f.keys.key("key_0001")
	if k == nil {
		t.Fatal("key not created")
	}
	secret := f.keys.secret("key_0001")
	for _, want := range []string{"key_0001", "alice", "Secret: " + secret, "cannot be retrieved again", "(all)", "never"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if k.ExpiresAt != nil || len(k.Models) != 0 || len(k.Metadata) != 0 {
		t.Errorf("unexpected fields sent: %v", k)
	}
}

func TestKeyList(t *testing.T) {
	f := startFake(t)
	active, _ := createKey(t, f, "--name", "active-one", "--models", "gpt-4o")
	revoked, _ := createKey(t, f, "--name", "revoked-one")
	f.mustRun(t, "key", "revoke", revoked)
	f.keys.add(&tollgatev1.Key{Id: "key_old", Name: "old-one", ExpiresAt: timestamppb.New(time.Now().Add(-time.Hour)), CreatedAt: fakeTime})

	r := f.mustRun(t, "key", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("want header and 2 rows:\n%s", r.stdout)
	}
	for _, col := range []string{"NAME", "TEAM", "PREFIX", "MODELS", "EXPIRES", "STATUS", "CREATED"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header lacks %s: %q", col, lines[0])
		}
	}
	if fields := strings.Fields(lines[1]); fields[0] != active || fields[1] != "active-one" || fields[2] != "-" || fields[4] != "gpt-4o" || fields[6] != "active" {
		t.Errorf("row = %q", lines[1])
	}
	if !strings.Contains(lines[2], "old-one") || !strings.Contains(lines[2], "expired") {
		t.Errorf("row = %q", lines[2])
	}
	if strings.Contains(r.stdout, revoked) {
		t.Errorf("revoked key listed without --all:\n%s", r.stdout)
	}

	r = f.mustRun(t, "key", "list", "--all")
	if !strings.Contains(r.stdout, revoked) || !strings.Contains(r.stdout, "revoked") {
		t.Errorf("--all lacks the revoked key:\n%s", r.stdout)
	}

	r = f.mustRun(t, "key", "list", "--all", "-o", "json")
	keys := decodeArray(t, r.stdout)
	if len(keys) != 3 || keys[0]["id"] != active || keys[1]["revoked_at"] == nil {
		t.Errorf("json list = %v", keys)
	}
	if _, ok := keys[0]["secret"]; ok {
		t.Error("list must not carry secrets")
	}
}

func TestKeyListEmptyJSON(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "key", "list", "-o", "json")
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("empty list = %q, want []", r.stdout)
	}
}

func TestKeyGet(t *testing.T) {
	f := startFake(t)
	id, secret := createKey(t, f, "--name", "svc", "--meta", "team=infra")
	r := f.mustRun(t, "key", "get", id)
	for _, want := range []string{id, "svc", "team=infra", "active"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, secret) {
		t.Error("get printed the secret")
	}
	m := decodeObject(t, f.mustRun(t, "key", "get", id, "-o", "json").stdout)
	if m["id"] != id || m["name"] != "svc" {
		t.Errorf("json = %v", m)
	}

	r = f.run(t, "key", "get", "key_nope")
	if r.code != 1 || r.stderr != "tollctl: key key_nope not found\n" {
		t.Errorf("missing key: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestKeyUpdateSendsOnlyChangedFields(t *testing.T) {
	f := startFake(t)
	id, _ := createKey(t, f, "--name", "svc", "--models", "a", "--expires-in", "1d", "--meta", "team=x")

	f.mustRun(t, "key", "update", id, "--name", "renamed")
	req := f.keys.lastUpdateReq()
	if req.GetId() != id || req.Name == nil || *req.Name != "renamed" || req.Models != nil || req.ExpiresAt != nil ||
		req.ClearExpiresAt || len(req.Metadata) != 0 {
		t.Errorf("--name only sent %v", req)
	}

	f.mustRun(t, "key", "update", id, "--all-models", "--no-expiry")
	req = f.keys.lastUpdateReq()
	if req.Name != nil || req.Models == nil || len(req.Models.Values) != 0 || !req.ClearExpiresAt || req.ExpiresAt != nil {
		t.Errorf("--all-models --no-expiry sent %v", req)
	}

	r := f.mustRun(t, "key", "update", id, "--models", "x,y", "--expires-in", "2w", "--meta", "owner=al", "--meta", "team=", "-o", "json")
	req = f.keys.lastUpdateReq()
	if req.Name != nil || strings.Join(req.Models.GetValues(), ",") != "x,y" || req.ExpiresAt == nil || req.ClearExpiresAt ||
		len(req.Metadata) != 2 || req.Metadata["owner"] != "al" || req.Metadata["team"] != "" {
		t.Errorf("models/expiry/meta sent %v", req)
	}
	m := decodeObject(t, r.stdout)
	if meta := m["metadata"].(map[string]any); meta["owner"] != "al" || meta["team"] != nil {
		t.Errorf("updated metadata = %v", meta)
	}

	for _, args := range [][]string{
		{"key", "update", id},
		{"key", "update", id, "--models", "a", "--all-models"},
		{"key", "update", id, "--expires-in", "1d", "--no-expiry"},
		{"key", "update", id, "--expires-in", "soon"},
		{"key", "update", id, "--meta", "novalue"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
}

func TestKeyRevoke(t *testing.T) {
	f := startFake(t)
	id, _ := createKey(t, f, "--name", "svc")
	r := f.mustRun(t, "key", "revoke", id)
	if !strings.Contains(r.stdout, "Revoked key "+id) || !strings.Contains(r.stdout, "revoked") {
		t.Errorf("output:\n%s", r.stdout)
	}
	if f.keys.key(id).RevokedAt == nil {
		t.Error("server did not revoke")
	}
}

func TestKeyRotate(t *testing.T) {
	f := startFake(t)
	id, old := createKey(t, f, "--name", "svc")
	r := f.mustRun(t, "key", "rotate", id, "-o", "json")
	m := decodeObject(t, r.stdout)
	if m["id"] != id || m["secret"] == old || m["secret"] != f.keys.secret(id) {
		t.Errorf("rotate json = %v (old secret %s)", m, old)
	}
	r = f.mustRun(t, "key", "rotate", id)
	if !strings.Contains(r.stdout, "Secret: "+f.keys.secret(id)) || !strings.Contains(r.stdout, "cannot be retrieved again") {
		t.Errorf("rotate table:\n%s", r.stdout)
	}
}

func TestKeyCreateTeamAndBudget(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "key", "create", "--name", "nb", "--team", "team_0001", "--budget", "25.5", "--period", "week", "--allow-unpriced")
	req := f.keys.lastCreateReq()
	want := &tollgatev1.Budget{LimitNanos: 25_500_000_000, Period: "week", AllowUnpriced: true}
	if req.TeamId != "team_0001" || !proto.Equal(req.Budget, want) {
		t.Errorf("create sent team %q budget %v", req.TeamId, req.Budget)
	}
	for _, want := range []string{"Team:", "team_0001", "$25.5000 per week (unpriced models allowed)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}

	f.mustRun(t, "key", "create", "--name", "tiny", "--budget", "$0.000000001", "--period", "total")
	if req := f.keys.lastCreateReq(); req.TeamId != "" || !proto.Equal(req.Budget, &tollgatev1.Budget{LimitNanos: 1, Period: "total"}) {
		t.Errorf("tiny budget sent team %q budget %v", req.TeamId, req.Budget)
	}
	f.mustRun(t, "key", "create", "--name", "none")
	if req := f.keys.lastCreateReq(); req.Budget != nil || req.TeamId != "" {
		t.Errorf("no budget flags sent %v", req)
	}

	m := decodeObject(t, f.mustRun(t, "key", "create", "--name", "j", "--budget", "1", "--period", "day", "-o", "json").stdout)
	if b := m["budget"].(map[string]any); b["limit_nanos"] != "1000000000" || b["period"] != "day" || m["secret"] == nil {
		t.Errorf("json = %v", m)
	}

	for _, args := range [][]string{
		{"key", "create", "--name", "x", "--budget", "10"},
		{"key", "create", "--name", "x", "--period", "day"},
		{"key", "create", "--name", "x", "--allow-unpriced"},
		{"key", "create", "--name", "x", "--budget", "-1", "--period", "day"},
		{"key", "create", "--name", "x", "--budget", "1e3", "--period", "day"},
		{"key", "create", "--name", "x", "--budget", "1.0000000001", "--period", "day"},
		{"key", "create", "--name", "x", "--budget", "5", "--period", "hour"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
}

func TestKeyUpdateTeamAndBudget(t *testing.T) {
	f := startFake(t)
	id, _ := createKey(t, f, "--name", "svc", "--team", "team_a")

	f.mustRun(t, "key", "update", id, "--team", "team_b")
	req := f.keys.lastUpdateReq()
	if req.TeamId == nil || *req.TeamId != "team_b" || req.Budget != nil || req.ClearBudget || req.Name != nil {
		t.Errorf("--team sent %v", req)
	}
	f.mustRun(t, "key", "update", id, "--team", "")
	if req := f.keys.lastUpdateReq(); req.TeamId == nil || *req.TeamId != "" {
		t.Errorf(`--team "" sent %v`, req)
	}
	if f.keys.key(id).TeamId != "" {
		t.Error("key still in a team")
	}

	// The key has no budget yet: --budget needs --period.
	if r := f.run(t, "key", "update", id, "--budget", "5"); r.code != 2 || !strings.Contains(r.stderr, "no budget yet") {
		t.Errorf("--budget without period: exit %d stderr %q", r.code, r.stderr)
	}
	f.mustRun(t, "key", "update", id, "--budget", "12.34", "--period", "month")
	req = f.keys.lastUpdateReq()
	if !proto.Equal(req.Budget, &tollgatev1.Budget{LimitNanos: 12_340_000_000, Period: "month"}) || req.TeamId != nil || req.ClearBudget {
		t.Errorf("--budget --period sent %v", req)
	}
	// Now it has one: the period and allow_unpriced are kept.
	f.mustRun(t, "key", "update", id, "--allow-unpriced")
	if req := f.keys.lastUpdateReq(); !proto.Equal(req.Budget, &tollgatev1.Budget{LimitNanos: 12_340_000_000, Period: "month", AllowUnpriced: true}) {
		t.Errorf("--allow-unpriced sent %v", req.Budget)
	}
	f.mustRun(t, "key", "update", id, "--budget", "$0.75")
	if req := f.keys.lastUpdateReq(); !proto.Equal(req.Budget, &tollgatev1.Budget{LimitNanos: 750_000_000, Period: "month", AllowUnpriced: true}) {
		t.Errorf("--budget sent %v", req.Budget)
	}

	r := f.mustRun(t, "key", "update", id, "--no-budget", "-o", "json")
	req = f.keys.lastUpdateReq()
	if !req.ClearBudget || req.Budget != nil {
		t.Errorf("--no-budget sent %v", req)
	}
	if m := decodeObject(t, r.stdout); m["budget"] != nil {
		t.Errorf("budget not removed: %v", m)
	}

	for _, args := range [][]string{
		{"key", "update", id, "--no-budget", "--budget", "5"},
		{"key", "update", id, "--no-budget", "--period", "day"},
		{"key", "update", id, "--budget", "five", "--period", "day"},
		{"key", "update", id, "--period", "year"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
}

func TestKeyGetBudgetStatus(t *testing.T) {
	f := startFake(t)
	id, _ := createKey(t, f, "--name", "svc", "--team", "team_0001", "--budget", "25", "--period", "week")
	f.keys.statuses.set("key:"+id, &tollgatev1.BudgetStatus{
		LimitNanos: 25_000_000_000, Period: "week", PeriodStart: 1793577600, ResetAt: 1794182400,
		SpentNanos: 1_234_560_000, LeasedNanos: 500_000_000, RemainingNanos: 23_765_440_000,
	})
	f.keys.statuses.set("team:team_0001", &tollgatev1.BudgetStatus{
		LimitNanos: 1_000_000_000_000, Period: "total", SpentNanos: 999_999_950_000, RemainingNanos: 50_000,
	})
	r := f.mustRun(t, "key", "get", id)
	for _, want := range []string{
		"Budget status:", "$1.2346 spent, $0.5000 leased, $23.7654 remaining of $25.0000 per week; resets 2026-11-09T00:00:00Z",
		"Team budget:", "$1000.0000 spent, $0.0000 leased, $0.0001 remaining of $1000.0000 in total; never resets",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get lacks %q:\n%s", want, r.stdout)
		}
	}
	m := decodeObject(t, f.mustRun(t, "key", "get", id, "-o", "json").stdout)
	if m["id"] != id || m["team_id"] != "team_0001" {
		t.Errorf("json = %v", m)
	}
	if st := m["budget_status"].(map[string]any); st["spent_nanos"] != "1234560000" || st["period"] != "week" {
		t.Errorf("budget_status = %v", st)
	}
	if st := m["team_budget_status"].(map[string]any); st["remaining_nanos"] != "50000" || st["reset_at"] != "0" {
		t.Errorf("team_budget_status = %v", st)
	}

	// A key without budget or team: no status lines, nulls in JSON.
	plain, _ := createKey(t, f, "--name", "plain")
	r = f.mustRun(t, "key", "get", plain)
	if strings.Contains(r.stdout, "Budget status:") || strings.Contains(r.stdout, "Team budget:") {
		t.Errorf("plain key:\n%s", r.stdout)
	}
	m = decodeObject(t, f.mustRun(t, "key", "get", plain, "-o", "json").stdout)
	if v, ok := m["budget_status"]; !ok || v != nil {
		t.Errorf("budget_status = %v (present %v)", v, ok)
	}
	if v, ok := m["team_budget_status"]; !ok || v != nil {
		t.Errorf("team_budget_status = %v (present %v)", v, ok)
	}
	// In a team without a budget.
	f.mustRun(t, "key", "update", plain, "--team", "team_x")
	if r := f.mustRun(t, "key", "get", plain); !strings.Contains(r.stdout, "Team budget:") || !strings.Contains(r.stdout, "none") {
		t.Errorf("team without budget:\n%s", r.stdout)
	}
}

// TestKeyListPagesThroughEveryKey pins that key list asks for pages (one
// answer with every key fails past gRPC's 4 MiB limit, about 50,000 keys)
// and still prints every key once, in creation order.
func TestKeyListPagesThroughEveryKey(t *testing.T) {
	f := startFake(t)
	const n = 2*keyListPage + 7
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f.keys.mu.Lock()
	for i := range n {
		// ids run against creation order, so the pages' id order differs
		// from the printed order
		f.keys.keys = append(f.keys.keys, &tollgatev1.Key{Id: fmt.Sprintf("key_%06d", n-i),
			CreatedAt: timestamppb.New(base.Add(time.Duration(i) * time.Second))})
	}
	f.keys.mu.Unlock()

	got := decodeArray(t, f.mustRun(t, "key", "list", "-o", "json").stdout)
	if len(got) != n {
		t.Fatalf("key list printed %d keys, want %d", len(got), n)
	}
	for i, k := range got {
		if want := fmt.Sprintf("key_%06d", n-i); k["id"] != want {
			t.Fatalf("key %d is %v, want %s (creation order)", i, k["id"], want)
		}
	}
	f.keys.mu.Lock()
	calls := f.keys.listCalls
	f.keys.mu.Unlock()
	if len(calls) != 3 {
		t.Errorf("key list made %d ListKeys calls for %d keys, want 3 pages", len(calls), n)
	}
	for _, c := range calls {
		if c.GetPageSize() != keyListPage {
			t.Errorf("a ListKeys call asked for page_size %d, want %d", c.GetPageSize(), keyListPage)
		}
	}
}
