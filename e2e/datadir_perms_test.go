package e2e

import (
	"io/fs"
	"path/filepath"
	"testing"
)

// TestDataDirIsPrivate: after a node served and stopped, nothing in its
// data dir (Raft, ledger and its journal, ratelimit.state, the admin
// token) can be read by other users.
func TestDataDirIsPrivate(t *testing.T) {
	mock := mockLLM(t)
	dir := t.TempDir()
	g := startGateway(t, dir, "t")
	g.ctl(t, "model", "add", "gpt-test", "--provider", "openai-compatible", "--base-url", mock, "--upstream-model", "mock-model")
	_, secret := g.createKey(t, "--name", "perms", "--rpm", "1000")
	for range 3 {
		if code, b := post(t, "http://"+g.http+"/v1/chat/completions", secret, `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`); code != 200 {
			t.Fatalf("%d %s", code, b)
		}
	}
	g.stop(t)
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if path == dir {
			return nil // made by the test
		}
		n++
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: readable beyond its owner", path, info.Mode().Perm())
		}
		return nil
	})
	if err != nil || n < 5 {
		t.Fatalf("walked %d entries: %v", n, err)
	}
}
