package main

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func limits(rpm, tpm, par int64) *tollgatev1.RateLimits {
	return &tollgatev1.RateLimits{Rpm: rpm, Tpm: tpm, MaxParallel: par}
}

// checkLimitsColumn checks that the LIMITS column of a table, the last
// one, holds want in the row whose first cells are first.
func checkLimitsColumn(t *testing.T, out string, want string, first ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	col := strings.Index(lines[0], "LIMITS")
	if col < 0 || !strings.HasSuffix(lines[0], "LIMITS") {
		t.Fatalf("no LIMITS column at the end:\n%s", out)
	}
	for _, l := range lines[1:] {
		if fields := strings.Fields(l); len(fields) >= len(first) && slices.Equal(fields[:len(first)], first) {
			if len(l) < col || l[col:] != want {
				t.Errorf("LIMITS of %s = %q, want %q:\n%s", first, l[min(col, len(l)):], want, out)
			}
			return
		}
	}
	t.Errorf("no row for %s:\n%s", first, out)
}

func TestFmtLimits(t *testing.T) {
	for _, c := range []struct {
		l    *tollgatev1.RateLimits
		want string
	}{
		{nil, "-"},
		{limits(0, 0, 0), "-"},
		{limits(600, 100000, 8), "600rpm 100000tpm 8par"},
		{limits(600, 0, 0), "600rpm"},
		{limits(0, 5000, 0), "5000tpm"},
		{limits(0, 0, 2), "2par"},
	} {
		if got := fmtLimits(c.l); got != c.want {
			t.Errorf("fmtLimits(%v) = %q, want %q", c.l, got, c.want)
		}
	}
}

