package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func createUserCmd(name, role, team, token string) *pb.Command {
	return &pb.Command{Op: &pb.Command_CreateUser{CreateUser: &pb.CreateUserCommand{User: &pb.StoredUser{
		User: &pb.User{Name: name, Role: role, TeamId: team, TokenPrefix: token[:3]}, TokenHash: hashOf(token)}}}}
}

func revokeUserCmd(name string) *pb.Command {
	return &pb.Command{Op: &pb.Command_RevokeUser{RevokeUser: &pb.RevokeUserCommand{Name: name}}}
}

func rotateUserCmd(name, token string) *pb.Command {
	return &pb.Command{Op: &pb.Command_RotateUser{RotateUser: &pb.RotateUserCommand{Name: name, TokenHash: hashOf(token), TokenPrefix: token[:3]}}}
}

// actor marks cmd as an admin write by user.
func actor(cmd *pb.Command, user string) *pb.Command {
	cmd.Actor = &pb.Actor{User: user, Role: RoleAdmin, Address: "127.0.0.1:5000", Rpc: "/test/" + CommandName(cmd)}
	return cmd
}

func TestUserTokenResolvesUntilRevokedOrRotated(t *testing.T) {
	h := newHarness(t)
	h.must(createUserCmd("alice", RoleOperator, "", "tok-alice-1"))
	st := h.state()
	if u := st.UserByToken(HashSecret("tok-alice-1")); u == nil || u.GetUser().GetName() != "alice" || u.GetUser().GetRole() != RoleOperator {
		t.Fatalf("UserByToken = %v, want alice the operator", u)
	}
	h.must(rotateUserCmd("alice", "tok-alice-2"))
	st = h.state()
	if st.UserByToken(HashSecret("tok-alice-1")) != nil {
		t.Error("the token before the rotation still resolves")
	}
	if u := st.UserByToken(HashSecret("tok-alice-2")); u == nil {
		t.Error("the rotated token does not resolve")
	}
	h.must(revokeUserCmd("alice"))
	st = h.state()
	if st.UserByToken(HashSecret("tok-alice-2")) != nil {
		t.Error("a revoked user's token still resolves")
	}
	if u := st.User("alice"); u == nil || u.GetUser().GetRevokedAt() == nil {
		t.Errorf("User(alice) = %v, want listed as revoked", u)
	}
	if _, err := h.apply(rotateUserCmd("alice", "tok-alice-3")); !errors.Is(err, ErrFailedPrecondition) {
		t.Errorf("rotate a revoked user: err = %v, want ErrFailedPrecondition", err)
	}
}

func TestCreateUserRefusals(t *testing.T) {
	h := newHarness(t)
	h.must(teamCmd("team_a", nil), createUserCmd("bob", RoleViewer, "", "tok-bob"),
		addAdminTokenCmd(hashOf("admin-token")))
	for _, tc := range []struct {
		name string
		cmd  *pb.Command
		want error
	}{
		{"taken name", createUserCmd("bob", RoleViewer, "", "tok-other"), ErrAlreadyExists},
		{"reserved name", createUserCmd(BootstrapUser, RoleAdmin, "", "tok-x"), ErrInvalid},
		{"bad name", createUserCmd("a b", RoleViewer, "", "tok-y"), ErrInvalid},
		{"unknown role", createUserCmd("carol", "root", "", "tok-z"), ErrInvalid},
		{"team-admin without team", createUserCmd("carol", RoleTeamAdmin, "", "tok-z"), ErrInvalid},
		{"team-admin of a missing team", createUserCmd("carol", RoleTeamAdmin, "team_x", "tok-z"), ErrFailedPrecondition},
		{"team on a viewer", createUserCmd("carol", RoleViewer, "team_a", "tok-z"), ErrInvalid},
		{"token of another user", createUserCmd("carol", RoleViewer, "", "tok-bob"), ErrAlreadyExists},
		{"token of an admin token", createUserCmd("carol", RoleViewer, "", "admin-token"), ErrAlreadyExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.state()
			if _, err := h.apply(tc.cmd); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if len(h.state().Users()) != len(before.Users()) {
				t.Error("a refused create changed the users")
			}
		})
	}
	if _, err := h.apply(createUserCmd("carol", RoleTeamAdmin, "team_a", "tok-carol")); err != nil {
		t.Fatalf("team-admin of an existing team: %v", err)
	}
}

