package node

// Test harness for in-process clusters: real nodes (Raft over TCP, gossip
// over UDP/TCP, gRPC admin API, HTTP data plane) on 127.0.0.1 in one test
// process.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/e2e/ports"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// raftLogLevel is Raft's own log level in tests ("warn" shows elections).
var raftLogLevel = "error"

// testAdminToken is the admin token every test node is configured with.
const testAdminToken = "tga-cluster-test-token"

// eventually polls cond until it returns nil or timeout passes, then fails
// the test with cond's last error.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v: %v", what, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// --- ports --------------------------------------------------------------------

// freePort returns a port of 127.0.0.1 that is free for TCP and UDP
// (gossip binds both on one port), from below the ephemeral range; the
// process never hands out the same port twice.
func freePort(t testing.TB, _ bool) int {
	t.Helper()
	p, err := ports.Next()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func localAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// --- logging -----------------------------------------------------------------

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testLogger returns a logger that collects info and above in memory and
// prints them only when the test fails. (t.Log itself cannot be used: Raft
// and gossip goroutines may log after the test has returned.)
func testLogger(t testing.TB) *slog.Logger {
	buf := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			out := buf.String()
			if len(out) > 200_000 {
				out = "…" + out[len(out)-200_000:]
			}
			t.Logf("node logs:\n%s", out)
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// --- nodes -------------------------------------------------------------------

// tnode is a node under test together with the goroutine that runs it.
type tnode struct {
	t    testing.TB
	id   string
	cfg  Config
	n    *Node
	conn *grpc.ClientConn

	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned

	mu       sync.Mutex // guards conn and the fields below
	runErr   error
	panicked any // what Run panicked with, if it did
}

// baseConfig is a node configuration for tests: fast timings, the shared
// admin token, no drain delay, everything on 127.0.0.1 (HTTP, admin and
// Raft on port 0, gossip on a picked port).
func baseConfig(t testing.TB, id string, logger *slog.Logger) Config {
	return Config{
		NodeID:       id,
		DataDir:      t.TempDir(),
		HTTPAddr:     "127.0.0.1:0",
		AdminAddr:    "127.0.0.1:0",
		RaftAddr:     "127.0.0.1:0",
		GossipAddr:   localAddr(freePort(t, true)),
		FastGossip:   true,
		AdminToken:   testAdminToken,
		DrainDelay:   0,
		DrainTimeout: 2 * time.Second,
		Logger:       logger,
		TokenOut:     &syncBuffer{},
		// Short Raft timings, though not so short that a scheduling hiccup
		// under -race on a small machine costs the leader its lease.
		Raft: RaftTuning{
			HeartbeatTimeout:   300 * time.Millisecond,
			ElectionTimeout:    300 * time.Millisecond,
			LeaderLeaseTimeout: 250 * time.Millisecond,
			CommitTimeout:      5 * time.Millisecond,
			LogLevel:           raftLogLevel,
		},
	}
}

// newTNode creates a node (New) without running it. A gossip port that was
// taken in the meantime is replaced by a fresh one. The node is stopped at
// the end of the test.
func newTNode(t testing.TB, cfg Config) *tnode {
	t.Helper()
	var n *Node
	var err error
	for range 5 {
		if n, err = New(cfg); err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		t.Logf("node %s: %v; picking another gossip port", cfg.NodeID, err)
		cfg.GossipAddr = localAddr(freePort(t, true))
	}
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.NodeID, err)
	}
	tn := &tnode{t: t, id: cfg.NodeID, cfg: cfg, n: n}
	groupOf(t).add(tn)
	return tn
}

// group holds the nodes a test created. At the end of the test they are
// stopped (gracefully, through Run's context) concurrently: a serial stop
// would have each wait for the others' gossip and leadership hand-over.
// Followers go first, then the leader, so that the leader does not hand
// leadership to a node that is stopping too.
type group struct {
	mu    sync.Mutex
	nodes []*tnode
}

var groups sync.Map // testing.TB → *group

func groupOf(t testing.TB) *group {
	if g, ok := groups.Load(t); ok {
		return g.(*group)
	}
	g := &group{}
	groups.Store(t, g)
	t.Cleanup(func() {
		groups.Delete(t)
		g.mu.Lock()
		nodes := g.nodes
		g.mu.Unlock()
		var leaders, others []*tnode
		for _, tn := range nodes {
			if tn.n.Store().IsLeader() {
				leaders = append(leaders, tn)
			} else {
				others = append(others, tn)
			}
		}
		for _, batch := range [][]*tnode{others, leaders} {
			var wg sync.WaitGroup
			for _, tn := range batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tn.stop(15 * time.Second)
				}()
			}
			wg.Wait()
		}
		for _, tn := range nodes {
			tn.mu.Lock()
			if tn.conn != nil {
				_ = tn.conn.Close()
			}
			tn.mu.Unlock()
		}
	})
	return g
}

func (g *group) add(tn *tnode) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nodes = append(g.nodes, tn)
}

