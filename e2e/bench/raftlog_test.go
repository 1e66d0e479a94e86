package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// On a WAL data dir the Raft log is measured as the bytes of the entries
// appended after an index, read while the WAL is open: not the 64 MB the
// segment files are preallocated to, and 0 on an idle log.
func TestRaftLogMBCountsWALEntryBytesNotPreallocation(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := wal.Open(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := uint64(1); i <= 20; i++ {
		l := &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{'x'}, 10_000)}
		if err := w.StoreLogs([]*raft.Log{l}); err != nil {
			t.Fatal(err)
		}
	}
	all, measure, err := raftLogMB(dir, 0)
	if err != nil || measure != raftLogWAL {
		t.Fatalf("raftLogMB = %v, %q, %v", all, measure, err)
	}
	if min, max := 20*10_000.0/(1<<20), 20*10_100.0/(1<<20); all < min || all > max {
		t.Fatalf("20 entries of 10 KB measure %.3f MB, want %.3f-%.3f", all, min, max)
	}
	if half, _, _ := raftLogMB(dir, 10); half < all*0.45 || half > all*0.55 {
		t.Fatalf("the 10 entries after index 10 measure %.3f MB of %.3f", half, all)
	}
	if none, _, _ := raftLogMB(dir, 20); none != 0 {
		t.Fatalf("no entry after index 20 but %.3f MB", none)
	}
}

// A data dir of an earlier release is measured by its raft.db's size.
func TestRaftLogMBIsRaftDBSizeOnBolt(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "raft.db"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if mb, measure, err := raftLogMB(dir, 0); err != nil || mb != 1 || measure != raftLogBolt {
		t.Fatalf("raftLogMB = %v, %q, %v; want 1 MB of %q", mb, measure, err, raftLogBolt)
	}
}
