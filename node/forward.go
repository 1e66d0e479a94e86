package node

import (
	"context"
	"crypto/subtle"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	mdLagging   = admin.MetadataLagging   // nodes that had not applied it in time
)

// appliedWait bounds how long a write waits for every live node to apply
// it before it returns anyway, naming the nodes that lag.
const appliedWait = 3 * time.Second

// writeMethods are the admin RPCs that change the replicated state: they run on the
// leader, forwarded there from any other node (forwardInterceptor). Every RPC the admin
// server serves is either here or in localMethods; forward_list_test.go checks both lists
// against the services' descriptors, so a new RPC fails the tests until it is classified.
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
		pb.UserService_CreateUser_FullMethodName, pb.UserService_RevokeUser_FullMethodName,
		pb.UserService_RotateUser_FullMethodName, pb.UserService_EndConsoleSession_FullMethodName,
	} {
		writeMethods[m] = true
	}
}

// localMethods are the admin RPCs that run on the node asked, never forwarded: reads, and
// the cluster's own plumbing (a follower's proposals and waits, snapshots of this node).
var localMethods = []string{
	pb.KeyService_ListKeys_FullMethodName, pb.KeyService_GetKey_FullMethodName,
	pb.ModelService_ListModels_FullMethodName, pb.ModelService_GetModel_FullMethodName,
	pb.ModelService_ListPrices_FullMethodName, pb.ModelService_TestModel_FullMethodName,
	pb.CredentialService_ListCredentials_FullMethodName,
	pb.TeamService_ListTeams_FullMethodName, pb.TeamService_GetTeam_FullMethodName,
	pb.SpendService_SpendReport_FullMethodName, pb.SpendService_SpendLogs_FullMethodName,
	pb.SpendService_NodeLogs_FullMethodName,
	pb.ClusterService_Status_FullMethodName, pb.ClusterService_SaveSnapshot_FullMethodName,
	pb.ClusterService_WaitApplied_FullMethodName, pb.ClusterService_Propose_FullMethodName,
	pb.UserService_ListUsers_FullMethodName, pb.UserService_GetUser_FullMethodName,
	pb.UserService_WhoAmI_FullMethodName, pb.AuditService_ListAudit_FullMethodName,
	pb.McpService_ListMcpServers_FullMethodName, pb.McpService_GetMcpServer_FullMethodName,
	pb.McpService_TestMcpServer_FullMethodName,
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
// applied it too. A forwarded write whose leader stops answering or steps
// down is sent again to the next leader, within the caller's deadline: the
// write carries one request id (and, for a key's secret, one seed) on
// every attempt, so that it is applied once. Reads always run locally.
func (n *Node) forwardInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !writeMethods[info.FullMethod] {
		return handler(ctx, req)
	}
	in, _ := metadata.FromIncomingContext(ctx)
	if len(in.Get(mdForwarded)) > 0 {
		if !n.store.IsLeader() {
			return nil, status.Error(codes.Unavailable, "this node is no longer the leader; retry")
		}
		return n.runOnLeader(ctx, req, handler)
	}
	ctx, req, err := prepareWrite(ctx, in, req)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, writeRetryLimit)
		defer cancel()
	}
	delay := forwardRetryDelay
	for {
		var resp any
		if n.store.IsLeader() {
			resp, err = n.runOnLeader(ctx, req, handler)
		} else {
			resp, err = n.forwardOnce(ctx, info.FullMethod, req)
		}
		if err == nil || status.Code(err) != codes.Unavailable || n.draining.Load() || noLeader(err) {
			return resp, err
		}
		// The leader stepped down, stopped answering or could not be
		// reached: look for the leader again.
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		delay = min(2*delay, maxForwardRetryDelay)
	}
}

// Forwarding retries: the first delay and the largest; writeRetryLimit
// bounds a write whose caller set no deadline.
const (
	forwardRetryDelay    = 25 * time.Millisecond
	maxForwardRetryDelay = 400 * time.Millisecond
	writeRetryLimit      = 30 * time.Second
)

