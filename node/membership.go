package node

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/node/admin"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
)

// maxVoters is the largest number of Raft voters; further nodes join as
// non-voters.
const maxVoters = 5

// reconcileInterval is how often membership is reconciled even without a
// gossip event (events can be dropped: the channel never blocks gossip).
const reconcileInterval = time.Second

// runMembership drives cluster formation and Raft membership from gossip:
// every node tries to bootstrap while it is pending, and the leader adds
// nodes gossip sees and removes nodes that have been dead for the grace
// period.
func (n *Node) runMembership(ctx context.Context) {
	t := time.NewTicker(reconcileInterval)
	defer t.Stop()
	missing := map[string]time.Time{} // raft members not alive in gossip, since
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.gossip.events:
		case <-t.C:
		}
		n.markJoined()
		if n.bootstrapPending.Load() {
			n.tryBootstrap()
		}
		if n.ready.Load() && (!n.cfg.lazyTokenRegistration || n.store.IsLeader()) {
			if err := n.registerAdminToken(ctx); err != nil {
				n.log.Debug("register admin token", "err", err)
			}
		}
		if n.store.IsLeader() {
			if err := n.ensureClusterSecret(ctx); err != nil {
				n.log.Warn("set cluster secret", "err", err)
			}
			if err := n.sealCredentials(ctx); err != nil {
				n.log.Warn("seal credentials", "err", err)
			}
			n.reconcile(ctx, missing)
		} else {
			clear(missing)
		}
	}
}

// probeTimeout bounds a probe of a member's Raft address.
const probeTimeout = 3 * time.Second

// Probe results are trusted for probeOKFor; a failed probe is not
// repeated for probeRetry; at most maxProbes run at once.
const (
	probeOKFor = 30 * time.Second
	probeRetry = 10 * time.Second
	maxProbes  = 4
)

// prober runs the probes of members' Raft addresses in the background, so
// that slow or silent addresses never hold up the membership loop.
type prober struct {
	mu      sync.Mutex
	results map[string]probeResult // by node id
	running map[string]bool
}

type probeResult struct {
	addr  string
	err   error
	until time.Time
}

// probeOK reports whether the leader may make gossip member id a Raft
// server at addr: its Raft address answers — with TLS, with a certificate
// of the cluster CA whose common name is the node's id. Gossip alone
// (whose key may leak) cannot then add unreachable voters, which would
// cost the cluster its quorum, or a stranger's address under a member's
// name. Without a fresh result it starts a probe and answers false; the
// probe's end wakes the membership loop.
func (n *Node) probeOK(id, addr string) bool {
	p := &n.probes
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	r, have := p.results[id]
	if have && now.Before(r.until) && (r.err != nil || r.addr == addr) {
		return r.err == nil // a failure holds for the id, whatever its address
	}
	if p.running[id] || len(p.running) >= maxProbes {
		return false
	}
	if p.running == nil {
		p.running, p.results = map[string]bool{}, map[string]probeResult{}
	}
	p.running[id] = true
	go func() {
		err := n.dialRaft(id, addr)
		until := time.Now().Add(probeOKFor)
		if err != nil {
			until = time.Now().Add(probeRetry)
			n.log.Warn("not making node a raft member: its raft address does not answer as that node", "node", id, "addr", addr, "err", err)
		}
		p.mu.Lock()
		delete(p.running, id)
		maps.DeleteFunc(p.results, func(_ string, r probeResult) bool { return time.Now().After(r.until) })
		p.results[id] = probeResult{addr: addr, err: err, until: until}
		p.mu.Unlock()
		select {
		case n.gossip.events <- struct{}{}:
		default:
		}
	}()
	return false
}

func (n *Node) dialRaft(id, addr string) error {
	if n.tls == nil {
		c, err := net.DialTimeout("tcp", addr, probeTimeout)
		if err != nil {
			return err
		}
		return c.Close()
	}
	cfg := n.tls.peerClient.Clone()
	verifyCA := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := verifyCA(cs); err != nil {
			return err
		}
		// The common name alone: the DNS names of node certificates hold
		// shared names (localhost) and host names that are not node ids.
		if cn := cs.PeerCertificates[0].Subject.CommonName; cn != id {
			return fmt.Errorf("its certificate's common name is %q, not the node id %q: issue it with tollgate tls cert --name %s", cn, id, id)
		}
		return nil
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: probeTimeout}, Config: cfg}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// canonicalAddr writes a host:port with an IP host in one form (an IPv4
// address mapped into IPv6 as plain IPv4), so that two spellings of one
// socket compare equal.
func canonicalAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil {
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		host = ip.String()
	} else {
		host = strings.ToLower(host)
	}
	return net.JoinHostPort(host, port)
}