func TestAuditRecordsEveryActorCommandWithoutSecrets(t *testing.T) {
	h := newHarness(t)
	h.must(createKeyCmd("nodes-own", "own-secret")) // no actor: not audited
	cmds := []*pb.Command{
		actor(createKeyCmd("k1", "key-secret-1"), "alice"),
		actor(setCredentialCmd("openai", "sk-credential-value"), "alice"),
		actor(rotateKeyCmd("k1", "key-secret-2"), "bob"),
		actor(createUserCmd("carol", RoleViewer, "", "user-token-1"), BootstrapUser),
		actor(revokeKeyCmd("missing"), "bob"), // fails: recorded with its error
	}
	for _, c := range cmds {
		_, _ = h.apply(c)
	}
	recs := h.state().AuditRecords(AuditFilter{Limit: 100})
	if len(recs) != len(cmds) {
		t.Fatalf("%d records, want %d: %v", len(recs), len(cmds), recs)
	}
	for i, r := range recs { // newest first
		c := cmds[len(cmds)-1-i]
		if r.GetUser() != c.GetActor().GetUser() || r.GetCommand() != CommandName(c) || r.GetRpc() != c.GetActor().GetRpc() ||
			r.GetAddress() != "127.0.0.1:5000" || r.GetIndex() != uint64(len(cmds)+1-i) ||
			!r.GetTime().AsTime().Equal(timeOf(c.GetUnixNanos())) {
			t.Errorf("record %d = %v, want the write %v at index %d", i, r, c, len(cmds)+1-i)
		}
	}
	if !strings.Contains(recs[0].GetError(), "not found") {
		t.Errorf("failed write's record error = %q", recs[0].GetError())
	}
	if !strings.Contains(recs[4].GetSummary(), `id:"k1"`) {
		t.Errorf("create_key summary %q does not name the key", recs[4].GetSummary())
	}
	all, _ := proto.Marshal(&pb.Snapshot{AuditRecords: recs})
	for _, secret := range []string{"key-secret-1", "key-secret-2", "sk-credential-value", "user-token-1"} {
		h := HashSecret(secret)
		for _, leak := range [][]byte{[]byte(secret), h[:]} {
			if bytes.Contains(all, leak) {
				t.Errorf("the audit log holds %q or its hash", secret)
			}
		}
	}
	if got := h.state().AuditRecords(AuditFilter{User: "bob", Limit: 100}); len(got) != 2 {
		t.Errorf("records of bob = %d, want 2", len(got))
	}
}

func TestAuditRetentionIsBoundedByAgeAndCount(t *testing.T) {
	defer func(n int) { auditMaxRecords = n }(auditMaxRecords)
	auditMaxRecords = 5
	h := newHarness(t)
	for i := range 8 {
		h.must(actor(at(teamCmd("t"+string(rune('a'+i)), nil), baseNanos+int64(i)*1e9), "alice"))
	}
	if n := h.state().AuditCount(); n != 5 {
		t.Fatalf("records after 8 writes with a cap of 5 = %d", n)
	}
	// A write 91 days later forgets every record older than 90 days.
	late := baseNanos + int64(91*24*time.Hour)
	h.must(actor(at(teamCmd("late", nil), late), "alice"))
	recs := h.state().AuditRecords(AuditFilter{Limit: 100})
	if len(recs) != 1 || recs[0].GetCommand() != "create_team" || recs[0].GetTime().AsTime().UnixNano() != late {
		t.Errorf("records after 91 days = %v, want only the late write", recs)
	}
}

