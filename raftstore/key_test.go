package raftstore

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func mustKey(t testing.TB, sk *pb.StoredKey) *Key {
	t.Helper()
	k, err := newKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keyRef is what a Key must hold, derived from the decoded message the
// way the views were built before keys were kept encoded.
type keyRef struct {
	ID, Name, TeamID      string
	ExpiresAt, Created    int64
	Revoked, AllowAll     bool
	Budget                *Limit
	Limits                *RateLimits
	Hash                  string
	Exact, Patterns, Mcps []string
}

func refOf(sk *pb.StoredKey) keyRef {
	k := sk.GetKey()
	r := keyRef{ID: k.GetId(), Name: k.GetName(), TeamID: k.GetTeamId(), Revoked: k.GetRevokedAt() != nil,
		Budget: limitOf(KeyBudgetID(k.GetId()), k.GetBudget()), Limits: rateLimitsOf("key:"+k.GetId(), k.GetLimits()),
		Hash: string(sk.GetSecretHash()), Created: k.GetCreatedAt().GetSeconds()*1e9 + int64(k.GetCreatedAt().GetNanos()),
		AllowAll: len(k.GetModels()) == 0 || slices.Contains(k.GetModels(), "*"), Mcps: k.GetMcpTools()}
	if e := k.GetExpiresAt(); e != nil {
		r.ExpiresAt = e.AsTime().UnixNano()
	}
	for _, m := range k.GetModels() {
		if strings.Contains(m, "*") {
			r.Patterns = append(r.Patterns, m)
		} else {
			r.Exact = append(r.Exact, m)
		}
	}
	return r
}

func refOfKey(k *Key) keyRef {
	nil0 := func(s []string) []string {
		if len(s) == 0 {
			return nil
		}
		return s
	}
	return keyRef{ID: k.ID, Name: k.Name, TeamID: k.TeamID, ExpiresAt: k.ExpiresAt, Created: k.created,
		Revoked: k.Revoked, AllowAll: k.allowAll, Budget: k.Budget, Limits: k.Limits, Hash: k.hash,
		Exact: nil0(k.lists[:k.nExact]), Patterns: nil0(k.lists[k.nExact:k.nModels]), Mcps: nil0(k.mcpTools())}
}

// checkKeyMatches fails unless k holds what sk says and decodes to sk.
func checkKeyMatches(t testing.TB, k *Key, sk *pb.StoredKey) {
	t.Helper()
	if got, want := refOfKey(k), refOf(sk); !reflect.DeepEqual(got, want) {
		t.Fatalf("key view\n got %+v\nwant %+v", got, want)
	}
	if got := k.Stored(); !proto.Equal(got, sk) {
		t.Fatalf("decoded key %v, want %v", got, sk)
	}
}

func randomString(rng *rand.Rand) string {
	const alphabet = "ab*-o1é"
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteString(string([]rune(alphabet)[rng.IntN(len([]rune(alphabet)))]))
	}
	return b.String()
}

func randomTS(rng *rand.Rand) *timestamppb.Timestamp {
	if rng.IntN(3) == 0 {
		return nil
	}
	return &timestamppb.Timestamp{Seconds: rng.Int64N(4e9) - 1e9, Nanos: int32(rng.IntN(1e9))}
}

// randomStoredKey returns a key with every field set or not at random.
func randomStoredKey(rng *rand.Rand) *pb.StoredKey {
	k := &pb.Key{Id: randomString(rng), Name: randomString(rng), SecretPrefix: randomString(rng),
		CreatedAt: randomTS(rng), UpdatedAt: randomTS(rng), ExpiresAt: randomTS(rng), RevokedAt: randomTS(rng),
		TeamId: randomString(rng)}
	for range rng.IntN(4) {
		k.Models = append(k.Models, randomString(rng))
	}
	for range rng.IntN(3) {
		k.McpTools = append(k.McpTools, randomString(rng))
	}
	if rng.IntN(2) == 0 {
		k.Metadata = map[string]string{randomString(rng): randomString(rng), randomString(rng): randomString(rng)}
	}
	if rng.IntN(2) == 0 {
		k.Budget = &pb.Budget{LimitNanos: rng.Int64N(1e12) - 10, Period: randomString(rng), AllowUnpriced: rng.IntN(2) == 0}
	}
	if rng.IntN(2) == 0 {
		k.Limits = &pb.RateLimits{Rpm: rng.Int64N(3), Tpm: rng.Int64N(3), MaxParallel: rng.Int64N(3)}
	}
	h := make([]byte, 32)
	for i := range h {
		h[i] = byte(rng.IntN(256))
	}
	return &pb.StoredKey{Key: k, SecretHash: h}
}

// The Key scanned from an encoding holds what the decoded message says,
// for random keys and for two encodings one after the other (which decode
// as the second merged into the first).
func TestKeyFromEncodingMatchesTheDecodedMessage(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		enc, err := proto.Marshal(randomStoredKey(rng))
		if err != nil {
			t.Fatal(err)
		}
		if rng.IntN(3) == 0 {
			more, _ := proto.Marshal(randomStoredKey(rng))
			enc = append(enc, more...)
		}
		var sk pb.StoredKey
		if err := proto.Unmarshal(enc, &sk); err != nil {
			t.Fatal(err)
		}
		k, err := keyFromEncoding(enc)
		if err != nil {
			t.Fatal(err)
		}
		checkKeyMatches(t, k, &sk)
	}
}

