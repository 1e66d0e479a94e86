package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/tollgate/tollgate/ratelimit"
)

// memberMeta is what every node tells the others about itself through
// gossip node metadata (memberlist limits it to 512 bytes).
type memberMeta struct {
	ID    string `json:"id"`
	HTTP  string `json:"http"`
	Admin string `json:"admin"`
	Raft  string `json:"raft"`
	// Expect is the node's --bootstrap-expect; zero when it does not
	// bootstrap.
	Expect int `json:"expect,omitempty"`
	// Fresh is set while the node has no Raft state, i.e. has not yet
	// bootstrapped or been added to a cluster.
	Fresh bool `json:"fresh,omitempty"`
	// Leaving is announced just before a graceful leave, so that the
	// others record "left" rather than "dead".
	Leaving bool `json:"leaving,omitempty"`
	// Version is the node's release; Cmds the Raft command types it
	// applies (see commandsMeta). Empty from older releases.
	Version string `json:"ver,omitempty"`
	Cmds    string `json:"cmds,omitempty"`
	// Snap is the newest snapshot format the node reads (see
	// snapshotFormatOf); zero from older releases.
	Snap int `json:"snap,omitempty"`
}

// member is a node as gossip last described it.
type member struct {
	meta   memberMeta
	addr   string // gossip address
	state  string // alive, suspect, dead, left
	since  time.Time
	parsed bool // meta decoded
}

// gossip runs memberlist and keeps a table of every node it has heard of,
// including dead ones, which memberlist itself forgets.
type gossip struct {
	ml *memberlist.Memberlist
	// limiter receives the rate-limit usage other nodes gossip; queue
	// carries this node's (a newer message for a bucket supersedes the
	// older one still queued).
	limiter *ratelimit.Limiter
	queue   *memberlist.TransmitLimitedQueue
	// numNodes is the live cluster size for the queue's retransmits.
	numNodes atomic.Int32
	stopped  atomic.Bool
	selfAddr string // set once after memberlist starts
	log      *slog.Logger
	meta     atomic.Pointer[[]byte]
	// updateMu serializes metadata changes and UpdateNode calls
	// (memberlist's UpdateNode reads the local node's state unlocked while
	// another call rewrites it); it guards cur.
	updateMu sync.Mutex
	cur      memberMeta    // this node's metadata, as last set
	events   chan struct{} // a membership change happened (non-blocking send)

	mu      sync.Mutex
	members map[string]*member // by node name (= node id)
}

type gossipConfig struct {
	NodeID        string
	BindAddr      string // host:port
	AdvertiseAddr string // host:port; empty: memberlist's choice
	Meta          memberMeta
	Limiter       *ratelimit.Limiter
	// Fast uses memberlist's local-network timings (tests).
	Fast   bool
	Logger *slog.Logger
	// Key, when set, encrypts and authenticates every gossip message and
	// push/pull exchange (AES-GCM); messages without it are refused.
	Key []byte
}