// prepareWrite gives a write the request id it keeps on every attempt
// (the client's, or a new one) and fixes what its handler would otherwise
// draw at random (a key secret's seed).
func prepareWrite(ctx context.Context, in metadata.MD, req any) (context.Context, any, error) {
	rid, err := admin.RequestID(ctx)
	if err != nil {
		return ctx, req, err
	}
	if rid == "" {
		md := in.Copy()
		md.Set(admin.MetadataRequestID, admin.NewRequestID())
		ctx = metadata.NewIncomingContext(ctx, md)
	}
	switch r := req.(type) {
	case *pb.CreateKeyRequest:
		if len(r.GetSecretSeed()) == 0 {
			r = proto.Clone(r).(*pb.CreateKeyRequest)
			r.SecretSeed = admin.NewSecretSeed()
			req = r
		}
	case *pb.RotateKeyRequest:
		if len(r.GetSecretSeed()) == 0 {
			r = proto.Clone(r).(*pb.RotateKeyRequest)
			r.SecretSeed = admin.NewSecretSeed()
			req = r
		}
	case *pb.CreateUserRequest:
		if len(r.GetTokenSeed()) == 0 {
			r = proto.Clone(r).(*pb.CreateUserRequest)
			r.TokenSeed = admin.NewSecretSeed()
			req = r
		}
	case *pb.RotateUserRequest:
		if len(r.GetTokenSeed()) == 0 {
			r = proto.Clone(r).(*pb.RotateUserRequest)
			r.TokenSeed = admin.NewSecretSeed()
			req = r
		}
	}
	return ctx, req, nil
}

