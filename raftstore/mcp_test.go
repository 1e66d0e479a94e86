package raftstore

import (
	"bytes"
	"errors"
	"io"
	"testing"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

func putMcpCmd(m *pb.McpServer, replace bool) *pb.Command {
	return &pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{Server: m, Replace: replace}}}
}

func mcpToolsCmd(key, team string, tools ...string) *pb.Command {
	return &pb.Command{Op: &pb.Command_SetMcpTools{SetMcpTools: &pb.SetMcpToolsCommand{KeyId: key, TeamId: team, Tools: tools}}}
}

func TestMcpServerAddReplaceRemove(t *testing.T) {
	h := newFixture(t)
	h.must(putMcpCmd(&pb.McpServer{Name: "gh", Url: "https://mcp.example/mcp", Credential: "openai"}, false))
	m := h.state().McpServer("gh")
	if m.GetTransport() != McpTransportHTTP || m.GetCreatedAt() == nil {
		t.Fatalf("stored %v", m)
	}
	if _, err := h.apply(putMcpCmd(&pb.McpServer{Name: "gh", Url: "https://other/mcp"}, false)); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("second add: %v", err)
	}
	h.must(putMcpCmd(&pb.McpServer{Name: "gh", Url: "https://other/mcp"}, true))
	if got := h.state().McpServer("gh"); got.GetUrl() != "https://other/mcp" || !got.GetCreatedAt().AsTime().Equal(m.GetCreatedAt().AsTime()) {
		t.Fatalf("replaced %v", got)
	}
	h.must(&pb.Command{Op: &pb.Command_DeleteMcpServer{DeleteMcpServer: &pb.DeleteMcpServerCommand{Name: "gh"}}})
	if len(h.state().McpServers()) != 0 {
		t.Fatal("server not removed")
	}
	if _, err := h.apply(&pb.Command{Op: &pb.Command_DeleteMcpServer{DeleteMcpServer: &pb.DeleteMcpServerCommand{Name: "gh"}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
}

func TestMcpServerRefusesBadConfig(t *testing.T) {
	h := newFixture(t)
	for _, m := range []*pb.McpServer{
		{Name: "a__b", Url: "http://x/mcp"},
		{Name: "Caps", Url: "http://x/mcp"},
		{Name: "a", Url: "ftp://x"},
		{Name: "a", Transport: "stdio"},
		{Name: "a", Transport: "stdio", Command: []string{"x"}, Url: "http://x"},
		{Name: "a", Transport: "carrier-pigeon", Url: "http://x"},
		{Name: "a", Url: "http://x", PricePerCallNanos: -1},
	} {
		if _, err := h.apply(putMcpCmd(m, false)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: %v, want invalid", m, err)
		}
	}
	if _, err := h.apply(putMcpCmd(&pb.McpServer{Name: "a", Url: "http://x", Credential: "nope"}, false)); !errors.Is(err, ErrFailedPrecondition) {
		t.Errorf("missing credential: %v", err)
	}
}

func TestMcpPolicyNeedsAListAndBothListsAllow(t *testing.T) {
	h := newFixture(t)
	h.must(&pb.Command{Op: &pb.Command_CreateTeam{CreateTeam: &pb.CreateTeamCommand{Team: &pb.Team{Id: "t1", Name: "t1"}}}})
	h.must(updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", TeamId: new("t1")}))
	st := h.state()
	if st.McpPolicy("k1", "t1").Allows("gh__read") {
		t.Fatal("no list allows a tool")
	}
	h.must(mcpToolsCmd("", "t1", "gh__*", "*__read_*"))
	p := h.state().McpPolicy("k1", "t1")
	if !p.Allows("gh__create") || !p.Allows("fs__read_file") || p.Allows("fs__write_file") {
		t.Fatal("team list alone")
	}
	h.must(mcpToolsCmd("k1", "", "gh__read_*"))
	p = h.state().McpPolicy("k1", "t1")
	if !p.Allows("gh__read_issue") || p.Allows("gh__create") || p.Allows("fs__read_file") {
		t.Fatal("key and team lists both apply")
	}
	// Updating the key keeps its list.
	h.must(updateKeyCmd(&pb.UpdateKeyRequest{Id: "k1", Name: new("renamed")}))
	if got := h.state().Key("k1").GetKey().GetMcpTools(); len(got) != 1 {
		t.Fatalf("tools after update %v", got)
	}
	if _, err := h.apply(mcpToolsCmd("nokey", "", "*")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := h.apply(mcpToolsCmd("k1", "t1", "*")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("key and team: %v", err)
	}
}

func TestMcpConfigSurvivesSnapshotRestore(t *testing.T) {
	h := newFixture(t)
	h.must(putMcpCmd(&pb.McpServer{Name: "gh", Url: "https://mcp.example/mcp", Headers: map[string]string{"X-Key": "v"}, PricePerCallNanos: 5}, false),
		putMcpCmd(&pb.McpServer{Name: "fs", Transport: "stdio", Command: []string{"npx", "server"}}, false),
		mcpToolsCmd("k1", "", "gh__*"))
	want := h.state()
	data := persist(t, h.f)
	f := newFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	got := f.state.Load()
	compareStates(t, got, want)
	if got.McpServer("gh").GetHeaders()["X-Key"] != "v" || got.McpServer("fs").GetCommand()[1] != "server" ||
		!got.McpPolicy("k1", "").Allows("gh__x") {
		t.Fatal("mcp config lost in the snapshot")
	}
}

func TestMcpHeaderSealedForItsServerOnly(t *testing.T) {
	s, err := NewSealer(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	st := emptyState()
	st.sealer = s
	sealed, err := st.SealMcpSecret("gh", "header", "Authorization", "Bearer x")
	if err != nil || !IsSealed(sealed) {
		t.Fatalf("seal: %q %v", sealed, err)
	}
	if v, err := st.OpenMcpSecret("gh", "header", "Authorization", sealed); err != nil || v != "Bearer x" {
		t.Fatalf("open: %q %v", v, err)
	}
	if _, err := st.OpenMcpSecret("other", "header", "Authorization", sealed); err == nil {
		t.Fatal("a value sealed for one server opened for another")
	}
}

func TestMcpResealAppliesOnlyToTheServerItRead(t *testing.T) {
	h := newFixture(t)
	h.must(putMcpCmd(&pb.McpServer{Name: "gh", Url: "https://mcp.example/mcp", Headers: map[string]string{"A": "clear"}}, false))
	read := h.state().McpServer("gh")
	resealed := &pb.McpServer{Name: "gh", Url: "https://mcp.example/mcp", Headers: map[string]string{"A": "sealed"}}
	h.must(putMcpCmd(&pb.McpServer{Name: "gh", Url: "https://changed/mcp"}, true))
	stale := &pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{Server: resealed, ResealOf: read}}}
	if _, err := h.apply(stale); !errors.Is(err, ErrFailedPrecondition) {
		t.Fatalf("a reseal of a server changed since: %v", err)
	}
	cur := h.state().McpServer("gh")
	resealed.Url = cur.GetUrl()
	h.must(&pb.Command{Op: &pb.Command_PutMcpServer{PutMcpServer: &pb.PutMcpServerCommand{Server: resealed, ResealOf: cur}}})
	got := h.state().McpServer("gh")
	if got.GetHeaders()["A"] != "sealed" || !got.GetUpdatedAt().AsTime().Equal(cur.GetUpdatedAt().AsTime()) {
		t.Fatalf("resealed %v", got)
	}
}

// A server name ending in '_' makes namespaced tool names ambiguous: server
// "a_" with tool "x" and server "a" with tool "_x" are both "a___x", which
// the allow-list pattern "a__*" (meant for server a) matches and which the
// gateway routes to server a. Such names are refused.
func TestMcpServerNameEndingInUnderscoreRefused(t *testing.T) {
	h := newFixture(t)
	h.must(putMcpCmd(&pb.McpServer{Name: "a", Url: "http://x/mcp"}, false))
	for _, name := range []string{"a_", "_", "b-_"} {
		if _, err := h.apply(putMcpCmd(&pb.McpServer{Name: name, Url: "http://x/mcp"}, false)); !errors.Is(err, ErrInvalid) {
			t.Errorf("server %q: %v, want invalid", name, err)
		}
	}
	h.must(putMcpCmd(&pb.McpServer{Name: "_a-b_c", Url: "http://x/mcp"}, false))
}
