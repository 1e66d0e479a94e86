package raftstore

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// TestReplaysLogOfPreviousRelease applies the log entries the previous
// release wrote (testdata/v0-datadir's raft.db) to a new, empty state
// machine, as a follower without the snapshot would: every entry applies,
// and the state is the one that release had (testdata/v0-manifest.json).
func TestReplaysLogOfPreviousRelease(t *testing.T) {
	want := readManifest(t)
	dir := copyDir(t, "testdata/v0-datadir")
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft", "raft.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	first, _ := bolt.FirstIndex()
	last, _ := bolt.LastIndex()
	if first != 1 {
		t.Fatalf("the fixture's log starts at %d: it cannot be replayed from an empty state", first)
	}
	var logs []*raft.Log
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := bolt.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &l)
	}
	f := newFSM()
	f.onFatal = func(err error) { t.Fatalf("an entry of the previous release stopped the state machine: %v", err) }
	commands := 0
	for i, o := range f.ApplyBatch(logs) {
		if logs[i].Type != raft.LogCommand {
			continue
		}
		commands++
		if r := o.(*applyResult); r.err != nil {
			t.Logf("entry %d: %v", logs[i].Index, r.err)
		}
	}
	st := f.state.Load()
	got := manifestOf(st, periodsOfSnapshot(st))
	for n := range want.NodeSeqs {
		got.NodeSeqs[n] = st.NodeSeq(n)
	}
	t.Logf("%d entries, %d commands", len(logs), commands)
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"keys", got.Keys, want.Keys}, {"teams", got.Teams, want.Teams}, {"routes", got.Routes, want.Routes},
		{"credentials", got.Credentials, want.Credentials}, {"budget periods", got.Periods, want.Periods},
		{"node seqs", got.NodeSeqs, want.NodeSeqs}, {"rollups", got.Rollups, want.Rollups},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.what, c.got, c.want)
		}
	}
}
