package raftstore

import (
	"context"
	"testing"
	"time"
)

// TestReadyWithoutElection: a single-voter node that took a snapshot on
// shutdown serves its complete state at once on restart; one that stopped
// without (kill -9) waits for its election, which applies the log tail.
func TestReadyWithoutElection(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = time.Second, time.Second // a slow election shows
	s := openReady(t, cfg)
	populate(t, s, "a")
	s.SnapshotForRestart()
	closeStore(t, s)

	cfg.BindAddr = "127.0.0.1:0"
	s = openStore(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if s.IsLeader() {
		t.Log("already leader; the check below is still meaningful")
	}
	checkPopulated(t, s.State(), "a") // complete before any election
	if !s.completeAtOpen {
		t.Fatal("a snapshot on shutdown should make the state complete at open")
	}
	// Write more without a snapshot: the next start must wait for Raft.
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, s) // bounded: a lost election fails the test instead of hanging it
	populate(t, s, "b")
	closeStore(t, s)
	s = openStore(t, cfg)
	defer closeStore(t, s)
	if s.completeAtOpen {
		t.Fatal("commands after the snapshot: the state is not complete at open")
	}
	if err := s.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	checkPopulated(t, s.State(), "a")
	checkPopulated(t, s.State(), "b")
}
