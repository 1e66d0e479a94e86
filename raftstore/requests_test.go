package raftstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func withID(cmd *pb.Command, id string) *pb.Command {
	cmd.RequestId = id
	return cmd
}

// TestRequestIDAppliesOnce retries a key create and a failing team create
// with the same request ids (as a client does after an election): the
// retries return the first results and change nothing, also after a
// snapshot and restore; an id older than the maximum age applies again.
func TestRequestIDAppliesOnce(t *testing.T) {
	h := newHarness(t)
	first := h.must(withID(createKeyCmd("k1", "s1"), "req-1")).(*pb.StoredKey)
	_, teamErr := h.apply(withID(teamCmd("", nil), "req-2"))
	if !errors.Is(teamErr, ErrInvalid) {
		t.Fatalf("team create: %v", teamErr)
	}
	check := func(h *harness) {
		t.Helper()
		// A retry proposes the same command again (at another time): it
		// gets the first result and creates nothing.
		v, err := h.apply(withID(createKeyCmd("k1", "s1"), "req-1"))
		if err != nil || !proto.Equal(v, first) {
			t.Fatalf("retry = %v, %v; want the first result", v, err)
		}
		// Another write under the same id is refused, not answered with
		// the first write's result.
		if _, err := h.apply(withID(createKeyCmd("k1-other", "s1-other"), "req-1")); !errors.Is(err, ErrAlreadyExists) {
			t.Fatalf("another command under a used request id: err = %v, want ErrAlreadyExists", err)
		}
		if h.state().Key("k1-other") != nil || h.state().KeyCount() != 1 {
			t.Fatal("a retry or a reused id created a second key")
		}
		_, err = h.apply(withID(teamCmd("", nil), "req-2"))
		if !errors.Is(err, ErrInvalid) || err.Error() != teamErr.Error() {
			t.Fatalf("retried error = %v, want %v", err, teamErr)
		}
	}
	check(h)

	// Through a snapshot: a new FSM restored from it remembers the ids.
	data := persist(t, h.f)
	h2 := newHarness(t)
	if err := h2.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	h2.idx, h2.now = h.idx, h.now
	check(h2)

	// Past the maximum age the id is forgotten and the command applies.
	h.now += appliedRequestMaxAge + 1e9
	if _, err := h.apply(withID(createKeyCmd("k2", "s2"), "req-1")); err != nil || h.state().Key("k2") == nil {
		t.Fatalf("an expired id did not apply: %v", err)
	}
}

// TestRequestIDsBoundedByCount applies more requests than are remembered:
// the oldest are forgotten, the newest still deduplicate.
func TestRequestIDsBoundedByCount(t *testing.T) {
	old := maxAppliedRequests
	maxAppliedRequests = 5
	t.Cleanup(func() { maxAppliedRequests = old })
	h := newHarness(t)
	for i := range 12 {
		h.must(withID(addAdminTokenCmd(hashOf(string(rune('a'+i)))), string(rune('a'+i))))
	}
	st := h.state()
	if st.requests.Len() != 5 || st.requestsByAge.Len() != 5 {
		t.Fatalf("%d / %d requests remembered, want 5", st.requests.Len(), st.requestsByAge.Len())
	}
	if _, ok := st.appliedRequest("a", h.now, nil); ok {
		t.Error("the oldest id is still remembered")
	}
	if _, ok := st.appliedRequest("l", h.now, nil); !ok {
		t.Error("the newest id is forgotten")
	}
	if got := len(st.Snapshot().GetAppliedRequests()); got != 5 {
		t.Errorf("snapshot holds %d requests", got)
	}
}

// TestCommandFingerprintIgnoresTimeAndIDAndLeavesCommand pins the
// fingerprint to the bytes of a copy without time and request id (what
// snapshots and other releases remember), and checks that computing it
// leaves the command as it was.
func TestCommandFingerprintIgnoresTimeAndIDAndLeavesCommand(t *testing.T) {
	cmd := withID(createKeyCmd("k1", "s1"), "req-1")
	cmd.UnixNanos = 1234
	cmd.GetCreateKey().GetKey().GetKey().Metadata = map[string]string{"b": "2", "a": "1", "c": "3"}
	want := func() []byte {
		c := proto.Clone(cmd).(*pb.Command)
		c.UnixNanos, c.RequestId = 0, ""
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		return h[:]
	}()
	before := proto.Clone(cmd)
	if got := commandFingerprint(cmd); !bytes.Equal(got, want) {
		t.Fatalf("fingerprint %x, want %x", got, want)
	}
	if !proto.Equal(cmd, before) {
		t.Fatalf("command changed by its fingerprint: %v, was %v", cmd, before)
	}
	other := withID(createKeyCmd("k1", "s1"), "req-2")
	other.UnixNanos = 99
	other.GetCreateKey().GetKey().GetKey().Metadata = map[string]string{"c": "3", "a": "1", "b": "2"}
	if !bytes.Equal(commandFingerprint(other), want) {
		t.Fatal("the same write at another time under another id has another fingerprint")
	}
}
