package node

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/ratelimit"
)

// A damaged ratelimit.state does not stop the node: it starts from zero
// and soon writes a good file over it. A good one is counted at start.
func TestRateStateFile(t *testing.T) {
	cfg := baseConfig(t, "solo", testLogger(t))
	path := filepath.Join(cfg.DataDir, rateStateFile)
	if err := os.WriteFile(path, []byte("not saved usage"), 0o600); err != nil {
		t.Fatal(err)
	}
	tn := startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	eventually(t, 5*time.Second, "a good ratelimit.state", func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		_, err = ratelimit.New(ratelimit.Config{NodeID: "x"}).Restore(b)
		return err
	})
	check := ratelimit.Check{Bucket: "key:k", Limits: ratelimit.Limits{RPM: 5}}
	if _, r := tn.n.limiter.Admit([]ratelimit.Check{check}, 0); r != nil {
		t.Fatal(r)
	}
	if !tn.stop(20 * time.Second) {
		t.FailNow()
	}

	// The saved request counts in the next run on the same data dir. That
	// run saves only at shutdown: what it admits is counted in the third.
	cfg.GossipAddr = localAddr(freePort(t, true))
	cfg.rateSaveInterval = time.Hour
	tn = startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	if st := tn.n.limiter.Status(check); st.RemainingRequests != 4 {
		t.Errorf("after a restart: %+v; want the request of the last run counted (4 left)", st)
	}
	if _, r := tn.n.limiter.Admit([]ratelimit.Check{check}, 0); r != nil {
		t.Fatal(r)
	}
	if !tn.stop(20 * time.Second) {
		t.FailNow()
	}
	cfg.GossipAddr = localAddr(freePort(t, true))
	tn = startNode(t, cfg)
	tn.waitReady(15 * time.Second)
	if st := tn.n.limiter.Status(check); st.RemainingRequests != 3 {
		t.Errorf("after the second restart: %+v; want both requests counted (3 left): the shutdown did not save", st)
	}
}