func newGossip(cfg gossipConfig) (*gossip, error) {
	g := &gossip{log: cfg.Logger, events: make(chan struct{}, 1), members: map[string]*member{}, limiter: cfg.Limiter, cur: cfg.Meta}
	if err := g.setMeta(cfg.Meta); err != nil {
		return nil, err
	}
	mc := memberlist.DefaultLANConfig()
	if cfg.Fast {
		mc = memberlist.DefaultLocalConfig()
	}
	mc.Name = cfg.NodeID
	// Rate-limit usage rides on gossip: send it every 100 ms.
	mc.GossipInterval = min(mc.GossipInterval, 100*time.Millisecond)
	// A membership change (a join, a node's metadata) is sent this many
	// times log(N) to GossipNodes random members: with the local timings'
	// 2, in a cluster of five or more a change missed a given member now
	// and then until the next push/pull, up to half a minute later.
	mc.RetransmitMult = max(mc.RetransmitMult, 4)
	host, port, err := splitHostPort(cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.BindAddr, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	mc.BindAddr, mc.BindPort = host, port
	if cfg.AdvertiseAddr != "" {
		ahost, aport, err := splitHostPort(cfg.AdvertiseAddr)
		if err != nil {
			return nil, fmt.Errorf("gossip advertise address %q: %w", cfg.AdvertiseAddr, err)
		}
		ip, err := resolveIP(ahost)
		if err != nil {
			return nil, fmt.Errorf("gossip advertise address %q: %w", cfg.AdvertiseAddr, err)
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ip, aport
	}
	// A node that crashed and comes back under its name with a new address
	// (usual for containers) may reclaim its name after this long.
	mc.DeadNodeReclaimTime = 10 * time.Second
	if len(cfg.Key) > 0 {
		mc.SecretKey = cfg.Key
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	mc.Delegate = g
	mc.Events = g
	mc.Logger = log.New(levelWriter{cfg.Logger, "gossip"}, "", 0)
	g.numNodes.Store(1)
	g.queue = &memberlist.TransmitLimitedQueue{RetransmitMult: 2, NumNodes: func() int { return int(g.numNodes.Load()) }}
	if g.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("start gossip on %s: %w", cfg.BindAddr, err)
	}
	ln := g.ml.LocalNode()
	g.selfAddr = net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
	return g, nil
}

func splitHostPort(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return "", 0, fmt.Errorf("bad port %q", ps)
	}
	return host, port, nil
}

func resolveIP(host string) (string, error) {
	if ip := net.ParseIP(host); ip != nil {
		return ip.String(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("cannot resolve %q: %v", host, err)
	}
	return ips[0].String(), nil
}

func (g *gossip) setMeta(m memberMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > memberlist.MetaMaxSize {
		return fmt.Errorf("gossip metadata is %d bytes, more than %d: shorten node id or addresses", len(b), memberlist.MetaMaxSize)
	}
	g.meta.Store(&b)
	return nil
}

// changeMeta changes this node's metadata with change and tells the
// cluster. Changes from different goroutines (the membership loop clearing
// Fresh, the shutdown setting Leaving) apply one after the other, each on
// top of the last, so none undoes another.
func (g *gossip) changeMeta(change func(*memberMeta)) {
	g.updateMu.Lock()
	defer g.updateMu.Unlock()
	m := g.cur
	change(&m)
	if err := g.setMeta(m); err != nil {
		g.log.Error("gossip metadata", "err", err)
		return
	}
	g.cur = m
	if err := g.ml.UpdateNode(5 * time.Second); err != nil {
		g.log.Warn("gossip metadata update", "err", err)
	}
}

// join contacts existing members; it succeeds if any one answers.
func (g *gossip) join(addrs []string) (int, error) { return g.ml.Join(addrs) }

// addr returns the gossip address this node advertises.
func (g *gossip) addr() string { return g.selfAddr }

func (g *gossip) leave(timeout time.Duration) {
	if !g.stopped.CompareAndSwap(false, true) {
		return // already shut down
	}
	if err := g.ml.Leave(timeout); err != nil {
		g.log.Warn("gossip leave", "err", err)
	}
	_ = g.ml.Shutdown()
}

// shutdown stops gossip at once, without announcing a leave.
func (g *gossip) shutdown() {
	g.stopped.Store(true)
	_ = g.ml.Shutdown()
}

// snapshot returns a copy of the member table. (memberlist does not expose
// its "suspect" state: a member is alive until it is declared dead.)
func (g *gossip) snapshot() map[string]member {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]member, len(g.members))
	for id, m := range g.members {
		out[id] = *m
	}
	return out
}

