package node

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

const sealedTestSecret = "sk-sealed-credential-0123456789"

// authUpstream is an OpenAI-compatible upstream that records the
// Authorization header of the last request.
func authUpstream(t *testing.T) (url string, last func() string) {
	var mu sync.Mutex
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		auth = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1", func() string { mu.Lock(); defer mu.Unlock(); return auth }
}

// chatThrough posts a chat request for model to tn and returns the status
// and body.
func chatThrough(t *testing.T, tn *tnode, key, model string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", tn.httpURL()+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// filesContaining lists the files under dir whose bytes contain s.
func filesContaining(t *testing.T, dir, s string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// With a secrets key, a credential is sealed before it enters the Raft
// log: neither the data dir nor a saved snapshot holds its value, yet the
// upstream gets it. A node without the key (or with another) cannot use
// it and says why; with the key back, it can.
func TestSealedCredentials(t *testing.T) {
	up, lastAuth := authUpstream(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg := baseConfig(t, "solo", testLogger(t))
	cfg.RaftAddr = localAddr(freePort(t, false))
	cfg.SecretsKey = key
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)

	if _, err := tn.creds().SetCredential(adminCtx(t), &pb.SetCredentialRequest{Name: "up", Value: sealedTestSecret}); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.models().AddDeployment(adminCtx(t), &pb.AddDeploymentRequest{Model: "m1", Deployment: &pb.Deployment{
		Id: "d1", Provider: "openai-compatible", BaseUrl: up, UpstreamModel: "up", Credential: "up"}}); err != nil {
		t.Fatal(err)
	}
	k, err := tn.keys().CreateKey(adminCtx(t), &pb.CreateKeyRequest{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := chatThrough(t, tn, k.GetSecret(), "m1"); code != 200 || lastAuth() != "Bearer "+sealedTestSecret {
		t.Fatalf("chat: %d %s; upstream saw %q", code, body, lastAuth())
	}
	if v := tn.n.Store().State().Credential("up").GetValue(); !raftstore.IsSealed(v) || strings.Contains(v, sealedTestSecret) {
		t.Errorf("stored value %q is not sealed", v)
	}
	list, err := tn.creds().ListCredentials(adminCtx(t), &pb.ListCredentialsRequest{})
	if err != nil || len(list.GetCredentials()) != 1 || list.GetCredentials()[0].GetHint() != sealedTestSecret[len(sealedTestSecret)-4:] {
		t.Errorf("ListCredentials = %v, %v; want the hint of the clear value", list, err)
	}
	snap, err := tn.cluster().SaveSnapshot(adminCtx(t), &pb.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(snap.GetData(), []byte(sealedTestSecret)) {
		t.Error("a saved snapshot holds the credential in the clear")
	}
	tn.stop(15 * time.Second)
	if f := filesContaining(t, cfg.DataDir, sealedTestSecret); len(f) > 0 {
		t.Errorf("the credential is on disk in the clear in %v", f)
	}

	// Restarted without the key: the deployment cannot use the credential.
	noKey := cfg
	noKey.SecretsKey = nil
	tn = startNode(t, noKey)
	tn.waitReady(15 * time.Second)
	code, body := chatThrough(t, tn, k.GetSecret(), "m1")
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal([]byte(body), &e)
	if code != http.StatusBadGateway || e.Error.Code != "credential_unreadable" || !strings.Contains(e.Error.Message, "TOLLGATE_SECRETS_KEY") {
		t.Errorf("without the key: %d %s", code, body)
	}
	tn.stop(15 * time.Second)

	// With the key again it works.
	tn = startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	if code, body := chatThrough(t, tn, k.GetSecret(), "m1"); code != 200 || lastAuth() != "Bearer "+sealedTestSecret {
		t.Fatalf("with the key again: %d %s; upstream saw %q", code, body, lastAuth())
	}
}

// A credential set before the key was given is sealed by the leader once
// the node runs with the key, and keeps working.
func TestCredentialsSealedWhenKeyIsAdded(t *testing.T) {
	up, lastAuth := authUpstream(t)
	cfg := baseConfig(t, "solo", testLogger(t))
	cfg.RaftAddr = localAddr(freePort(t, false))
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	if _, err := tn.creds().SetCredential(adminCtx(t), &pb.SetCredentialRequest{Name: "up", Value: sealedTestSecret}); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.models().AddDeployment(adminCtx(t), &pb.AddDeploymentRequest{Model: "m1", Deployment: &pb.Deployment{
		Id: "d1", Provider: "openai-compatible", BaseUrl: up, UpstreamModel: "up", Credential: "up"}}); err != nil {
		t.Fatal(err)
	}
	k, err := tn.keys().CreateKey(adminCtx(t), &pb.CreateKeyRequest{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if v := tn.n.Store().State().Credential("up").GetValue(); v != sealedTestSecret {
		t.Fatalf("without a key the value is stored as given; got %q", v)
	}
	tn.stop(15 * time.Second)

	cfg.SecretsKey = make([]byte, 32)
	_, _ = rand.Read(cfg.SecretsKey)
	tn = startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	eventually(t, 10*time.Second, "the credential sealed", func() error {
		if v := tn.n.Store().State().Credential("up").GetValue(); !raftstore.IsSealed(v) {
			return fmt.Errorf("stored value %q", v)
		}
		return nil
	})
	if code, body := chatThrough(t, tn, k.GetSecret(), "m1"); code != 200 || lastAuth() != "Bearer "+sealedTestSecret {
		t.Fatalf("after sealing: %d %s; upstream saw %q", code, body, lastAuth())
	}
}
