package node

import (
	"context"
	"crypto/subtle"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/tollgate/tollgate/node/admin"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// Metadata keys of the admin API's cluster plumbing.
const (
	mdForwarded = admin.MetadataForwarded // set on a write forwarded to the leader
	mdIndex     = "x-tollgate-index"      // the Raft index a write was applied at
	mdLagging   = "x-tollgate-lagging"    // nodes that had not applied it in time
)

// appliedWait bounds how long a write waits for every live node to apply
// it before it returns anyway, naming the nodes that lag.
const appliedWait = 3 * time.Second

// writeMethods are the admin RPCs that change the replicated state.
var writeMethods = map[string]bool{}

func init() {
	for _, m := range []string{
		pb.KeyService_CreateKey_FullMethodName, pb.KeyService_UpdateKey_FullMethodName,
		pb.KeyService_RevokeKey_FullMethodName, pb.KeyService_RotateKey_FullMethodName,
		pb.KeyService_ImportKeys_FullMethodName,
		pb.ModelService_AddDeployment_FullMethodName, pb.ModelService_UpdateDeployment_FullMethodName,
		pb.ModelService_RemoveDeployment_FullMethodName, pb.ModelService_DeleteModel_FullMethodName,
		pb.ModelService_SetRouteOptions_FullMethodName,
		pb.CredentialService_SetCredential_FullMethodName, pb.CredentialService_DeleteCredential_FullMethodName,
		pb.ClusterService_RemoveNode_FullMethodName, pb.ClusterService_RestoreSnapshot_FullMethodName,
		pb.TeamService_CreateTeam_FullMethodName, pb.TeamService_UpdateTeam_FullMethodName,
		pb.TeamService_DeleteTeam_FullMethodName,
	} {
		writeMethods[m] = true
	}
}

// peers keeps one client connection per admin address of other nodes.
type peers struct {
	creds credentials.TransportCredentials // set before first use
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (p *peers) conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(p.creds))
	if err != nil {
		return nil, err
	}
	if p.conns == nil {
		p.conns = map[string]*grpc.ClientConn{}
	}
	p.conns[addr] = c
	return c, nil
}

func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// forwardInterceptor runs after authentication. On the leader a write runs
// locally and then waits until every live node has applied it; on a
// follower it is forwarded to the leader, and returns once this node has
// applied it too. Reads always run locally.
func (n *Node) forwardInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !writeMethods[info.FullMethod] {
		return handler(ctx, req)
	}
	if n.store.IsLeader() {
		resp, err := handler(ctx, req)
		if err != nil {
			return resp, err
		}
		idx := n.store.State().Index
		md := metadata.Pairs(mdIndex, strconv.FormatUint(idx, 10))
		if lag := n.waitAllApplied(ctx, idx); len(lag) > 0 {
			md.Set(mdLagging, strings.Join(lag, ","))
		}
		_ = grpc.SetHeader(ctx, md)
		return resp, nil
	}
	in, _ := metadata.FromIncomingContext(ctx)
	if len(in.Get(mdForwarded)) > 0 {
		return nil, status.Error(codes.Unavailable, "this node is no longer the leader; retry")
	}
	addr := n.leaderAdminAddr()
	if addr == "" {
		return nil, status.Error(codes.Unavailable, "no leader is known right now (election in progress?); retry")
	}
	conn, err := n.peers.conn(addr)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "connect to the leader at %s: %v", addr, err)
	}
	req, err = n.sealForwarded(req)
	if err != nil {
		return nil, err
	}
	resp, err := newResponse(info.FullMethod)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	out := metadata.Pairs(mdForwarded, n.cfg.NodeID)
	if a := in.Get("authorization"); len(a) > 0 {
		out.Set("authorization", a...)
		if n.isOwnToken(a[0]) {
			// The token this node printed is accepted here before its
			// hash has reached the replicated state; the leader only
			// knows the replicated tokens.
			if err := n.registerAdminToken(ctx); err != nil {
				return nil, status.Errorf(codes.Unavailable, "register this node's admin token with the leader: %v; retry", err)
			}
		}
	}
	var hdr metadata.MD
	if err := conn.Invoke(metadata.NewOutgoingContext(ctx, out), info.FullMethod, req, resp, grpc.Header(&hdr)); err != nil {
		if st := status.Convert(err); st.Code() == codes.Unavailable {
			// This node's own connection to the leader failed (or the
			// leader said to retry): say so, so that the caller does not
			// take it for a problem of its connection to this node.
			return nil, status.Errorf(codes.Unavailable, "forwarding to the leader at %s: %s", addr, st.Message())
		}
		return nil, err
	}
	if v := hdr.Get(mdIndex); len(v) > 0 {
		if idx, err := strconv.ParseUint(v[0], 10, 64); err == nil {
			wctx, cancel := context.WithTimeout(ctx, appliedWait)
			_ = n.store.WaitForIndex(wctx, idx)
			cancel()
		}
	}
	_ = grpc.SetHeader(ctx, hdr)
	return resp, nil
}

