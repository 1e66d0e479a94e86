package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

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
	for _, col := range []string{"NAME", "PREFIX", "MODELS", "EXPIRES", "STATUS", "CREATED"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header lacks %s: %q", col, lines[0])
		}
	}
	if fields := strings.Fields(lines[1]); fields[0] != active || fields[1] != "active-one" || fields[3] != "gpt-4o" || fields[5] != "active" {
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