// runOnLeader runs a write on this node, the leader, and waits (bounded)
// until every live node has applied it.
func (n *Node) runOnLeader(ctx context.Context, req any, handler grpc.UnaryHandler) (any, error) {
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

// errNoLeaderPrefix starts the message of a write refused because no
// leader can be elected where this node is; tollctl retries it only
// briefly.
const errNoLeaderPrefix = "no leader:"

func noLeader(err error) bool {
	return strings.HasPrefix(status.Convert(err).Message(), errNoLeaderPrefix)
}

// forwardOnce sends a write to the leader. The attempt ends early when
// this node sees the leader change (it stepped down, or stopped answering
// and another was elected): the caller then tries the new one.
func (n *Node) forwardOnce(ctx context.Context, method string, req any) (any, error) {
	leaderID, err := n.awaitLeader(ctx)
	if err != nil {
		return nil, err
	}
	addr := n.adminAddrOf(leaderID)
	if addr == "" {
		return nil, status.Errorf(codes.Unavailable, "the leader %s has no admin address in gossip yet; retry", leaderID)
	}
	conn, err := n.peers.conn(addr)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "connect to the leader at %s: %v", addr, err)
	}
	freq, err := n.sealForwarded(req)
	if err != nil {
		return nil, err
	}
	resp, err := newResponse(method)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	in, _ := metadata.FromIncomingContext(ctx)
	out := metadata.Pairs(mdForwarded, n.cfg.NodeID)
	out.Set(admin.MetadataRequestID, in.Get(admin.MetadataRequestID)...)
	// The caller as this node saw it (its address above all), vouched for
	// with the cluster secret, for the leader's audit record.
	out = metadata.Join(out, admin.ForwardMetadata(ctx, n.store.State().ClusterSecret()))
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
	actx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, out))
	defer cancel()
	changed := n.watchLeader(actx, leaderID, cancel)
	var hdr metadata.MD
	if err := conn.Invoke(actx, method, freq, resp, grpc.Header(&hdr)); err != nil {
		if changed.Load() && ctx.Err() == nil {
			return nil, status.Errorf(codes.Unavailable, "the leader %s stepped down or stopped answering; retry", leaderID)
		}
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

// leaderPoll is how often a forwarded write checks that its leader is
// still the leader.
const leaderPoll = 50 * time.Millisecond

// watchLeader calls cancel, and sets the flag it returns, once this
// node's Raft no longer names id as the leader; it stops with ctx.
func (n *Node) watchLeader(ctx context.Context, id string, cancel context.CancelFunc) *atomic.Bool {
	changed := new(atomic.Bool)
	go func() {
		t := time.NewTicker(leaderPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, cur := n.store.Leader(); cur != id {
				changed.Store(true)
				cancel()
				return
			}
		}
	}()
	return changed
}

// awaitLeader returns the leader's id. While none is known it waits for
// an election as long as this node reaches a majority of the voters; a
// node that does not (a minority partition) answers at once.
func (n *Node) awaitLeader(ctx context.Context) (string, error) {
	for {
		if _, id := n.store.Leader(); id != "" {
			return id, nil
		}
		if reached, voters, ok := n.majorityReachable(ctx); !ok {
			return "", status.Errorf(codes.Unavailable,
				"%s this node reaches %d of the %d voters, too few to elect one (is it cut off from the rest of the cluster?)",
				errNoLeaderPrefix, reached, voters)
		}
		select {
		case <-ctx.Done():
			return "", status.Error(codes.Unavailable, "no leader was elected within the call's deadline (election in progress); retry")
		case <-time.After(leaderPoll / 2):
		}
	}
}

// reachTimeout bounds the check that a node answers at all; reachKeep is
// how long majorityReachable's answer is kept (it is asked only while no
// leader is known).
const (
	reachTimeout = 500 * time.Millisecond
	reachKeep    = 2 * time.Second
)

// majorityReachable reports whether this node and the voters whose admin
// API answers are a majority of the voters. The answer is kept for
// reachKeep.
func (n *Node) majorityReachable(ctx context.Context) (reached, voters int, ok bool) {
	n.reach.mu.Lock()
	defer n.reach.mu.Unlock()
	if time.Since(n.reach.at) < reachKeep {
		return n.reach.reached, n.reach.voters, n.reach.ok
	}
	servers, err := n.store.Servers()
	if err != nil {
		return 0, 0, true // cannot tell: wait for an election
	}
	var addrs []string
	self := false
	for _, s := range servers {
		if !s.Voter {
			continue
		}
		voters++
		if s.ID == n.cfg.NodeID {
			self = true
		} else if a := n.adminAddrOf(s.ID); a != "" {
			addrs = append(addrs, a)
		}
	}
	var wg sync.WaitGroup
	var answered atomic.Int32
	for _, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n.answers(ctx, a) {
				answered.Add(1)
			}
		}()
	}
	wg.Wait()
	reached = int(answered.Load())
	if self {
		reached++
	}
	ok = voters == 0 || reached >= voters/2+1
	n.reach.at, n.reach.reached, n.reach.voters, n.reach.ok = time.Now(), reached, voters, ok
	return reached, voters, ok
}

// reachCache holds the last majorityReachable answer.
type reachCache struct {
	mu              sync.Mutex
	at              time.Time
	reached, voters int
	ok              bool
}

// answers reports whether the node at admin address addr answers a
// trivial call within reachTimeout.
func (n *Node) answers(ctx context.Context, addr string) bool {
	conn, err := n.peers.conn(addr)
	if err != nil {
		return false
	}
	cctx, cancel := context.WithTimeout(n.internalContext(ctx), reachTimeout)
	defer cancel()
	_, err = pb.NewClusterServiceClient(conn).WaitApplied(cctx, &pb.WaitAppliedRequest{Index: 0, TimeoutMs: 1})
	return err == nil
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
	return n.adminAddrOf(id)
}

// adminAddrOf returns the admin address of node id, from its gossip
// metadata; "" when unknown.
func (n *Node) adminAddrOf(id string) string {
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
			// A node that does not answer at all (stopped, cut off) is
			// not waited for the whole appliedWait.
			nctx, ncancel := context.WithCancel(wctx)
			defer ncancel()
			go func() {
				if !n.answers(nctx, addr) {
					ncancel()
				}
			}()
			conn, err := n.peers.conn(addr)
			if err == nil {
				_, err = pb.NewClusterServiceClient(conn).WaitApplied(nctx,
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
