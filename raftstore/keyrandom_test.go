package raftstore

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// randomKeyCommand returns a key command on a few ids and teams, so that
// most of them hit an existing key (and some fail). Secrets are new on
// every call.
func randomKeyCommand(rng *rand.Rand, n int) *pb.Command {
	id := fmt.Sprint("k", rng.IntN(12))
	secret := fmt.Sprint("s", n)
	teams := []string{"", "t1", "t2"}
	switch rng.IntN(9) {
	case 0, 1:
		c := createKeyCmd(id, secret, "gpt-4o", "claude-*")
		c.GetCreateKey().Key.Key.TeamId = teams[rng.IntN(3)]
		if rng.IntN(2) == 0 {
			c.GetCreateKey().Key.Key.Limits = &pb.RateLimits{Rpm: int64(rng.IntN(3))}
		}
		return c
	case 2:
		return updateKeyCmd(&pb.UpdateKeyRequest{Id: id, TeamId: &teams[rng.IntN(3)]})
	case 3:
		u := &pb.UpdateKeyRequest{Id: id, ClearBudget: rng.IntN(2) == 0, ClearExpiresAt: rng.IntN(2) == 0}
		if !u.ClearBudget {
			u.Budget = &pb.Budget{LimitNanos: int64(rng.IntN(5)), Period: PeriodMonth}
		}
		if !u.ClearExpiresAt {
			u.ExpiresAt = ts(baseNanos + int64(rng.IntN(100))*1e9)
		}
		return updateKeyCmd(u)
	case 4:
		models := [][]string{nil, {"*"}, {"a", "b*"}}[rng.IntN(3)]
		return updateKeyCmd(&pb.UpdateKeyRequest{Id: id, Models: &pb.StringList{Values: models},
			Limits: &pb.RateLimits{Tpm: int64(rng.IntN(2))}, Metadata: map[string]string{"m": secret}})
	case 5:
		return rotateKeyCmd(id, secret)
	case 6:
		return revokeKeyCmd(id)
	case 7:
		return &pb.Command{Op: &pb.Command_SetMcpTools{SetMcpTools: &pb.SetMcpToolsCommand{KeyId: id,
			Tools: [][]string{nil, {"gh__*"}}[rng.IntN(2)]}}}
	}
	return importCmd(newStoredKey(id, secret), newStoredKey(fmt.Sprint("k", rng.IntN(12)), secret+"b"))
}

// A random sequence of key commands (creates, partial updates, team
// moves, rotations, revocations, MCP tool lists, imports; some failing)
// keeps every index and the admin read of each key in step after each
// command, leaves every earlier State as it was, and survives a snapshot
// round trip; a rotated-away secret finds no key.
func TestRandomKeyCommandsKeepIndexesAndOldStates(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	h := newHarness(t)
	h.must(&pb.Command{Op: &pb.Command_CreateTeam{CreateTeam: &pb.CreateTeamCommand{Team: &pb.Team{Id: "t1", Name: "t1"}}}},
		&pb.Command{Op: &pb.Command_CreateTeam{CreateTeam: &pb.CreateTeamCommand{Team: &pb.Team{Id: "t2", Name: "t2"}}}})
	var held []frozen
	ok := 0
	for n := range 400 {
		c := randomKeyCommand(rng, n)
		before := h.state()
		_, err := h.apply(c)
		if err == nil {
			ok++
		}
		if err == nil && c.GetRotateKey() != nil {
			if old := before.KeyByID(c.GetRotateKey().GetId()); h.state().KeyByHash([32]byte([]byte(old.hash))) != nil {
				t.Fatalf("step %d: the rotated-away secret still finds a key", n)
			}
		}
		checkKeyIndexes(t, h.state())
		if t.Failed() {
			t.Fatalf("after step %d (%v)", n, c)
		}
		if n%40 == 0 {
			held = append(held, freeze(h.state()))
		}
	}
	if ok < 200 || h.state().KeyCount() < 8 {
		t.Fatalf("only %d commands applied, %d keys", ok, h.state().KeyCount())
	}
	for _, fr := range held {
		fr.checkUnchanged(t)
	}
	f := newFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(persist(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	checkKeyIndexes(t, f.state.Load())
	if !bytes.Equal(contentBytes(t, h.state()), contentBytes(t, f.state.Load())) {
		t.Fatal("the restored state differs")
	}
}
