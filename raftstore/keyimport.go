package raftstore

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// MaxImportBatch bounds the keys of one ImportKeysCommand, so that one log
// entry stays small enough to replicate and apply quickly.
const MaxImportBatch = 5000

// importKeys creates every key of c that does not exist yet, checking each
// as createKey does; when one fails, nothing of the batch is applied and the
// error names the key's position in the batch. A key whose id exists is
// skipped (the same import run again).
func importKeys(cur *State, c *pb.ImportKeysCommand, ts *timestamppb.Timestamp) (*State, proto.Message, error) {
	if n := len(c.GetKeys()); n == 0 || n > MaxImportBatch {
		return nil, nil, fmt.Errorf("import of %d keys: want 1 to %d per batch: %w", n, MaxImportBatch, ErrInvalid)
	}
	res := &pb.ImportKeysResult{Skipped: make([]bool, len(c.GetKeys()))}
	kw := cur.keyWriter() // one writer: the batch copies each tree path once
	added := false
	for i, sk := range c.GetKeys() {
		if cur.KeyByID(sk.GetKey().GetId()) != nil {
			res.Skipped[i] = true
			continue
		}
		if _, err := addNewKey(cur, kw, sk, ts); err != nil {
			return nil, nil, fmt.Errorf("key %d of the batch (%q): %w", i+1, sk.GetKey().GetName(), err)
		}
		added = true
	}
	if !added {
		return nil, res, nil
	}
	next := *cur
	kw.commit(&next)
	return &next, res, nil
}
