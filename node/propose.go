package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// propose applies a command through the leader, wherever it runs, and
// returns once this node's state includes it. Nodes use it for their own
// bookkeeping (spend reports, budget leases), authenticated with the
// cluster secret.
func (n *Node) propose(ctx context.Context, cmd *pb.Command) (proto.Message, error) {
	defer n.metrics.observePropose(time.Now())
	if n.store.IsLeader() {
		return n.store.Apply(ctx, cmd)
	}
	addr := n.leaderAdminAddr()
	if addr == "" {
		return nil, fmt.Errorf("propose: %w", raftstore.ErrNotLeader)
	}
	conn, err := n.peers.conn(addr)
	if err != nil {
		return nil, err
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	resp, err := pb.NewClusterServiceClient(conn).Propose(n.internalContext(ctx), &pb.ProposeRequest{Command: data})
	if err != nil {
		switch status.Code(err) {
		case codes.Unavailable:
			return nil, fmt.Errorf("propose: %v: %w", err, raftstore.ErrNotLeader)
		case codes.Unimplemented, codes.PermissionDenied:
			// The leader's gate refused the type, or the leader runs a
			// release that does not take it through this API.
			return nil, fmt.Errorf("propose: %v: %w", err, raftstore.ErrCommandRefused)
		}
		return nil, fmt.Errorf("propose: %w", err)
	}
	if err := n.store.WaitForIndex(ctx, resp.GetIndex()); err != nil {
		return nil, fmt.Errorf("propose: wait for index %d: %w", resp.GetIndex(), err)
	}
	return nil, nil
}

// internalContext authenticates a call to another node with the cluster
// secret.
func (n *Node) internalContext(ctx context.Context) context.Context {
	secret := n.store.State().ClusterSecret()
	if secret == "" { // not replicated here yet: this node's own token
		secret = n.adminToken
	}
	return metadata.NewOutgoingContext(ctx, metadata.Pairs("authorization", "Bearer "+secret))
}

// catchUp waits, on a follower of a multi-node cluster, until this node
// has applied everything the leader had committed when asked: a node that
// joins or restarts turns ready only with the whole state.
func (n *Node) catchUp(ctx context.Context) {
	for ctx.Err() == nil {
		if n.store.IsLeader() {
			return
		}
		if srvs, err := n.store.Servers(); err == nil && len(srvs) <= 1 {
			return
		}
		target, err := n.leaderCommitIndex(ctx)
		if err == nil {
			if n.store.WaitCaughtUp(ctx, target) == nil {
				return
			}
		} else {
			n.log.Debug("catching up: asking the leader", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (n *Node) leaderCommitIndex(ctx context.Context) (uint64, error) {
	addr := n.leaderAdminAddr()
	if addr == "" {
		return 0, errors.New("no leader known")
	}
	conn, err := n.peers.conn(addr)
	if err != nil {
		return 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := pb.NewClusterServiceClient(conn).Status(n.internalContext(cctx), &pb.StatusRequest{})
	if err != nil {
		return 0, err
	}
	return st.GetCommitIndex(), nil
}

// Propose implements the internal ClusterService.Propose on the leader.
func (c *clusterAPI) Propose(ctx context.Context, req *pb.ProposeRequest) (*pb.ProposeResponse, error) {
	var cmd pb.Command
	if err := proto.Unmarshal(req.GetCommand(), &cmd); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "not a command: %v", err)
	}
	switch cmd.GetOp().(type) {
	case *pb.Command_SpendReport, *pb.Command_GrantLease, *pb.Command_GrantLeases, *pb.Command_ReturnLease,
		*pb.Command_AddAdminToken:
	default:
		return nil, status.Errorf(codes.PermissionDenied, "command %T cannot be proposed through the internal API", cmd.GetOp())
	}
	if !c.n.store.IsLeader() {
		return nil, status.Error(codes.Unavailable, "not the leader; retry")
	}
	// The nodes' own commands have no caller: one the proposer brought
	// would be an audit record in whatever name it chose.
	cmd.Actor = nil
	if _, err := c.n.store.Apply(ctx, &cmd); err != nil {
		if errors.Is(err, raftstore.ErrNotLeader) || errors.Is(err, raftstore.ErrClosed) {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
		if errors.Is(err, raftstore.ErrCommandRefused) {
			// Some member does not apply this type yet: the proposer may
			// fall back (a batch of lease requests goes one by one).
			return nil, status.Error(codes.Unimplemented, err.Error())
		}
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &pb.ProposeResponse{Index: c.n.store.State().Index}, nil
}
