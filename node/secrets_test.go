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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/node/admin"
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

// startWithCredential runs a node, sets the credential "up" to
// sealedTestSecret, routes m1 to upstream with it and creates a key.
func startWithCredential(t *testing.T, cfg Config, upstream string) (*tnode, *pb.CreateKeyResponse) {
	t.Helper()
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	if _, err := tn.creds().SetCredential(adminCtx(t), &pb.SetCredentialRequest{Name: "up", Value: sealedTestSecret}); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.models().AddDeployment(adminCtx(t), &pb.AddDeploymentRequest{Model: "m1", Deployment: &pb.Deployment{
		Id: "d1", Provider: "openai-compatible", BaseUrl: upstream, UpstreamModel: "up", Credential: "up"}}); err != nil {
		t.Fatal(err)
	}
	k, err := tn.keys().CreateKey(adminCtx(t), &pb.CreateKeyRequest{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	return tn, k
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
	tn, k := startWithCredential(t, cfg, up)
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
	st := tn.n.Store().State()
	clusterSecret := st.ClusterSecret()
	if !raftstore.IsSealed(st.StoredClusterSecret()) || clusterSecret == "" {
		t.Errorf("cluster secret stored %q, opened %q; want it sealed", st.StoredClusterSecret(), clusterSecret)
	}
	tn.stop(15 * time.Second)
	for _, s := range []string{sealedTestSecret, clusterSecret} {
		if f := filesContaining(t, cfg.DataDir, s); len(f) > 0 {
			t.Errorf("a secret is on disk in the clear in %v", f)
		}
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
	if code != http.StatusBadGateway || e.Error.Code != "credential_unreadable" || !strings.Contains(e.Error.Message, "secrets key") {
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
	tn, k := startWithCredential(t, cfg, up)
	if v := tn.n.Store().State().Credential("up").GetValue(); v != sealedTestSecret {
		t.Fatalf("without a key the value is stored as given; got %q", v)
	}
	clusterSecret := tn.n.Store().State().StoredClusterSecret()
	tn.stop(15 * time.Second)

	cfg.SecretsKey = make([]byte, 32)
	_, _ = rand.Read(cfg.SecretsKey)
	tn = startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	eventually(t, 10*time.Second, "the credential and the cluster secret sealed", func() error {
		st := tn.n.Store().State()
		if v := st.Credential("up").GetValue(); !raftstore.IsSealed(v) {
			return fmt.Errorf("stored value %q", v)
		}
		if !raftstore.IsSealed(st.StoredClusterSecret()) {
			return fmt.Errorf("cluster secret %q", st.StoredClusterSecret())
		}
		return nil
	})
	if got := tn.n.Store().State().ClusterSecret(); got != clusterSecret {
		t.Errorf("the resealed cluster secret opens to %q, was %q", got, clusterSecret)
	}
	if code, body := chatThrough(t, tn, k.GetSecret(), "m1"); code != 200 || lastAuth() != "Bearer "+sealedTestSecret {
		t.Fatalf("after sealing: %d %s; upstream saw %q", code, body, lastAuth())
	}
}

// A follower with the key seals a credential before it forwards the write,
// so a leader without the key (a rollout, a misconfigured node) does not
// put it into the log in the clear; clients cannot pass sealed-looking
// values themselves.
func TestKeyedFollowerSealsForKeylessLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node")
	}
	t.Parallel()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	// n1, without the key, starts alone and so leads; n2 and n3, with it, join it.
	logger := testLogger(t)
	n1 := startNode(t, baseConfig(t, "n1", logger))
	n1.waitReady(15 * time.Second)
	nodes := []*tnode{n1}
	for _, id := range []string{"n2", "n3"} {
		cfg := baseConfig(t, id, logger)
		cfg.SecretsKey = key
		cfg.Join = []string{n1.gossipAddr()}
		nodes = append(nodes, startNode(t, cfg))
	}
	waitCluster(t, nodes, 3, 0)
	// A leader that lost its lease under load gets leadership back by transfers.
	for i := 0; i < 10 && !n1.n.Store().IsLeader(); i++ {
		for _, tn := range nodes {
			if tn.n.Store().IsLeader() {
				_ = tn.n.Store().TransferLeadership()
			}
		}
		eventually(t, 10*time.Second, "a leader after the transfer", func() error {
			_, err := agreedLeader(nodes)
			return err
		})
	}
	if !n1.n.Store().IsLeader() {
		t.Fatal("n1, the keyless node the cluster formed around, is not the leader")
	}
	err := retryUnavailable(10*time.Second, func() error {
		_, err := nodes[1].creds().SetCredential(adminCtx(t), &pb.SetCredentialRequest{Name: "up", Value: sealedTestSecret})
		return err
	})
	if err != nil {
		t.Fatalf("SetCredential through keyed n2: %v", err)
	}
	for _, tn := range nodes {
		if v := tn.n.Store().State().Credential("up").GetValue(); !raftstore.IsSealed(v) {
			t.Errorf("%s stores %q", tn.id, v)
		}
	}
	_, err = nodes[1].creds().SetCredential(adminCtx(t), &pb.SetCredentialRequest{Name: "x", Value: "tgsealed:v1:00000000:AAAA"})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a sealed-looking value from a client: %v, want InvalidArgument", err)
	}
	// A client that sets the forwarding header itself, straight at the
	// leader, is still a client: it has no cluster secret to vouch with.
	// The leader is asked again should leadership move meanwhile (a node
	// that is no longer the leader answers a forwarded call Unavailable).
	fctx := metadata.AppendToOutgoingContext(adminCtx(t), admin.MetadataForwarded, "n2")
	err = retryUnavailable(10*time.Second, func() error {
		leader, err := agreedLeader(nodes)
		if err != nil {
			return status.Error(codes.Unavailable, err.Error())
		}
		_, err = leader.creds().SetCredential(fctx, &pb.SetCredentialRequest{Name: "y", Value: "tgsealed:v1:00000000:AAAA"})
		return err
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a sealed-looking value with a forged forwarding header: %v, want InvalidArgument", err)
	}
	for _, tn := range nodes {
		if v := tn.n.Store().State().Credential("y"); v != nil {
			t.Errorf("the forged sealed value was stored on %s: %q", tn.id, v.GetValue())
		}
	}
}

// A restore seals the backup's clear credentials with the node's key, and
// refuses a backup sealed with another key.
func TestRestoreSealsCredentials(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	cfg := baseConfig(t, "solo", testLogger(t))
	cfg.SecretsKey = key
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	base, err := tn.cluster().SaveSnapshot(adminCtx(t), &pb.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	snapWith := func(value string) []byte {
		var s pb.Snapshot
		if err := proto.Unmarshal(base.GetData(), &s); err != nil {
			t.Fatal(err)
		}
		s.Credentials = append(s.Credentials, &pb.StoredCredential{Name: "up", Value: value})
		b, err := proto.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := tn.cluster().RestoreSnapshot(adminCtx(t), &pb.RestoreSnapshotRequest{Data: snapWith(sealedTestSecret)}); err != nil {
		t.Fatalf("restore a clear backup: %v", err)
	}
	st := tn.n.Store().State()
	if v, err := st.OpenCredential(st.Credential("up")); !raftstore.IsSealed(st.Credential("up").GetValue()) || err != nil || v != sealedTestSecret {
		t.Errorf("restored credential %q opens to %q, %v", st.Credential("up").GetValue(), v, err)
	}
	other, err := raftstore.NewSealer(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := other.Seal("up", "sk-other")
	before := tn.n.Store().State().Index
	_, err = tn.cluster().RestoreSnapshot(adminCtx(t), &pb.RestoreSnapshotRequest{Data: snapWith(foreign)})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "secrets key") {
		t.Errorf("restore a backup sealed with another key: %v", err)
	}
	if tn.n.Store().State().Index != before {
		t.Error("the refused restore changed the state")
	}
}

// Rotating the secrets key: with the new key and the old one among the
// old keys, the leader reseals everything with the new key and the
// credential keeps working; then the old key can go.
func TestSecretsKeyRotation(t *testing.T) {
	up, lastAuth := authUpstream(t)
	oldKey, newKey := make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(oldKey)
	_, _ = rand.Read(newKey)
	cfg := baseConfig(t, "solo", testLogger(t))
	cfg.RaftAddr = localAddr(freePort(t, false))
	cfg.SecretsKey = oldKey
	tn, k := startWithCredential(t, cfg, up)
	secret := tn.n.Store().State().ClusterSecret()
	tn.stop(15 * time.Second)

	cfg.SecretsKey, cfg.SecretsOldKeys = newKey, [][]byte{oldKey}
	tn = startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	newSealer, err := raftstore.NewSealer(newKey)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "everything resealed with the new key", func() error {
		st := tn.n.Store().State()
		if v := st.Credential("up").GetValue(); !newSealer.Current(v) {
			return fmt.Errorf("credential %q", v)
		}
		if v := st.StoredClusterSecret(); !newSealer.Current(v) {
			return fmt.Errorf("cluster secret %q", v)
		}
		return nil
	})
	if got := tn.n.Store().State().ClusterSecret(); got != secret {
		t.Errorf("cluster secret %q after rotation, was %q", got, secret)
	}
	tn.stop(15 * time.Second)

	cfg.SecretsOldKeys = nil
	tn = startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	if code, body := chatThrough(t, tn, k.GetSecret(), "m1"); code != 200 || lastAuth() != "Bearer "+sealedTestSecret {
		t.Fatalf("with the new key alone: %d %s; upstream saw %q", code, body, lastAuth())
	}
}