// addrOwner returns the id of the Raft server at addr (canonical), or "".
func addrOwner(servers []raftstore.Server, addr string) string {
	for _, s := range servers {
		if canonicalAddr(s.Address) == addr {
			return s.ID
		}
	}
	return ""
}

// markJoined clears the Fresh flag in gossip once this node has Raft state
// (a leader is known and it is a member).
func (n *Node) markJoined() {
	if !n.fresh.Load() {
		return
	}
	if addr, _ := n.store.Leader(); addr == "" {
		return
	}
	n.fresh.Store(false)
	n.bootstrapPending.Store(false)
	n.gossip.changeMeta(func(m *memberMeta) { m.Fresh = false })
}

// tryBootstrap forms a new cluster once --bootstrap-expect nodes that have
// no Raft state have met. Every one of them computes the same voter set
// (the first N by node id), so they bootstrap identical configurations and
// form one cluster. If any member already belongs to a cluster, this node
// waits to be added by that cluster's leader instead.
func (n *Node) tryBootstrap() {
	expect := n.cfg.BootstrapExpect
	ms := n.gossip.snapshot()
	var fresh []member
	for _, id := range sortedIDs(ms) {
		m := ms[id]
		if m.state != "alive" || !m.parsed {
			continue
		}
		if !m.meta.Fresh {
			n.log.Info("found an existing cluster member; waiting to be added", "member", id)
			n.bootstrapPending.Store(false)
			return
		}
		if m.meta.Expect != expect {
			n.log.Warn("member has a different --bootstrap-expect; ignoring it for bootstrap", "member", id, "its", m.meta.Expect, "ours", expect)
			continue
		}
		fresh = append(fresh, m)
	}
	if len(fresh) < expect {
		return
	}
	fresh = fresh[:expect]
	var servers []raftstore.Server
	self := false
	for _, m := range fresh {
		servers = append(servers, raftstore.Server{ID: m.meta.ID, Address: m.meta.Raft, Voter: true})
		self = self || m.meta.ID == n.cfg.NodeID
	}
	if !self {
		return // more fresh nodes than expected: the first N form the cluster and add us
	}
	n.log.Info("bootstrapping the cluster", "voters", len(servers))
	if err := n.store.BootstrapWith(servers); err != nil {
		n.log.Error("bootstrap", "err", err)
		return
	}
	n.bootstrapPending.Store(false)
}

// releaseLeases returns a removed node's budget leases to the pool. Spend
// it made but had not reported (at most what it held) is counted on top if
// it ever reports it.
func (n *Node) releaseLeases(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := n.store.Apply(ctx, &pb.Command{Actor: admin.ActorOf(ctx), Op: &pb.Command_ReleaseNode{ReleaseNode: &pb.ReleaseNodeCommand{Node: id}}})
	return err
}

// reconcile runs on the leader: it makes the Raft configuration follow
// gossip. Alive nodes are added (voters up to maxVoters, then non-voters);
// a node whose Raft address changed is re-added; a member that gossip has
// not seen alive for DeadNodeGrace is removed, but only while the voters
// that remain alive are still a majority, and its budget leases return.
func (n *Node) reconcile(ctx context.Context, missing map[string]time.Time) {
	servers, err := n.store.Servers()
	if err != nil {
		n.log.Warn("reconcile: read raft configuration", "err", err)
		return
	}
	v := &raftView{servers: servers, inRaft: map[string]raftstore.Server{}, members: n.gossip.snapshot(),
		self: n.cfg.NodeID, maxVoters: cmp.Or(n.cfg.maxVoters, maxVoters)}
	for _, s := range servers {
		v.inRaft[s.ID] = s
		if s.Voter {
			v.voters++
		}
	}
	for _, id := range sortedIDs(v.members) {
		n.reconcileMember(v, id)
	}
	n.removeDead(ctx, v, missing)
}

