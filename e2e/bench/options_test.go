package main

import (
	"slices"
	"testing"
	"time"
)

// TestNodeArgsReachTheConfig: -node-args is split on spaces into the
// flags the node under test gets (and results.json records).
func TestNodeArgsReachTheConfig(t *testing.T) {
	o := &options{scenarios: "c", clients: "1", rates: "1000", reps: 1, dur: time.Second, openDur: time.Second,
		rateDur: time.Second, soakDur: time.Second, small: 1, maxReq: 1, maxWork: 1, refs: "none",
		nodeArgs: " --gc-percent 50  --http-tls "}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"--gc-percent", "50", "--http-tls"}; !slices.Equal(cfg.NodeArgs, want) {
		t.Fatalf("NodeArgs = %q, want %q", cfg.NodeArgs, want)
	}
	o.nodeArgs = ""
	if cfg, _ := o.config(); len(cfg.NodeArgs) != 0 {
		t.Fatalf("no -node-args: NodeArgs = %q, want none", cfg.NodeArgs)
	}
}
