package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClusterTLS runs three real nodes with the certificates `tollgate tls`
// makes, an encrypted gossip key and a secrets key: the cluster forms over
// mutual-TLS Raft, tollctl reaches it only with the cluster CA, a write
// through a follower is forwarded over TLS, a credential reaches no node's
// Raft log in the clear, and after the leader is killed (-9) the other two
// elect a new one and take writes.
func TestClusterTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("three nodes")
	}
	dir := t.TempDir()
	tlsCmd := func(args ...string) {
		t.Helper()
		out, err := exec.Command(bin.tollgate, append([]string{"tls"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tollgate tls %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	tlsCmd("ca", "--dir", dir)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	gossipKey := base64.StdEncoding.EncodeToString(key)
	_, _ = rand.Read(key)
	secretsKey := base64.StdEncoding.EncodeToString(key)

	const token = "tls-token"
	nodes := make([]*gateway, 3)
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		tlsCmd("cert", "--name", id, "--dir", dir)
		nodes[i] = newGateway(t, id, t.TempDir(), token)
		nodes[i].ctlEnv = []string{"TOLLGATE_TLS_CA=" + filepath.Join(dir, "ca.pem")}
	}
	join := strings.Join([]string{nodes[0].gossip, nodes[1].gossip, nodes[2].gossip}, ",")
	for _, g := range nodes {
		g.args = []string{"--bootstrap-expect", "3", "--join", join, "--drain-delay", "0s",
			"--tls-cert", filepath.Join(dir, g.id+".pem"), "--tls-key", filepath.Join(dir, g.id+"-key.pem"),
			"--tls-ca", filepath.Join(dir, "ca.pem"), "--gossip-key", gossipKey, "--secrets-key", secretsKey}
		g.launch(t)
	}
	for _, g := range nodes {
		waitHTTP(t, "http://"+g.http+"/readyz", 200)
	}
	var st clusterStatus
	waitFor(t, 10*time.Second, "one leader and three healthy voters", func() bool {
		s, ok := nodes[0].status()
		st = s
		return ok && s.Leader != "" && strings.Join(s.voters(), ",") == "n1,n2,n3"
	})
	var leader *gateway
	var followers []*gateway
	for _, g := range nodes {
		if g.id == st.Leader {
			leader = g
		} else {
			followers = append(followers, g)
		}
	}

	// Without the CA, tollctl is told why it cannot connect.
	out, errOut, code := followers[0].ctlCode("key", "list", "--tls-ca", "", "--timeout", "5s")
	if code != 1 || !strings.Contains(errOut, "serves TLS") {
		t.Errorf("tollctl without the CA: exit %d\n%s%s", code, out, errOut)
	}

	_, secret := followers[0].createKey(t, "--name", "tls", "--models", "demo")
	body := `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`
	for _, g := range nodes {
		if code, b := post(t, "http://"+g.http+"/v1/chat/completions", secret, body); code != 200 {
			t.Fatalf("key created through %s, used on %s: %d %s", followers[0].id, g.id, code, b)
		}
	}

	// Every node reports its spend to the leader over TLS, authenticated
	// with the sealed cluster secret, and answers spend logs.
	waitFor(t, 15*time.Second, "the three requests in the replicated spend report", func() bool {
		return leader.spendTotal(t).Requests >= 3
	})
	if recs := leader.spendLogs(t); len(recs) < 3 {
		t.Errorf("spend logs from the nodes: %d records, want 3", len(recs))
	}

	const credValue = "sk-e2e-sealed-credential-value"
	followers[1].ctl(t, "credential", "set", "up", "--value", credValue)
	for _, g := range nodes {
		var db []byte
		waitFor(t, 10*time.Second, g.id+" to store the sealed credential", func() bool {
			var err error
			db, err = readRaftLog(filepath.Join(g.dir, "raft"))
			return err == nil && bytes.Contains(db, []byte("tgsealed:v1:"))
		})
		if bytes.Contains(db, []byte(credValue)) {
			t.Errorf("%s: the Raft log holds the credential in the clear", g.id)
		}
	}

	leader.kill()
	waitFor(t, 20*time.Second, "a new leader among the survivors", func() bool {
		s, ok := followers[0].status()
		return ok && s.Leader != "" && s.Leader != leader.id
	})
	_, secret = followers[1].createKey(t, "--name", "after-kill", "--models", "demo")
	for _, g := range followers {
		if code, b := post(t, "http://"+g.http+"/v1/chat/completions", secret, body); code != 200 {
			t.Fatalf("key created after the leader died, used on %s: %d %s", g.id, code, b)
		}
	}
}

// readRaftLog returns the bytes of a data dir's Raft log: its WAL
// segments, or raft.db in a data dir of an earlier release.
func readRaftLog(dir string) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	if err != nil {
		return nil, err
	}
	var all []byte
	for _, f := range append(files, filepath.Join(dir, "raft.db")) {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		all = append(all, b...)
	}
	return all, nil
}