// raftView is what one reconcile pass works from: the Raft configuration as read at its
// start, the gossip members, and the number of voters as the pass changes it.
type raftView struct {
	servers   []raftstore.Server
	inRaft    map[string]raftstore.Server
	members   map[string]member
	voters    int
	maxVoters int // the most voters: a further node joins as a non-voter
	self      string
}

// alive reports whether gossip sees id alive or suspect (this node always is).
func (v *raftView) alive(id string) bool {
	m, ok := v.members[id]
	return id == v.self || (ok && (m.state == "alive" || m.state == "suspect"))
}

// reconcileMember makes the alive gossip member id a Raft member: added (a voter while
// there are fewer than maxVoters), re-added at a changed address, or promoted to voter.
func (n *Node) reconcileMember(v *raftView, id string) {
	m := v.members[id]
	if m.state != "alive" || !m.parsed || m.meta.Raft == "" || id == v.self {
		return
	}
	s, ok := v.inRaft[id]
	addr := canonicalAddr(m.meta.Raft)
	if owner := addrOwner(v.servers, addr); owner != "" && owner != id {
		n.log.Warn("not making node a raft member: its raft address is another member's", "node", id, "addr", addr, "member", owner)
		return
	}
	switch {
	case !ok:
		if !n.probeOK(id, addr) {
			return
		}
		voter := v.voters < v.maxVoters
		if err := n.store.AddServer(raftstore.Server{ID: id, Address: addr, Voter: voter}); err != nil {
			n.log.Warn("add node to raft", "node", id, "err", err)
			return
		}
		if voter {
			v.voters++
		}
		n.log.Info("added node to raft", "node", id, "voter", voter)
	case canonicalAddr(s.Address) != addr:
		if !n.probeOK(id, addr) {
			return
		}
		n.log.Info("node's raft address changed; re-adding", "node", id, "old", s.Address, "new", addr)
		if err := n.store.RemoveServer(id); err == nil {
			_ = n.store.AddServer(raftstore.Server{ID: id, Address: addr, Voter: s.Voter})
		}
	case !s.Voter && v.voters < v.maxVoters:
		if err := n.store.AddServer(raftstore.Server{ID: id, Address: s.Address, Voter: true}); err == nil {
			v.voters++
			n.log.Info("promoted node to voter", "node", id)
		}
	}
}

// removeDead removes the Raft members gossip has not seen alive for DeadNodeGrace (missing
// holds when each was first seen gone), while the voters that remain alive are still a
// majority, and returns their budget leases.
func (n *Node) removeDead(ctx context.Context, v *raftView, missing map[string]time.Time) {
	now := time.Now()
	aliveVoters := 0
	for _, s := range v.servers {
		if s.Voter && v.alive(s.ID) {
			aliveVoters++
		}
	}
	for id := range missing {
		if _, ok := v.inRaft[id]; !ok || v.alive(id) {
			delete(missing, id)
		}
	}
	var dead []string
	for _, s := range v.servers {
		if v.alive(s.ID) {
			continue
		}
		if _, ok := missing[s.ID]; !ok {
			missing[s.ID] = now
		}
		if now.Sub(missing[s.ID]) >= n.cfg.DeadNodeGrace {
			dead = append(dead, s.ID)
		}
	}
	sort.Strings(dead)
	for _, id := range dead {
		s := v.inRaft[id]
		remaining := v.voters
		if s.Voter {
			remaining--
		}
		if s.Voter && aliveVoters < remaining/2+1 {
			n.log.Warn("not removing dead node: the remaining voters would not be a live majority", "node", id)
			continue
		}
		if err := n.store.RemoveServer(id); err != nil {
			n.log.Warn("remove dead node", "node", id, "err", err)
			continue
		}
		v.voters = remaining
		delete(missing, id)
		n.log.Info("removed dead node from raft after the grace period", "node", id, "grace", n.cfg.DeadNodeGrace)
		// Its budget leases return to the budgets. What it spent and
		// had not reported counts when it comes back; until then
		// tollctl cluster remove returns them again.
		if err := n.releaseLeases(ctx, id); err != nil {
			n.log.Warn("release the leases of a removed dead node; tollctl cluster remove returns them", "node", id, "err", err)
		}
	}
}