// start runs the node in a goroutine. A panic in Run is recorded (see
// runPanic) rather than crashing the test binary.
func (tn *tnode) start() {
	ctx, cancel := context.WithCancel(context.Background())
	tn.cancel, tn.done = cancel, make(chan struct{})
	go func() {
		defer close(tn.done)
		defer func() {
			if r := recover(); r != nil {
				tn.mu.Lock()
				tn.panicked = r
				tn.mu.Unlock()
			}
		}()
		err := tn.n.Run(ctx)
		tn.mu.Lock()
		tn.runErr = err
		tn.mu.Unlock()
	}()
}

// startNode creates and runs a node.
func startNode(t testing.TB, cfg Config) *tnode {
	t.Helper()
	tn := newTNode(t, cfg)
	tn.start()
	return tn
}

// stop cancels Run (graceful shutdown) and waits for it to return, then
// closes whatever is left. It reports whether Run returned in time.
func (tn *tnode) stop(timeout time.Duration) bool {
	if tn.cancel == nil {
		tn.n.Close()
		return true
	}
	tn.cancel()
	select {
	case <-tn.done:
	case <-time.After(timeout):
		// Seen once: raft.Shutdown waiting forever for a pipeline
		// replication goroutine stuck in netPipeline.AppendEntries (the
		// hashicorp/raft pipeline deadlock). Do not wait for it: Close
		// would block on the same shutdown.
		tn.t.Errorf("node %s: Run did not return within %v of cancel", tn.id, timeout)
		go tn.n.Close()
		return false
	}
	tn.n.Close()
	return true
}

// crash stops the node at once, without draining (Close).
func (tn *tnode) crash() {
	tn.n.Close()
}

func (tn *tnode) runPanic() any {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.panicked
}

// gossipAddr returns the node's gossip address: the configured one (on
// 127.0.0.1 it is also the advertised one). (Not gossip.addr: reading
// memberlist's LocalNode races with metadata updates.)
func (tn *tnode) gossipAddr() string { return tn.cfg.GossipAddr }

// grpcConn returns a client connection to the node's admin API.
func (tn *tnode) grpcConn() *grpc.ClientConn {
	tn.t.Helper()
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if tn.conn == nil {
		creds := insecure.NewCredentials()
		if tn.cfg.TLSCA != "" {
			creds = credentials.NewTLS(tn.clientTLS())
		}
		c, err := grpc.NewClient(tn.n.AdminAddr(), grpc.WithTransportCredentials(creds))
		if err != nil {
			tn.t.Fatalf("dial %s: %v", tn.id, err)
		}
		tn.conn = c
	}
	return tn.conn
}

func (tn *tnode) keys() pb.KeyServiceClient { return pb.NewKeyServiceClient(tn.grpcConn()) }
func (tn *tnode) models() pb.ModelServiceClient {
	return pb.NewModelServiceClient(tn.grpcConn())
}
func (tn *tnode) creds() pb.CredentialServiceClient {
	return pb.NewCredentialServiceClient(tn.grpcConn())
}
func (tn *tnode) cluster() pb.ClusterServiceClient {
	return pb.NewClusterServiceClient(tn.grpcConn())
}

