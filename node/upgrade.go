package node

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// Rolling upgrades: every node advertises in its gossip metadata its
// release and the Raft command types its state machine applies (by field
// number of the Command oneof), and the leader proposes a command type
// only when every Raft member supports it. A member of a release that
// advertises nothing supports legacyCommands.

// commandOneof is the oneof of the Raft command envelope.
var commandOneof = (&pb.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("op")

// legacyCommands are the command types of the releases before nodes
// advertised theirs.
var legacyCommands = map[string]bool{
	"create_key": true, "update_key": true, "revoke_key": true, "rotate_key": true,
	"add_deployment": true, "update_deployment": true, "remove_deployment": true, "delete_route": true,
	"set_route_options": true, "set_credential": true, "delete_credential": true, "add_admin_token": true,
	"restore": true, "create_team": true, "update_team": true, "delete_team": true, "spend_report": true,
	"grant_lease": true, "return_lease": true, "release_node": true, "set_cluster_secret": true,
}

// commandsMeta encodes the command types this release applies
// (raftstore.SupportedCommands) for gossip: their oneof field numbers,
// comma-separated (short enough for memberlist's 512-byte metadata).
func commandsMeta() string {
	var nums []int
	for _, name := range raftstore.SupportedCommands() {
		if fd := commandOneof.Fields().ByName(protoreflect.Name(name)); fd != nil {
			nums = append(nums, int(fd.Number()))
		}
	}
	slices.Sort(nums)
	parts := make([]string, len(nums))
	for i, n := range nums {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// supports reports whether a member whose gossip metadata is m applies the
// command type of field fd.
func supports(m memberMeta, fd protoreflect.FieldDescriptor) bool {
	if m.Cmds == "" {
		return legacyCommands[string(fd.Name())]
	}
	want := strconv.Itoa(int(fd.Number()))
	for n := range strings.SplitSeq(m.Cmds, ",") {
		if n == want {
			return true
		}
	}
	return false
}

// commandGate (raftstore's propose gate) refuses, on the leader, a command
// type that some Raft member does not apply (an older release during a rolling upgrade, or a member
// whose release gossip has not told): it would stop that member. The
// types every release applies pass at once.
func (n *Node) commandGate(name string) error {
	if legacyCommands[name] {
		return nil
	}
	fd := commandOneof.Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		// Not a type this release proposes (raftstore names no type
		// it does not know): nothing to compare.
		return nil
	}
	servers, err := n.store.Servers()
	if err != nil {
		return fmt.Errorf("read the raft configuration: %w", err)
	}
	ms := n.gossip.snapshot()
	for _, s := range servers {
		if s.ID == n.cfg.NodeID {
			continue
		}
		m, ok := ms[s.ID]
		switch {
		case !ok || !m.parsed:
			return fmt.Errorf("the release of node %s is not known yet (not in gossip), so it may not apply %s", s.ID, name)
		case !supports(m.meta, fd):
			return fmt.Errorf("node %s runs release %s, which does not apply %s: upgrade every node first", s.ID, releaseOf(m.meta), name)
		}
	}
	return nil
}

func releaseOf(m memberMeta) string {
	if m.Version == "" {
		return "(an older one)"
	}
	return m.Version
}

// snapshotFormatOf returns the newest Raft snapshot format a member whose
// gossip metadata is m reads. The streamed format and the advertised
// command types came in the same release (merged at 80f7482 and 8e80811,
// landed together), so a member that advertises its commands but no
// format reads the streamed one; a member that advertises nothing reads
// only the single message.
func snapshotFormatOf(m memberMeta) int {
	switch {
	case m.Snap > 0:
		return m.Snap
	case m.Cmds != "":
		return raftstore.StreamedSnapshotFormat
	}
	return raftstore.SingleMessageSnapshotFormat
}

// peerSnapshotFormat (raftstore's SetPeerSnapshotFormat) returns the
// newest snapshot format every other Raft member reads; a member whose
// release gossip has not told counts as the oldest.
func (n *Node) peerSnapshotFormat() int {
	servers, err := n.store.Servers()
	if err != nil {
		return raftstore.SingleMessageSnapshotFormat
	}
	return lowestSnapshotFormat(n.cfg.NodeID, servers, n.gossip.snapshot())
}

func lowestSnapshotFormat(self string, servers []raftstore.Server, ms map[string]member) int {
	low := raftstore.StreamedSnapshotFormat
	for _, s := range servers {
		if s.ID == self {
			continue
		}
		m, ok := ms[s.ID]
		if !ok || !m.parsed {
			return raftstore.SingleMessageSnapshotFormat
		}
		low = min(low, snapshotFormatOf(m.meta))
	}
	return low
}