func TestKeyLimits(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "key", "create", "--name", "batch", "--rpm", "600", "--tpm", "100000", "--max-parallel", "8")
	if got := f.keys.lastCreateReq().GetLimits(); !proto.Equal(got, limits(600, 100000, 8)) {
		t.Errorf("create sent limits %v", got)
	}
	if !strings.Contains(r.stdout, "600rpm 100000tpm 8par") {
		t.Errorf("create output lacks the limits:\n%s", r.stdout)
	}
	id := "key_0001"
	plain, _ := createKey(t, f, "--name", "plain")
	if got := f.keys.lastCreateReq().Limits; got != nil {
		t.Errorf("create without limit flags sent %v", got)
	}
	f.mustRun(t, "key", "create", "--name", "zero", "--rpm", "0")
	if got := f.keys.lastCreateReq().Limits; got != nil {
		t.Errorf("create with --rpm 0 sent %v", got)
	}

	r = f.mustRun(t, "key", "list")
	checkLimitsColumn(t, r.stdout, "600rpm 100000tpm 8par", id)
	checkLimitsColumn(t, r.stdout, "-", plain)
	if r := f.mustRun(t, "key", "get", id); !strings.Contains(r.stdout, "Limits:") || !strings.Contains(r.stdout, "600rpm 100000tpm 8par") {
		t.Errorf("get lacks the limits:\n%s", r.stdout)
	}
	if r := f.mustRun(t, "key", "get", plain); !strings.Contains(r.stdout, "Limits:") {
		t.Errorf("get lacks the limits row:\n%s", r.stdout)
	}
	m := decodeObject(t, f.mustRun(t, "key", "get", id, "-o", "json").stdout)
	if l, ok := m["limits"].(map[string]any); !ok || l["rpm"] != "600" || l["tpm"] != "100000" || l["max_parallel"] != "8" {
		t.Errorf("json limits = %v", m["limits"])
	}
	if m := decodeObject(t, f.mustRun(t, "key", "get", plain, "-o", "json").stdout); m["limits"] != nil {
		t.Errorf("json limits of a key without = %v", m["limits"])
	}

	// Update: limits not given keep their current values.
	const getKey = "/tollgate.v1.KeyService/GetKey"
	gets := f.inject.count(getKey)
	f.mustRun(t, "key", "update", id, "--rpm", "1200")
	if got := f.keys.lastUpdateReq().GetLimits(); !proto.Equal(got, limits(1200, 100000, 8)) {
		t.Errorf("--rpm 1200 sent %v", got)
	}
	if n := f.inject.count(getKey) - gets; n != 1 {
		t.Errorf("--rpm alone fetched the key %d times, want 1", n)
	}
	f.mustRun(t, "key", "update", id, "--tpm", "0")
	if got := f.keys.lastUpdateReq().GetLimits(); !proto.Equal(got, limits(1200, 0, 8)) {
		t.Errorf("--tpm 0 sent %v", got)
	}
	if got := f.keys.key(id).GetLimits(); !proto.Equal(got, limits(1200, 0, 8)) {
		t.Errorf("stored %v", got)
	}
	gets = f.inject.count(getKey)
	f.mustRun(t, "key", "update", id, "--rpm", "1", "--tpm", "2", "--max-parallel", "3")
	if got := f.keys.lastUpdateReq().GetLimits(); !proto.Equal(got, limits(1, 2, 3)) {
		t.Errorf("all three sent %v", got)
	}
	if n := f.inject.count(getKey) - gets; n != 0 {
		t.Errorf("all three flags fetched the key %d times, want 0", n)
	}
	// Budget and limits together fetch the key once.
	gets = f.inject.count(getKey)
	f.mustRun(t, "key", "update", id, "--budget", "5", "--period", "day", "--max-parallel", "4")
	req := f.keys.lastUpdateReq()
	if !proto.Equal(req.GetLimits(), limits(1, 2, 4)) || req.GetBudget().GetLimitNanos() != 5_000_000_000 {
		t.Errorf("budget and limits sent %v", req)
	}
	if n := f.inject.count(getKey) - gets; n != 1 {
		t.Errorf("budget and limits fetched the key %d times, want 1", n)
	}
	f.mustRun(t, "key", "update", id, "--name", "renamed")
	if got := f.keys.lastUpdateReq().Limits; got != nil {
		t.Errorf("--name alone sent limits %v", got)
	}

	r = f.mustRun(t, "key", "update", id, "--no-limits")
	if got := f.keys.lastUpdateReq().Limits; got == nil || !proto.Equal(got, limits(0, 0, 0)) {
		t.Errorf("--no-limits sent %v", got)
	}
	if got := f.keys.key(id).GetLimits(); got != nil {
		t.Errorf("stored after --no-limits: %v", got)
	}
	if !strings.Contains(r.stdout, "Limits:") || strings.Contains(r.stdout, "rpm") {
		t.Errorf("update output:\n%s", r.stdout)
	}

	// A key without limits gets only the ones given.
	f.mustRun(t, "key", "update", plain, "--tpm", "5000")
	if got := f.keys.lastUpdateReq().GetLimits(); !proto.Equal(got, limits(0, 5000, 0)) {
		t.Errorf("--tpm on a key without limits sent %v", got)
	}

	const updateKey = "/tollgate.v1.KeyService/UpdateKey"
	const createKeyRPC = "/tollgate.v1.KeyService/CreateKey"
	updates, creates := f.inject.count(updateKey), f.inject.count(createKeyRPC)
	for _, args := range [][]string{
		{"key", "create", "--name", "x", "--rpm", "-1"},
		{"key", "create", "--name", "x", "--tpm=-5"},
		{"key", "create", "--name", "x", "--max-parallel", "-2"},
		{"key", "create", "--name", "x", "--rpm", "lots"},
		{"key", "create", "--name", "x", "--no-limits"}, // update only
		{"key", "update", id, "--rpm", "-1"},
		{"key", "update", id, "--max-parallel", "-1", "--tpm", "3"},
		{"key", "update", id, "--no-limits", "--rpm", "5"},
		{"key", "update", id, "--no-limits", "--max-parallel", "0"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if f.inject.count(updateKey) != updates || f.inject.count(createKeyRPC) != creates {
		t.Error("invalid limits reached the server")
	}
	if r := f.run(t, "key", "update", "key_nope", "--rpm", "5"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("missing key: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestTeamLimits(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "team", "create", "--name", "batch", "--rpm", "600", "--tpm", "100000", "--max-parallel", "8")
	req, _ := f.teams.lastRequests()
	if !proto.Equal(req.GetLimits(), limits(600, 100000, 8)) {
		t.Errorf("create sent limits %v", req.GetLimits())
	}
	if !strings.Contains(r.stdout, "Limits:") || !strings.Contains(r.stdout, "600rpm 100000tpm 8par") {
		t.Errorf("create output lacks the limits:\n%s", r.stdout)
	}
	id := "team_0001"
	plain := createTeam(t, f, "--name", "plain")
	if req, _ := f.teams.lastRequests(); req.Limits != nil {
		t.Errorf("create without limit flags sent %v", req.Limits)
	}

	r = f.mustRun(t, "team", "list")
	checkLimitsColumn(t, r.stdout, "600rpm 100000tpm 8par", id)
	checkLimitsColumn(t, r.stdout, "-", plain)
	if r := f.mustRun(t, "team", "get", id); !strings.Contains(r.stdout, "600rpm 100000tpm 8par") {
		t.Errorf("get lacks the limits:\n%s", r.stdout)
	}
	teams := decodeArray(t, f.mustRun(t, "team", "list", "-o", "json").stdout)
	if l, ok := teams[0]["limits"].(map[string]any); !ok || l["rpm"] != "600" || teams[1]["limits"] != nil {
		t.Errorf("json list = %v", teams)
	}

	f.teams.takeCalls()
	f.mustRun(t, "team", "update", id, "--max-parallel", "0")
	if _, u := f.teams.lastRequests(); !proto.Equal(u.GetLimits(), limits(600, 100000, 0)) {
		t.Errorf("--max-parallel 0 sent %v", u.GetLimits())
	}
	if calls := f.teams.takeCalls(); strings.Join(calls, ",") != "GetTeam,UpdateTeam" {
		t.Errorf("calls = %v", calls)
	}
	f.mustRun(t, "team", "update", id, "--rpm", "7", "--tpm", "8", "--max-parallel", "9")
	if _, u := f.teams.lastRequests(); !proto.Equal(u.GetLimits(), limits(7, 8, 9)) {
		t.Errorf("all three sent %v", u.GetLimits())
	}
	if calls := f.teams.takeCalls(); strings.Join(calls, ",") != "UpdateTeam" {
		t.Errorf("all three flags: calls = %v", calls)
	}
	f.mustRun(t, "team", "update", id, "--name", "renamed")
	if _, u := f.teams.lastRequests(); u.Limits != nil {
		t.Errorf("--name alone sent limits %v", u.Limits)
	}
	f.mustRun(t, "team", "update", id, "--no-limits")
	if _, u := f.teams.lastRequests(); u.Limits == nil || !proto.Equal(u.Limits, limits(0, 0, 0)) {
		t.Errorf("--no-limits sent %v", u.Limits)
	}
	if got := f.teams.team(id).GetLimits(); got != nil {
		t.Errorf("stored after --no-limits: %v", got)
	}
	f.mustRun(t, "team", "update", plain, "--rpm", "60")
	if _, u := f.teams.lastRequests(); !proto.Equal(u.GetLimits(), limits(60, 0, 0)) {
		t.Errorf("--rpm on a team without limits sent %v", u.GetLimits())
	}

	f.teams.takeCalls()
	for _, args := range [][]string{
		{"team", "create", "--name", "x", "--rpm", "-1"},
		{"team", "create", "--name", "x", "--no-limits"},
		{"team", "update", id, "--tpm", "-1"},
		{"team", "update", id, "--no-limits", "--tpm", "1"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if calls := f.teams.takeCalls(); len(calls) != 0 {
		t.Errorf("invalid input reached the server: %v", calls)
	}
}

func TestModelLimits(t *testing.T) {
	f := startFake(t)
	r := f.mustRun(t, "model", "add", "gpt", "--provider", "openai", "--rpm", "600", "--tpm", "100000", "--max-parallel", "8")
	if got := f.models.get("gpt").GetDeployments()[0].GetLimits(); !proto.Equal(got, limits(600, 100000, 8)) {
		t.Errorf("add sent limits %v", got)
	}
	lines := strings.SplitN(r.stdout, "\n\n", 3)
	checkLimitsColumn(t, lines[len(lines)-1], "600rpm 100000tpm 8par", "openai")
	f.mustRun(t, "model", "add", "gpt", "--provider", "openai", "--max-parallel", "0")
	if got := f.models.get("gpt").GetDeployments()[1].Limits; got != nil {
		t.Errorf("add without limits sent %v", got)
	}

	r = f.mustRun(t, "model", "list")
	checkLimitsColumn(t, r.stdout, "600rpm 100000tpm 8par", "gpt", "openai")
	checkLimitsColumn(t, r.stdout, "-", "gpt", "openai-2")
	r = f.mustRun(t, "model", "get", "gpt")
	body := strings.SplitN(r.stdout, "\n\n", 2)[1]
	checkLimitsColumn(t, body, "600rpm 100000tpm 8par", "openai")
	checkLimitsColumn(t, body, "-", "openai-2")
	routes := decodeArray(t, f.mustRun(t, "model", "list", "-o", "json").stdout)
	d := routes[0]["deployments"].([]any)[0].(map[string]any)
	if l, ok := d["limits"].(map[string]any); !ok || l["max_parallel"] != "8" {
		t.Errorf("json deployment = %v", d)
	}

	f.models.takeCalls()
	f.mustRun(t, "model", "update", "gpt", "--deployment", "openai", "--tpm", "50000")
	if got := f.models.lastUpdateReq().GetLimits(); !proto.Equal(got, limits(600, 50000, 8)) {
		t.Errorf("--tpm sent %v", got)
	}
	if calls := f.models.takeCalls(); strings.Join(calls, ",") != "GetModel,UpdateDeployment" {
		t.Errorf("calls = %v", calls)
	}
	f.mustRun(t, "model", "update", "gpt", "--deployment", "openai", "--rpm", "1", "--tpm", "2", "--max-parallel", "3")
	if got := f.models.lastUpdateReq().GetLimits(); !proto.Equal(got, limits(1, 2, 3)) {
		t.Errorf("all three sent %v", got)
	}
	if calls := f.models.takeCalls(); strings.Join(calls, ",") != "UpdateDeployment" {
		t.Errorf("all three flags: calls = %v", calls)
	}
	f.mustRun(t, "model", "update", "gpt", "--deployment", "openai-2", "--weight", "3")
	if got := f.models.lastUpdateReq().Limits; got != nil {
		t.Errorf("--weight alone sent limits %v", got)
	}
	f.mustRun(t, "model", "update", "gpt", "--deployment", "openai", "--no-limits")
	if got := f.models.lastUpdateReq().Limits; got == nil || !proto.Equal(got, limits(0, 0, 0)) {
		t.Errorf("--no-limits sent %v", got)
	}
	if got := f.models.get("gpt").GetDeployments()[0].Limits; got != nil {
		t.Errorf("stored after --no-limits: %v", got)
	}

	// A single deployment needs no --deployment; its limits are kept too.
	f.mustRun(t, "model", "add", "echo", "--provider", "demo", "--rpm", "10", "--max-parallel", "2")
	f.mustRun(t, "model", "update", "echo", "--rpm", "20")
	if req := f.models.lastUpdateReq(); req.DeploymentId != "demo" || !proto.Equal(req.GetLimits(), limits(20, 0, 2)) {
		t.Errorf("single deployment update sent %v", req)
	}

	if r := f.run(t, "model", "update", "gpt", "--deployment", "nope", "--rpm", "1"); r.code != 1 || !strings.Contains(r.stderr, "no deployment nope") {
		t.Errorf("unknown deployment: exit %d stderr %q", r.code, r.stderr)
	}
	if r := f.run(t, "model", "update", "gpt", "--rpm", "1"); r.code != 2 || !strings.Contains(r.stderr, "openai, openai-2") {
		t.Errorf("ambiguous: exit %d stderr %q", r.code, r.stderr)
	}

	f.models.takeCalls()
	for _, args := range [][]string{
		{"model", "add", "x", "--provider", "demo", "--rpm", "-1"},
		{"model", "add", "x", "--provider", "demo", "--no-limits"},
		{"model", "update", "gpt", "--deployment", "openai", "--max-parallel", "-3"},
		{"model", "update", "gpt", "--deployment", "openai", "--no-limits", "--rpm", "3"},
	} {
		if r := f.run(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if calls := f.models.takeCalls(); len(calls) != 0 {
		t.Errorf("invalid input reached the server: %v", calls)
	}
}