// clientTLS is what tollctl with --tls-ca uses: the cluster CA as the
// only root, the host name checked.
func (tn *tnode) clientTLS() *tls.Config {
	pem, err := os.ReadFile(tn.cfg.TLSCA)
	if err != nil {
		tn.t.Fatalf("read CA: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool}
}

// httpURL is the data plane's base URL.
func (tn *tnode) httpURL() string {
	if tn.cfg.HTTPTLS {
		return "https://" + tn.n.HTTPAddr()
	}
	return "http://" + tn.n.HTTPAddr()
}

// readyz returns the status code of GET /readyz.
func (tn *tnode) readyz() (int, error) {
	c := http.Client{Timeout: 2 * time.Second}
	if tn.cfg.HTTPTLS {
		c.Transport = &http.Transport{TLSClientConfig: tn.clientTLS()}
		defer c.CloseIdleConnections()
	}
	resp, err := c.Get(tn.httpURL() + "/readyz")
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func (tn *tnode) waitReady(timeout time.Duration) {
	tn.t.Helper()
	eventually(tn.t, timeout, tn.id+" /readyz is 200", func() error {
		code, err := tn.readyz()
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("status %d", code)
		}
		return nil
	})
}

// tokenCtx returns a context with the admin token as bearer credentials
// and a timeout.
func tokenCtx(t testing.TB, token string, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func adminCtx(t testing.TB) context.Context { return tokenCtx(t, testAdminToken, 10*time.Second) }

// retryUnavailable repeats call while it fails with codes.Unavailable, for
// up to timeout (a write during an election).
func retryUnavailable(timeout time.Duration, call func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := call()
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// --- clusters ----------------------------------------------------------------

// startCluster starts size nodes n1…n<size> in parallel, each with
// BootstrapExpect size and Join listing every gossip address, and waits
// until they form one cluster in which every node is a voter and ready.
// mod, when not nil, adjusts each configuration.
func startCluster(t testing.TB, size int, mod func(*Config)) []*tnode {
	t.Helper()
	logger := testLogger(t)
	cfgs := make([]Config, size)
	var join []string
	for i := range cfgs {
		cfgs[i] = baseConfig(t, "n"+strconv.Itoa(i+1), logger)
		cfgs[i].BootstrapExpect = size
		cfgs[i].Seed = true
		join = append(join, cfgs[i].GossipAddr)
	}
	nodes := make([]*tnode, size)
	for i := range cfgs {
		cfgs[i].Join = join
		if mod != nil {
			mod(&cfgs[i])
		}
		nodes[i] = newTNode(t, cfgs[i])
	}
	for _, tn := range nodes {
		tn.start()
	}
	waitCluster(t, nodes, size, 0)
	return nodes
}

// waitCluster waits until every node in nodes is ready, agrees on one leader
// among them, and the leader's configuration has the given numbers of voters
// and non-voters, all of them in nodes.
func waitCluster(t testing.TB, nodes []*tnode, voters, nonvoters int) *tnode {
	t.Helper()
	for _, tn := range nodes {
		tn.waitReady(20 * time.Second)
	}
	var leader *tnode
	eventually(t, 20*time.Second, "cluster formed", func() error {
		l, err := agreedLeader(nodes)
		if err != nil {
			return err
		}
		srvs, err := l.n.Store().Servers()
		if err != nil {
			return err
		}
		known := map[string]bool{}
		for _, tn := range nodes {
			known[tn.id] = true
		}
		v, nv := 0, 0
		for _, s := range srvs {
			if !known[s.ID] {
				return fmt.Errorf("configuration has unexpected server %s", s.ID)
			}
			if s.Voter {
				v++
			} else {
				nv++
			}
		}
		if v != voters || nv != nonvoters {
			return fmt.Errorf("configuration %+v has %d voters and %d non-voters, want %d and %d", srvs, v, nv, voters, nonvoters)
		}
		// Every node has cleared Fresh in gossip (its one metadata
		// update after joining is done).
		ms := l.n.gossip.snapshot()
		for id := range known {
			if m, ok := ms[id]; !ok || m.meta.Fresh {
				return fmt.Errorf("%s is still Fresh in the leader's gossip view", id)
			}
		}
		leader = l
		return nil
	})
	return leader
}

// agreedLeader returns the node that every node in nodes names as leader.
func agreedLeader(nodes []*tnode) (*tnode, error) {
	var leaderID string
	for _, tn := range nodes {
		_, id := tn.n.Store().Leader()
		if id == "" {
			return nil, fmt.Errorf("%s knows no leader", tn.id)
		}
		if leaderID != "" && id != leaderID {
			return nil, fmt.Errorf("%s says the leader is %s, another node says %s", tn.id, id, leaderID)
		}
		leaderID = id
	}
	for _, tn := range nodes {
		if tn.id == leaderID {
			if !tn.n.Store().IsLeader() {
				return nil, fmt.Errorf("%s is named leader but is not (yet)", tn.id)
			}
			return tn, nil
		}
	}
	return nil, fmt.Errorf("leader %s is not one of the nodes", leaderID)
}

// split returns the leader and the followers among nodes.
func split(t testing.TB, nodes []*tnode) (*tnode, []*tnode) {
	t.Helper()
	var leader *tnode
	eventually(t, 10*time.Second, "one leader", func() error {
		l, err := agreedLeader(nodes)
		leader = l
		return err
	})
	var followers []*tnode
	for _, tn := range nodes {
		if tn != leader {
			followers = append(followers, tn)
		}
	}
	return leader, followers
}

// without returns nodes less the given ones.
func without(nodes []*tnode, drop ...*tnode) []*tnode {
	var out []*tnode
outer:
	for _, tn := range nodes {
		for _, d := range drop {
			if tn == d {
				continue outer
			}
		}
		out = append(out, tn)
	}
	return out
}

// memberByID returns the member with the given id from a Status answer.
func memberByID(resp *pb.StatusResponse, id string) *pb.Member {
	for _, m := range resp.GetMembers() {
		if m.GetId() == id {
			return m
		}
	}
	return nil
}

// createKey creates a key through tn (retrying while there is no leader)
// and returns the response and the response header.
func createKey(t testing.TB, tn *tnode, name string) (*pb.CreateKeyResponse, metadata.MD) {
	t.Helper()
	var hdr metadata.MD
	var resp *pb.CreateKeyResponse
	err := retryUnavailable(5*time.Second, func() error {
		var err error
		resp, err = tn.keys().CreateKey(adminCtx(t), &pb.CreateKeyRequest{Name: name}, grpc.Header(&hdr))
		return err
	})
	if err != nil {
		t.Fatalf("CreateKey %q through %s: %v", name, tn.id, err)
	}
	return resp, hdr
}