// sealForwarded seals a credential's value with this node's secrets key
// before the write goes to the leader, so that a leader without the key
// (a rollout, a misconfigured node) does not put it into the log in the
// clear. A value the leader would refuse anyway is left for it to refuse.
func (n *Node) sealForwarded(req any) (any, error) {
	sc, ok := req.(*pb.SetCredentialRequest)
	if !ok {
		return req, nil
	}
	if raftstore.IsSealed(sc.GetValue()) {
		// Only nodes pass sealed values on (the leader accepts them from
		// a node): a client's is refused here.
		return nil, admin.ErrSealedValue(sc.GetName())
	}
	if sc.GetValue() == "" || strings.TrimSpace(sc.GetValue()) != sc.GetValue() {
		return req, nil
	}
	st := n.store.State()
	if !st.Sealing() {
		return req, nil
	}
	v, err := st.SealCredential(sc.GetName(), sc.GetValue())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "seal credential %q: %v", sc.GetName(), err)
	}
	out := proto.Clone(sc).(*pb.SetCredentialRequest)
	out.Value = v
	return out, nil
}

// isOwnToken reports whether an authorization value carries the admin
// token this node generated or was configured with.
func (n *Node) isOwnToken(auth string) bool {
	if n.adminToken == "" {
		return false
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(auth), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(n.adminToken)) == 1
}

// newResponse returns an empty response message of an admin RPC, found
// through the registered service descriptors.
func newResponse(fullMethod string) (proto.Message, error) {
	name := strings.TrimPrefix(fullMethod, "/")
	svc, method, ok := strings.Cut(name, "/")
	if !ok {
		return nil, status.Errorf(codes.Internal, "bad method name %q", fullMethod)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, err
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, status.Errorf(codes.Internal, "%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil, status.Errorf(codes.Internal, "no method %s", fullMethod)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, err
	}
	return mt.New().Interface(), nil
}

// leaderAdminAddr returns the admin address of the Raft leader, from its
// gossip metadata.
func (n *Node) leaderAdminAddr() string {
	_, id := n.store.Leader()
	if id == "" {
		return ""
	}
	if m, ok := n.gossip.snapshot()[id]; ok && m.parsed {
		return m.meta.Admin
	}
	return ""
}

// waitAllApplied waits (bounded) until every other live Raft member has
// applied idx and returns the ids of those that did not in time.
func (n *Node) waitAllApplied(ctx context.Context, idx uint64) []string {
	servers, err := n.store.Servers()
	if err != nil {
		return nil
	}
	ms := n.gossip.snapshot()
	wctx, cancel := context.WithTimeout(n.internalContext(context.WithoutCancel(ctx)), appliedWait)
	defer cancel()
	var mu sync.Mutex
	var lag []string
	var wg sync.WaitGroup
	for _, s := range servers {
		m, ok := ms[s.ID]
		if s.ID == n.cfg.NodeID || !ok || m.state != "alive" || m.meta.Admin == "" {
			continue
		}
		wg.Add(1)
		go func(id, addr string) {
			defer wg.Done()
			conn, err := n.peers.conn(addr)
			if err == nil {
				_, err = pb.NewClusterServiceClient(conn).WaitApplied(wctx,
					&pb.WaitAppliedRequest{Index: idx, TimeoutMs: uint32(appliedWait / time.Millisecond)})
			}
			if err != nil {
				n.log.Warn("node has not applied a write in time", "node", id, "index", idx, "err", err)
				mu.Lock()
				lag = append(lag, id)
				mu.Unlock()
			}
		}(s.ID, m.meta.Admin)
	}
	wg.Wait()
	return lag
}
