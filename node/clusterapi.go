package node

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/node/admin"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// clusterAPI implements the ClusterService of the admin API.
type clusterAPI struct {
	pb.UnimplementedClusterServiceServer
	n *Node
}

func (c *clusterAPI) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	n := c.n
	p := n.store.Progress()
	_, leader := n.store.Leader()
	resp := &pb.StatusResponse{
		Node: n.cfg.NodeID, Leader: leader, Term: p.Term, AppliedIndex: p.AppliedIndex,
		CommitIndex: p.CommitIndex, LastIndex: p.LastIndex, RaftState: n.store.Stats()["state"],
	}
	if s := resp.RaftState; s != "" {
		resp.RaftState = lower(s)
	}
	servers, err := n.store.Servers()
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	ms := n.gossip.snapshot()
	seen := map[string]bool{}
	for _, s := range servers {
		seen[s.ID] = true
		m := &pb.Member{Id: s.ID, Role: "nonvoter", Leader: s.ID == leader, RaftAddress: s.Address, GossipState: "unknown"}
		if s.Voter {
			m.Role = "voter"
		}
		if g, ok := ms[s.ID]; ok {
			fillGossip(m, g)
		}
		if s.ID == n.cfg.NodeID {
			m.GossipState = "alive"
			m.GossipAddress, m.HttpAddress, m.AdminAddress = n.gossip.addr(), n.meta.HTTP, n.meta.Admin
		}
		switch m.GossipState {
		case "alive":
			m.Health = "healthy"
		case "suspect":
			m.Health = "suspect"
		default:
			m.Health = "unreachable"
		}
		resp.Members = append(resp.Members, m)
	}
	for _, id := range sortedIDs(ms) {
		if seen[id] || ms[id].state != "alive" {
			continue
		}
		m := &pb.Member{Id: id, Role: "none", Health: "not in raft"}
		fillGossip(m, ms[id])
		resp.Members = append(resp.Members, m)
	}
	return resp, nil
}

func fillGossip(m *pb.Member, g member) {
	m.GossipState, m.GossipAddress = g.state, g.addr
	m.HttpAddress, m.AdminAddress, m.Version = g.meta.HTTP, g.meta.Admin, g.meta.Version
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func (c *clusterAPI) RemoveNode(ctx context.Context, req *pb.RemoveNodeRequest) (*pb.RemoveNodeResponse, error) {
	n := c.n
	if req.GetId() == "" {
		return nil, status.Error(codes.InvalidArgument, "node id is empty")
	}
	if req.GetId() == n.cfg.NodeID {
		return nil, status.Error(codes.FailedPrecondition, "this node is the leader: stop it (SIGTERM hands leadership over) or remove it through another node once it is a follower")
	}
	servers, err := n.store.Servers()
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	found := false
	for _, s := range servers {
		found = found || s.ID == req.GetId()
	}
	if !found {
		// Removed already (after --dead-node-grace, or by an earlier
		// call): what remains is to return its leases.
		if err := n.releaseLeases(ctx, req.GetId()); err != nil {
			return nil, storeStatus(err)
		}
		n.log.Info("returned the budget leases of a node that is not a raft member, on request", "node", req.GetId())
		return &pb.RemoveNodeResponse{NotMember: true}, nil
	}
	if err := n.store.RemoveServer(req.GetId()); err != nil {
		return nil, storeStatus(err)
	}
	n.log.Info("removed node on request", "node", req.GetId())
	if err := n.releaseLeases(ctx, req.GetId()); err != nil {
		n.log.Warn("release the leases of a removed node; tollctl cluster remove again returns them", "node", req.GetId(), "err", err)
	}
	return &pb.RemoveNodeResponse{}, nil
}

func (c *clusterAPI) SaveSnapshot(ctx context.Context, _ *pb.SaveSnapshotRequest) (*pb.SaveSnapshotResponse, error) {
	st := c.n.store.State()
	snap := st.Snapshot()
	// The nodes' own secret: with it an admin user could act as a node.
	// A restore keeps the running cluster's anyway.
	snap.ClusterSecret = ""
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(snap)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &pb.SaveSnapshotResponse{Data: data, Index: st.Index}, nil
}

func (c *clusterAPI) RestoreSnapshot(ctx context.Context, req *pb.RestoreSnapshotRequest) (*pb.RestoreSnapshotResponse, error) {
	var snap pb.Snapshot
	if err := proto.Unmarshal(req.GetData(), &snap); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "not a Tollgate snapshot: %v", err)
	}
	if len(req.GetData()) == 0 || snap.GetIndex() == 0 {
		return nil, status.Error(codes.InvalidArgument, "not a Tollgate snapshot: it is empty or has no index (tollctl cluster snapshot save writes one); nothing was changed")
	}
	snap.AuditRecords = nil // a restore keeps the running audit log: no need to log the backup's
	if err := sealSnapshot(c.n.store.State(), &snap); err != nil {
		return nil, err
	}
	rid, err := admin.RequestID(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.n.store.Apply(ctx, &pb.Command{RequestId: rid, Actor: admin.ActorOf(ctx), Op: &pb.Command_Restore{Restore: &pb.RestoreCommand{Snapshot: &snap}}}); err != nil {
		return nil, storeStatus(err)
	}
	return &pb.RestoreSnapshotResponse{Keys: uint64(len(snap.GetKeys())), Routes: uint64(len(snap.GetRoutes())),
		Credentials: uint64(len(snap.GetCredentials()))}, nil
}

// sealSnapshot seals, with this node's secrets key, the credentials a
// backup holds in the clear, so that a restore does not put them into the
// log so; and refuses a backup whose sealed credentials do not open here
// (sealed with another key, or this node has none), which would leave
// every deployment that uses them failing.
func sealSnapshot(st *raftstore.State, snap *pb.Snapshot) error {
	for i, c := range snap.GetCredentials() {
		if raftstore.IsSealed(c.GetValue()) {
			if _, err := st.OpenCredential(c); err != nil {
				return status.Errorf(codes.FailedPrecondition, "the snapshot's credential %q cannot be used here: %v; restore it on a cluster with the secrets key it was sealed with; nothing was changed", c.GetName(), err)
			}
			continue
		}
		v, err := st.SealCredential(c.GetName(), c.GetValue())
		if err != nil {
			return status.Errorf(codes.Internal, "seal the snapshot's credential %q: %v", c.GetName(), err)
		}
		if v != c.GetValue() {
			sc := proto.Clone(c).(*pb.StoredCredential)
			sc.Value = v
			snap.Credentials[i] = sc
		}
	}
	return nil
}

func (c *clusterAPI) WaitApplied(ctx context.Context, req *pb.WaitAppliedRequest) (*pb.WaitAppliedResponse, error) {
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout <= 0 || timeout > time.Minute {
		timeout = appliedWait
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := c.n.store.WaitForIndex(wctx, req.GetIndex())
	idx := c.n.store.State().Index
	if err != nil {
		return nil, status.Errorf(codes.DeadlineExceeded, "applied index %d, want %d", idx, req.GetIndex())
	}
	return &pb.WaitAppliedResponse{AppliedIndex: idx}, nil
}

func storeStatus(err error) error {
	switch {
	case errors.Is(err, raftstore.ErrNotLeader), errors.Is(err, raftstore.ErrClosed):
		return status.Error(codes.Unavailable, err.Error()+"; retry")
	case errors.Is(err, raftstore.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