// Encodings that are not a StoredKey, or whose key has no 32-byte hash,
// are refused.
func TestKeyFromEncodingRefusesBadInput(t *testing.T) {
	good, _ := proto.Marshal(&pb.StoredKey{Key: &pb.Key{Id: "k"}, SecretHash: hashOf("s")})
	badUTF8 := protowire.AppendTag(nil, 1, protowire.BytesType)
	badUTF8 = protowire.AppendBytes(badUTF8, protowire.AppendString(protowire.AppendTag(nil, 9, protowire.BytesType),
		string(protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff"))))
	for name, enc := range map[string][]byte{
		"truncated":           good[:len(good)-3],
		"no hash":             good[:len(good)-34],
		"short hash":          append(slices.Clone(good), 0x12, 1, 0),
		"bad UTF-8 in a map":  append(badUTF8, good...),
		"field number zero":   append([]byte{0x02, 0x00}, good...),
		"stray end of group":  append([]byte{0x0c}, good...),
		"overlong varint tag": append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, good...),
	} {
		if _, err := keyFromEncoding(enc); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if k, err := keyFromEncoding(slices.Clone(good)); err != nil || k.ID != "k" {
		t.Fatalf("good key: %v", err)
	}
}

// FuzzScanStoredKey checks the field scanner against proto.Unmarshal:
// where Unmarshal accepts an encoding, the scanner accepts it too (unless
// its hash is not 32 bytes) and its Key matches the decoded message; where
// Unmarshal refuses it, so does the scanner.
func FuzzScanStoredKey(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 40 {
		enc, _ := proto.Marshal(randomStoredKey(rng))
		f.Add(enc)
	}
	good, _ := proto.Marshal(&pb.StoredKey{Key: &pb.Key{Id: "k", Models: []string{"a*"}}, SecretHash: hashOf("s")})
	f.Add(append(slices.Clone(good), good...))
	f.Add(append([]byte{0x0a, 0x02, 0x38, 0x01}, good...)) // expires_at as a varint: an unknown field
	f.Add(good[:len(good)-1])
	f.Fuzz(func(t *testing.T, enc []byte) {
		var sk pb.StoredKey
		uerr := proto.Unmarshal(enc, &sk)
		k, kerr := keyFromEncoding(bytes.Clone(enc))
		switch {
		case uerr != nil && kerr == nil:
			t.Fatalf("scanner accepts what Unmarshal refuses (%v)", uerr)
		case uerr != nil:
		case len(sk.GetSecretHash()) != 32:
			if kerr == nil {
				t.Fatal("scanner accepts a hash that is not 32 bytes")
			}
		case kerr != nil:
			t.Fatalf("scanner refuses what Unmarshal accepts: %v", kerr)
		default:
			checkKeyMatches(t, k, &sk)
		}
	})
}

// checkKeyIndexes fails unless every index of st holds the same keys,
// each matching its own decoding.
func checkKeyIndexes(t *testing.T, st *State) {
	t.Helper()
	n, teamed := 0, 0
	st.keys.ascend(func(k *Key) bool {
		n++
		sk := st.Key(k.ID)
		checkKeyMatches(t, k, sk)
		if st.KeyByHash([32]byte(sk.GetSecretHash())) != k {
			t.Fatalf("key %q is not found by its hash", k.ID)
		}
		if c, ok := st.keysByCreated.get(k); !ok || c != k {
			t.Fatalf("key %q is not in the creation index", k.ID)
		}
		if k.TeamID != "" {
			teamed++
			if !slices.Contains(st.KeysOfTeam(k.TeamID), k.ID) {
				t.Fatalf("key %q is not listed in team %q", k.ID, k.TeamID)
			}
		}
		return true
	})
	if st.keysByHash.Len() != n || st.keysByCreated.Len() != n || st.keysByTeam.Len() != teamed {
		t.Fatalf("%d keys, %d by hash, %d by time, %d by team (want %d)", n, st.keysByHash.Len(),
			st.keysByCreated.Len(), st.keysByTeam.Len(), teamed)
	}
}

// Every key command keeps the data plane's view, the indexes and the
// admin read of each key in step, and a snapshot round trip keeps them.
func TestKeyCommandsKeepViewsAndAdminReadsConsistent(t *testing.T) {
	h := newHarness(t)
	team := func(id string) *pb.Command {
		return &pb.Command{Op: &pb.Command_CreateTeam{CreateTeam: &pb.CreateTeamCommand{Team: &pb.Team{Id: id, Name: id}}}}
	}
	budget := &pb.Budget{LimitNanos: 5e9, Period: PeriodMonth}
	withTeam := createKeyCmd("k3", "s3", "o1")
	withTeam.GetCreateKey().Key.Key.TeamId = "t1"
	withTeam.GetCreateKey().Key.Key.Limits = &pb.RateLimits{Rpm: 10}
	imported := newStoredKey("k4", "s4")
	imported.Key.Budget, imported.Key.TeamId = budget, "t2"
	steps := []*pb.Command{
		team("t1"), team("t2"),
		createKeyCmd("k1", "s1", "gpt-4o", "claude-*"), createKeyCmd("k2", "s2"), withTeam,
		updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", Name: new("renamed"), Budget: budget, Metadata: map[string]string{"env": "prod"}}),
		updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", TeamId: new("t1"), Limits: &pb.RateLimits{Tpm: 100, MaxParallel: 2}}),
		updateKeyCmd(&pb.UpdateKeyRequest{Id: "k3", TeamId: new("t2"), Models: &pb.StringList{Values: []string{"*"}}}),
		updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", TeamId: new(""), ClearBudget: true, Limits: &pb.RateLimits{}}),
		updateKeyCmd(&pb.UpdateKeyRequest{Id: "k2", ExpiresAt: ts(baseNanos + 5e9)}),
		rotateKeyCmd("k1", "s1-new"), revokeKeyCmd("k2"), importCmd(imported, newStoredKey("k5", "s5")),
		{Op: &pb.Command_SetMcpTools{SetMcpTools: &pb.SetMcpToolsCommand{KeyId: "k5", Tools: []string{"gh__*"}}}},
	}
	for i, c := range steps {
		h.must(c)
		checkKeyIndexes(t, h.state())
		if t.Failed() {
			t.Fatalf("after step %d", i)
		}
	}
	if h.state().KeyByHash(HashSecret("s1")) != nil || h.state().KeyByHash(HashSecret("s1-new")).ID != "k1" {
		t.Fatal("rotation did not move the hash index")
	}
	if got := h.state().KeysOfTeam("t2"); !slices.Equal(got, []string{"k3", "k4"}) {
		t.Fatalf("team t2 keys %v", got)
	}
	f := newFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(persist(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	checkKeyIndexes(t, f.state.Load())
	if want, got := h.state().Keys(), f.state.Load().Keys(); !slices.EqualFunc(want, got, func(a, b *pb.StoredKey) bool { return proto.Equal(a, b) }) {
		t.Fatal("keys differ after a snapshot round trip")
	}
}

// A key part record is what proto.Marshal writes for a Snapshot of those
// keys, so a release that decodes parts with proto.Unmarshal reads it.
func TestKeyPartsAreTheMarshaledSnapshot(t *testing.T) {
	st := bigState(2*snapshotChunk + 5)
	var buf bytes.Buffer
	if err := writeKeyParts(&buf, st); err != nil {
		t.Fatal(err)
	}
	all := st.Keys()
	var got []*pb.StoredKey
	r := bufio.NewReader(&buf)
	for len(got) < len(all) {
		kind, data, err := readRecord(r)
		if err != nil || kind != recordPart {
			t.Fatalf("record %q: %v", kind, err)
		}
		want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&pb.Snapshot{Keys: all[len(got):min(len(all), len(got)+snapshotChunk)]})
		if !bytes.Equal(data, want) {
			t.Fatalf("part %d is not the marshaled snapshot of its keys", len(got)/snapshotChunk)
		}
		var part pb.Snapshot
		if err := proto.Unmarshal(data, &part); err != nil {
			t.Fatal(err)
		}
		got = append(got, part.GetKeys()...)
	}
	if len(got) != len(all) || buf.Len()+r.Buffered() != 0 {
		t.Fatalf("%d keys read back, want %d", len(got), len(all))
	}
}

func TestKeyStoredIsACopy(t *testing.T) {
	k := mustKey(t, &pb.StoredKey{Key: &pb.Key{Id: "k", Name: "n"}, SecretHash: hashOf("s")})
	sk := k.Stored()
	sk.Key.Name = "changed"
	if k.Name != "n" || k.Stored().GetKey().GetName() != "n" {
		t.Fatal("editing a decoded key changed the stored one")
	}
	if fmt.Sprint(k.Budget, k.Limits) != "<nil> <nil>" {
		t.Fatal("a key without limits has some")
	}
}

// protowire.ConsumeTag accepts field numbers up to 2^31-1 but
// proto.Unmarshal refuses those above 2^29-1: the scanner refuses them too,
// at any depth, so that a key it accepts always decodes (and an older
// member, which decodes it, can restore a snapshot that holds it).
func TestKeyFromEncodingRefusesFieldNumbersAboveTheMaximum(t *testing.T) {
	good, _ := proto.Marshal(&pb.StoredKey{Key: &pb.Key{Id: "k"}, SecretHash: hashOf("s")})
	big := protowire.AppendString(protowire.AppendTag(nil, protowire.MaxValidNumber+1, protowire.BytesType), "x")
	nested := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), big)
	for name, enc := range map[string][]byte{
		"in the stored key": append(slices.Clone(big), good...),
		"in the key":        append(nested, good...),
	} {
		if err := proto.Unmarshal(enc, &pb.StoredKey{}); err == nil {
			t.Fatalf("%s: proto.Unmarshal accepts it", name)
		}
		if _, err := keyFromEncoding(enc); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