func TestUsersAndAuditSurviveSnapshotAndRestoreCommand(t *testing.T) {
	h := newHarness(t)
	h.must(actor(createUserCmd("alice", RoleOperator, "", "tok-alice"), BootstrapUser),
		actor(createKeyCmd("k1", "s1"), "alice"))
	want := h.state()
	f := newFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(persist(t, h.f)))); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	got := f.state.Load()
	if u := got.UserByToken(HashSecret("tok-alice")); u == nil || !proto.Equal(u, want.User("alice")) {
		t.Errorf("restored user = %v, want %v", u, want.User("alice"))
	}
	if g, w := got.AuditRecords(AuditFilter{Limit: 10}), want.AuditRecords(AuditFilter{Limit: 10}); !protoSliceEqual(g, w) {
		t.Errorf("restored audit = %v, want %v", g, w)
	}

	// An admin restore of an older backup keeps today's users and audit
	// log, and is itself audited.
	backup := snapshotOf(newHarness(t).state())
	backup.Index = 1
	h.must(actor(restoreCmd(backup), "alice"))
	st := h.state()
	if st.UserByToken(HashSecret("tok-alice")) == nil {
		t.Error("a restore dropped a user of the running cluster")
	}
	recs := st.AuditRecords(AuditFilter{Limit: 10})
	if len(recs) != 3 || recs[0].GetCommand() != "restore" || !strings.Contains(recs[0].GetSummary(), "snapshot of index 1") {
		t.Errorf("audit after restore = %v, want the two writes and the restore", recs)
	}
}

// While some member does not apply the users release's commands, a leader
// proposes admin writes without their actor: no replica writes an audit
// record the others lack.
func TestNoAuditRecordsUntilEveryMemberAppliesThem(t *testing.T) {
	s := openReady(t, testConfig(t.TempDir()))
	waitLeader(t, s)
	older := true
	s.SetProposeGate(func(name string) error {
		if older && name == auditCommand {
			return errors.New("node n2 does not support create_user")
		}
		return nil
	})
	mustApply(t, s, actor(createKeyCmd("k1", "s1"), "alice"))
	if n := s.State().AuditCount(); n != 0 || s.State().Key("k1") == nil {
		t.Fatalf("with an older member: key applied %v, %d audit records, want applied and none", s.State().Key("k1") != nil, n)
	}
	older = false
	mustApply(t, s, actor(createKeyCmd("k2", "s2"), "alice"))
	if n := s.State().AuditCount(); n != 1 {
		t.Errorf("once every member applies them: %d audit records, want 1", n)
	}
}

func TestAuditSummaryOfALargeWriteIsCut(t *testing.T) {
	imp := &pb.ImportKeysCommand{}
	for i := range 200 {
		imp.Keys = append(imp.Keys, &pb.StoredKey{Key: &pb.Key{Id: fmt.Sprintf("imported-%03d", i), Name: "ключ"}, SecretHash: hashOf(fmt.Sprint(i))})
	}
	h := newHarness(t)
	h.must(actor(&pb.Command{Op: &pb.Command_ImportKeys{ImportKeys: imp}}, "alice"))
	s := h.state().AuditRecords(AuditFilter{Limit: 1})[0].GetSummary()
	if len(s) > auditSummaryMax+64 || !utf8.ValidString(s) || !strings.HasPrefix(s, `{keys:[{key:{id:"imported-000"`) || !strings.Contains(s, "more bytes)") {
		t.Errorf("summary of a 200-key import (%d bytes): %.120s…%s", len(s), s, s[max(0, len(s)-40):])
	}
}

func TestAuditSummaryIsCutBetweenCharacters(t *testing.T) {
	for _, id := range []string{"x", "xx"} { // one of them puts byte 1024 inside a character
		cmd := createKeyCmd(id, "s")
		cmd.GetCreateKey().Key.Key.Name = strings.Repeat("й", 1000)
		if s := summarizeCommand(cmd); !utf8.ValidString(s) || len(s) > auditSummaryMax+64 {
			t.Errorf("summary of %d bytes, valid UTF-8: %v", len(s), utf8.ValidString(s))
		}
	}
}