// sortedIDs returns the member ids in order.
func sortedIDs(ms map[string]member) []string {
	ids := make([]string, 0, len(ms))
	for id := range ms {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (g *gossip) record(n *memberlist.Node, state string) {
	m := &member{addr: net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))), state: state, since: time.Now()}
	if err := json.Unmarshal(n.Meta, &m.meta); err == nil && m.meta.ID != "" {
		m.parsed = true
	} else {
		g.log.Warn("gossip member without Tollgate metadata", "name", n.Name, "addr", m.addr)
	}
	g.mu.Lock()
	if old, ok := g.members[n.Name]; ok && old.state == state {
		m.since = old.since
	}
	g.members[n.Name] = m
	g.mu.Unlock()
	select {
	case g.events <- struct{}{}:
	default:
	}
}

// NotifyJoin implements memberlist.EventDelegate.
func (g *gossip) NotifyJoin(n *memberlist.Node) { g.record(n, "alive") }

// NotifyLeave implements memberlist.EventDelegate. memberlist does not
// tell a leave from a death here; a node announces a graceful leave in its
// metadata first.
func (g *gossip) NotifyLeave(n *memberlist.Node) {
	state := "dead"
	var m memberMeta
	if json.Unmarshal(n.Meta, &m) == nil && m.Leaving {
		state = "left"
	}
	g.mu.Lock()
	if old, ok := g.members[n.Name]; ok && old.meta.Leaving {
		state = "left"
	}
	g.mu.Unlock()
	g.record(n, state)
}

// NotifyUpdate implements memberlist.EventDelegate.
func (g *gossip) NotifyUpdate(n *memberlist.Node) { g.record(n, "alive") }

// NodeMeta implements memberlist.Delegate.
func (g *gossip) NodeMeta(limit int) []byte {
	b := *g.meta.Load()
	if len(b) > limit {
		return nil
	}
	return b
}

// NotifyMsg implements memberlist.Delegate: user messages carry
// rate-limit usage.
func (g *gossip) NotifyMsg(b []byte) {
	if g.limiter == nil || len(b) == 0 {
		return
	}
	if err := g.limiter.Merge(b); err != nil {
		g.log.Debug("bad rate-limit gossip message", "err", err)
	}
}

// GetBroadcasts implements memberlist.Delegate.
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte {
	return g.queue.GetBroadcasts(overhead, limit)
}

// LocalState implements memberlist.Delegate: the periodic full exchange
// of rate-limit usage.
func (g *gossip) LocalState(join bool) []byte {
	if g.limiter == nil {
		return nil
	}
	return g.limiter.FullState()
}

// MergeRemoteState implements memberlist.Delegate.
func (g *gossip) MergeRemoteState(buf []byte, join bool) {
	if g.limiter == nil || len(buf) == 0 {
		return
	}
	if err := g.limiter.MergeFull(buf); err != nil {
		g.log.Debug("bad rate-limit state from a peer", "err", err)
	}
}

// runRateGossip queues this node's changed rate-limit usage every 100 ms
// and keeps the limiter's member list in step with gossip.
func (g *gossip) runRateGossip(ctx context.Context, self string) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var last []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids := []string{self}
		for _, n := range g.ml.Members() {
			if n.Name != self && (n.State == memberlist.StateAlive || n.State == memberlist.StateSuspect) {
				ids = append(ids, n.Name)
			}
		}
		sort.Strings(ids)
		if !slices.Equal(ids, last) {
			g.limiter.SetMembers(ids)
			g.numNodes.Store(int32(len(ids)))
			last = ids
		}
		for _, m := range g.limiter.Delta(512) {
			g.queue.QueueBroadcast(m)
		}
		g.queue.Prune(256)
	}
}

// levelWriter turns the "[LEVEL] message" lines of hashicorp libraries
// into slog records of the matching level.
type levelWriter struct {
	l         *slog.Logger
	component string
}

func (w levelWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelInfo, "[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError} {
		if i := strings.Index(msg, prefix); i >= 0 {
			level = l
			msg = strings.TrimSpace(msg[i+len(prefix):])
			break
		}
	}
	w.l.Log(context.Background(), level, msg, "component", w.component)
	return len(p), nil
}
