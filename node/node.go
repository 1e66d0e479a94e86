// Package node composes a Tollgate node: the Raft store, the data plane
// (HTTP), the admin API (gRPC), and their start and stop order.
package node

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tollgate/tollgate/ledger"
	"github.com/tollgate/tollgate/node/admin"
	"github.com/tollgate/tollgate/node/budget"
	mcpgw "github.com/tollgate/tollgate/node/mcp"
	"github.com/tollgate/tollgate/node/proxy"
	"github.com/tollgate/tollgate/node/telemetry"
	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
	"github.com/tollgate/tollgate/raftstore"
	"github.com/tollgate/tollgate/ratelimit"
)

// Config configures a node. Zero values take the documented defaults.
type Config struct {
	// NodeID names this node in the cluster. Empty: the id saved in the data
	// dir, else the host name.
	NodeID string
	// DataDir holds the Raft log, snapshots, the node id and the admin
	// token. Default "tollgate-data".
	DataDir string
	// HTTPAddr is the data plane's listen address. Default ":4000".
	HTTPAddr string
	// AdminAddr is the admin gRPC API's listen address. Default ":4100".
	AdminAddr string
	// RaftAddr is the Raft transport's listen address. Default ":4200".
	RaftAddr string
	// RaftAdvertise is the Raft address other nodes dial. Default: RaftAddr,
	// with 127.0.0.1 when its host is empty or unspecified.
	RaftAdvertise string
	// GossipAddr is the gossip (memberlist, UDP and TCP) listen address.
	// Default ":4300".
	GossipAddr string
	// GossipAdvertise is the gossip address other nodes reach; its host may
	// be a name, resolved at start. Default: memberlist's choice.
	GossipAdvertise string
	// Join lists gossip addresses of existing members to join.
	Join []string
	// BootstrapExpect, when above 1, forms a new cluster once that many
	// nodes without Raft state have met through gossip.
	BootstrapExpect int
	// DeadNodeGrace is how long a member gossip considers dead stays in
	// Raft before the leader removes it. Default 10m.
	DeadNodeGrace time.Duration
	// DrainDelay is how long /readyz reports 503 on shutdown while the node
	// still serves, so that load balancers stop sending before connections
	// close. Negative: 5s when the cluster has other members, else none.
	DrainDelay time.Duration
	// FastGossip uses memberlist's local-network timings (tests).
	FastGossip bool
	// LedgerRetention is how long raw spend records are kept. Default 30
	// days.
	LedgerRetention time.Duration
	// PricesFile, when set, replaces the built-in price table (same JSON
	// format as the embedded genai-prices data).
	PricesFile string
	// BudgetOutputCap is the output token limit a request under a budget
	// that sets none is sent with, and what its reservation assumes.
	// Default 4096.
	BudgetOutputCap int64
	// AdminToken is used on first start (from TOLLGATE_ADMIN_TOKEN); when
	// empty a token is generated and printed once (not on a node that joins
	// an existing cluster: it uses the cluster's tokens).
	AdminToken string
	// MaxBodyBytes limits request bodies. Default 8 MiB.
	MaxBodyBytes int64
	MCP          MCPConfig // bounds on this node's MCP client sessions (mcp_wiring.go)
	// UpstreamTimeout bounds an upstream call, RequestTimeout a request's
	// attempts together (see proxy.Config).
	UpstreamTimeout, RequestTimeout time.Duration
	// MetricsTopKeys bounds the per-key metric series (see
	// proxy.MetricsConfig); default 500.
	MetricsTopKeys int
	// ReadHeaderTimeout bounds reading a request's headers (default 10s);
	// BodyReadTimeout its body (see proxy.Config).
	ReadHeaderTimeout, BodyReadTimeout time.Duration
	// UpstreamHTTP2 speaks HTTP/2 to HTTPS upstreams that offer it,
	// through net/http, instead of the gateway's HTTP/1.1 client.
	UpstreamHTTP2 bool
	// MaxAttempts, RetryBackoff and Cooldown tune retries and deployment
	// cooldowns (see proxy.Config); zero values take its defaults.
	MaxAttempts  uint32
	RetryBackoff time.Duration
	Cooldown     time.Duration
	// DrainTimeout bounds how long in-flight requests may finish on
	// shutdown. Default 30s.
	DrainTimeout time.Duration
	// Seed adds the starter routes on first start: OpenAI routes when
	// OpenAIKey is set, and the offline "demo" route.
	Seed      bool
	OpenAIKey string
	Logger    *slog.Logger
	// TokenOut receives the one-time admin token banner on first start.
	// Default os.Stderr.
	TokenOut io.Writer
	// TLSCert, TLSKey and TLSCA (PEM files; all three or none) turn on TLS
	// between nodes and on the admin API: Raft runs over mutual TLS with
	// certificates the cluster CA signed, nodes call each other's admin API
	// over TLS, and the admin API serves TLS to tollctl.
	TLSCert, TLSKey, TLSCA string
	// HTTPTLS serves the data plane over TLS too, with the same
	// certificate (needs TLSCert).
	HTTPTLS bool
	// SecretsKey (32 bytes) seals credential values before they enter the
	// Raft log, so the log, snapshots and backups hold them encrypted;
	// every node needs the same key. Empty: stored in the clear.
	SecretsKey []byte
	// SecretsOldKeys open values sealed with keys being rotated out; the
	// leader reseals them with SecretsKey.
	SecretsOldKeys [][]byte
	// GossipKey (16, 24 or 32 bytes) encrypts and authenticates gossip;
	// every node needs the same key. Empty: gossip in the clear.
	GossipKey []byte
	// Version is the release, told to the other nodes through gossip.
	Version string
	// Raft tuning, for tests; zero takes the defaults.
	Raft RaftTuning
	// Telemetry configures traces and request logs (telemetry_wiring.go).
	Telemetry TelemetryConfig
	Console   ConsoleConfig // the web console (console_wiring.go)

	// lazyTokenRegistration, for tests: a follower registers its admin
	// token only when a write carrying it is forwarded.
	lazyTokenRegistration bool
	// maxVoters, for tests: the most Raft voters; zero takes maxVoters.
	maxVoters int
	// tlsReloadInterval, for tests: how often the TLS files are checked
	// for changes; zero takes tlsReloadInterval.
	tlsReloadInterval time.Duration
	// rateSaveInterval, for tests: how often the rate-limit usage is
	// saved; zero takes rateSaveInterval.
	rateSaveInterval time.Duration
}

// RaftTuning holds Raft timings (tests shorten them), the log level and
// the log store of a new data dir (raftstore.Config.LogStore).
type RaftTuning struct {
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout, CommitTimeout time.Duration
	LogLevel, LogStore                                                   string
}

// Node is a running Tollgate node.
type Node struct {
	cfg        Config
	log        *slog.Logger
	store      *raftstore.Store
	fatal      chan error // the state machine stopped (raftstore Config.OnFatal)
	httpLn     net.Listener
	adminLn    net.Listener
	httpSrv    *http.Server
	grpcSrv    *grpc.Server
	adminToken string
	tls        *clusterTLS // nil: no TLS
	probes     prober      // of gossip members' Raft addresses
	ready      atomic.Bool
	draining   atomic.Bool
	closeOnce  sync.Once

	loopsMu     sync.Mutex
	stopLoops   func() // set by Run: ends its background loops and waits for them
	loopsClosed bool   // Close ran: Run must not start loops

	limiter          *ratelimit.Limiter
	ledger           *ledger.Ledger
	budgets          *budget.Manager
	pricing          pricing
	gossip           *gossip
	meta             memberMeta // this node's gossip metadata as at start; gossip holds the current one
	bootstrapPending atomic.Bool
	fresh            atomic.Bool // no Raft state yet, as told to gossip
	rateSaveMu       sync.Mutex  // one saveRateState at a time; guards rateFile
	rateFile         *os.File    // ratelimit.state, open once saved
	peers            peers
	reach            reachCache // whether this node reaches a majority of the voters, recently
	metrics          *clusterMetrics
	tel              *telemetry.Telemetry
	accessLog        *os.File       // --access-log's file; nil without
	mcp              *mcpgw.Gateway // MCP gateway (mcp_wiring.go)
}

// New opens the node's data dir and Raft store and binds its listeners; Run
// serves.
func New(cfg Config) (*Node, error) {
	applyDefaults(&cfg)
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	n := &Node{cfg: cfg, log: cfg.Logger}
	var err error
	if n.cfg.NodeID, err = loadNodeID(cfg.DataDir, cfg.NodeID); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			n.closeOpened()
		}
	}()
	for _, open := range []func() error{n.openListeners, n.openControl, n.openSpend} {
		if err := open(); err != nil {
			return nil, err
		}
	}
	dataPlane, mux, err := n.newHTTPServer()
	if err != nil {
		return nil, err
	}
	n.mountMCP(mux, n.newAdminServer(dataPlane))
	if err := n.openConsole(); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

// closeOpened closes what a failed New opened.
func (n *Node) closeOpened() {
	n.closeListeners()
	if n.store != nil {
		_ = n.store.Close()
	}
	if n.gossip != nil {
		_ = n.gossip.ml.Shutdown()
	}
	if n.ledger != nil {
		_ = n.ledger.Close()
	}
	n.closeTelemetry()
}

// openListeners loads the cluster TLS material, checks the settings that
// depend on it and binds the data-plane and admin listeners.
func (n *Node) openListeners() error {
	cfg := n.cfg
	var err error
	if n.tls, err = loadClusterTLS(cfg.TLSCert, cfg.TLSKey, cfg.TLSCA); err != nil {
		return err
	}
	if cfg.HTTPTLS && n.tls == nil {
		return errors.New("--http-tls needs --tls-cert, --tls-key and --tls-ca")
	}
	if len(cfg.SecretsOldKeys) > 0 && len(cfg.SecretsKey) == 0 {
		return errors.New("--secrets-old-keys needs --secrets-key: the key values are resealed with")
	}
	if n.tls != nil && len(cfg.GossipKey) == 0 {
		// Membership comes from gossip: without the key, anyone who
		// reaches the gossip port could be added as a Raft voter, and TLS
		// would protect nothing.
		return errors.New("TLS needs a gossip key too (TOLLGATE_GOSSIP_KEY, the same on every node; openssl rand -base64 32): without it anyone who reaches the gossip port can join the cluster")
	}
	n.peers.creds = n.tls.peerCredentials()
	if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return fmt.Errorf("data plane listen: %w", err)
	}
	if cfg.HTTPTLS {
		n.httpLn = tls.NewListener(n.httpLn, n.tls.data)
	}
	if n.adminLn, err = net.Listen("tcp", cfg.AdminAddr); err != nil {
		return fmt.Errorf("admin listen: %w", err)
	}
	return nil
}

// openControl opens the Raft store, loads the admin token and joins gossip
// with this node's metadata.
func (n *Node) openControl() error {
	cfg := n.cfg
	adv, err := advertiseAddr(cfg.RaftAddr, cfg.RaftAdvertise)
	if err != nil {
		return err
	}
	single := len(cfg.Join) == 0 && cfg.BootstrapExpect <= 1
	rcfg, err := n.raftConfig(adv, single)
	if err != nil {
		return err
	}
	if n.store, err = raftstore.Open(rcfg); err != nil {
		return err
	}
	if n.adminToken, err = n.loadAdminToken(!single && cfg.BootstrapExpect <= 1); err != nil {
		return err
	}
	advHost, _, _ := net.SplitHostPort(adv)
	n.meta = memberMeta{ID: n.cfg.NodeID, HTTP: reachable(n.httpLn.Addr().String(), advHost),
		Admin: reachable(n.adminLn.Addr().String(), advHost), Raft: n.store.Addr(),
		Expect: cfg.BootstrapExpect, Fresh: n.store.Fresh(), Version: cfg.Version, Cmds: commandsMeta(),
		Snap: raftstore.StreamedSnapshotFormat}
	n.fresh.Store(n.meta.Fresh)
	n.bootstrapPending.Store(n.store.Fresh() && cfg.BootstrapExpect > 1)
	n.limiter = ratelimit.New(ratelimit.Config{NodeID: n.cfg.NodeID})
	n.restoreRateState()
	n.gossip, err = newGossip(gossipConfig{NodeID: n.cfg.NodeID, BindAddr: cfg.GossipAddr,
		AdvertiseAddr: cfg.GossipAdvertise, Meta: n.meta, Limiter: n.limiter, Fast: cfg.FastGossip, Logger: cfg.Logger,
		Key: cfg.GossipKey})
	return err
}

// raftConfig is the Raft store's configuration for this node.
func (n *Node) raftConfig(adv string, single bool) (raftstore.Config, error) {
	cfg := n.cfg
	rcfg := raftstore.Config{
		Dir: filepath.Join(cfg.DataDir, "raft"), NodeID: n.cfg.NodeID,
		BindAddr: cfg.RaftAddr, AdvertiseAddr: adv, Bootstrap: single,
		Logger: cfg.Logger, LogLevel: cfg.Raft.LogLevel, LogStore: cfg.Raft.LogStore,
		HeartbeatTimeout: cfg.Raft.HeartbeatTimeout, ElectionTimeout: cfg.Raft.ElectionTimeout,
		LeaderLeaseTimeout: cfg.Raft.LeaderLeaseTimeout, CommitTimeout: cfg.Raft.CommitTimeout,
	}
	if n.tls != nil {
		rcfg.TLSServer, rcfg.TLSClient = n.tls.peerServer, n.tls.peerClient
	}
	if len(cfg.SecretsKey) > 0 {
		var err error
		if rcfg.Secrets, err = raftstore.NewSealer(cfg.SecretsKey, cfg.SecretsOldKeys...); err != nil {
			return rcfg, err
		}
	}
	// A log entry this release cannot apply stops the node (Run returns
	// the error) instead of letting it serve a state that forked.
	n.fatal = make(chan error, 1)
	rcfg.OnFatal = func(err error) {
		select {
		case n.fatal <- err:
		default:
		}
	}
	return rcfg, nil
}

// openSpend loads the price table, opens the ledger and starts the budget
// manager.
func (n *Node) openSpend() error {
	var err error
	if n.pricing.table, err = loadPrices(n.cfg.PricesFile); err != nil {
		return err
	}
	if n.ledger, err = ledger.Open(ledger.Config{Dir: filepath.Join(n.cfg.DataDir, "ledger"), NodeID: n.cfg.NodeID,
		Retention: n.cfg.LedgerRetention, Logger: n.cfg.Logger}); err != nil {
		return fmt.Errorf("open ledger: %w", err)
	}
	if err := n.seedSpendSeq(); err != nil {
		return err
	}
	n.budgets = n.newBudgets()
	return nil
}

// newHTTPServer builds the metrics registry, the data plane and the HTTP
// server around them (health, readiness and metrics beside the API).
func (n *Node) newHTTPServer() (*proxy.Handler, *http.ServeMux, error) {
	cfg := n.cfg
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	deployments := n.registerClusterMetrics(reg)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_ledger_apply_backlog_bytes",
		Help: "Spend records journalled but not yet in Pebble (bytes); grows while Pebble is stalled"},
		func() float64 { _, b, _ := n.ledger.ApplyBacklog(); return float64(b) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tollgate_ledger_apply_queue_full_total",
			Help: "Times requests waited because the ledger's apply queue was full"},
			func() float64 { _, _, w := n.ledger.ApplyBacklog(); return float64(w) }))
	metrics := proxy.NewMetricsWith(reg, proxy.MetricsConfig{TopKeys: cfg.MetricsTopKeys, KeyLive: n.keyLive})
	pcfg := proxy.Config{
		State: n.store, MaxBodyBytes: cfg.MaxBodyBytes, UpstreamTimeout: cfg.UpstreamTimeout,
		BodyReadTimeout: cfg.BodyReadTimeout, RequestTimeout: cfg.RequestTimeout, Ready: n.ready.Load,
		Recorders: []proxy.Recorder{ledgerRecorder{n.ledger, n.cfg.NodeID, cfg.Logger}, metrics, deployments},
		Pricing:   n.pricing, Budgets: n.budgets, Limiter: n.limiter, OutputCap: cfg.BudgetOutputCap, Logger: cfg.Logger,
		UpstreamHTTP2: cfg.UpstreamHTTP2,
		MaxAttempts:   cfg.MaxAttempts, RetryBackoff: cfg.RetryBackoff, Cooldown: cfg.Cooldown,
	}
	if err := n.wireTelemetry(&pcfg, reg); err != nil {
		return nil, nil, err
	}
	dataPlane := proxy.New(pcfg)
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", n.serveReadyz)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})) // exemplars need OpenMetrics
	mux.Handle("/", dataPlane)
	n.httpSrv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: cmp.Or(cfg.ReadHeaderTimeout, 10*time.Second),
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return dataPlane, mux, nil
}

// newAdminServer builds the admin gRPC server: the admin, cluster and spend
// services behind authentication and forwarding to the leader.
func (n *Node) newAdminServer(dataPlane *proxy.Handler) *admin.Server {
	n.store.SetProposeGate(n.commandGate)
	n.store.SetPeerSnapshotFormat(n.peerSnapshotFormat)
	adm := admin.New(admin.Config{Store: n.store, BootstrapToken: n.adminToken, Logger: n.cfg.Logger,
		Prices: n.pricing.apiPrice, TestModel: dataPlane.TestModel, Health: dataPlane.DeploymentHealth, NodeID: n.cfg.NodeID})
	opts := append(adminServerOptions(),
		grpc.ChainUnaryInterceptor(adm.UnaryInterceptor(), n.forwardInterceptor),
		grpc.ChainStreamInterceptor(adm.StreamInterceptor()),
		grpc.MaxRecvMsgSize(256<<20), grpc.MaxSendMsgSize(256<<20),
	)
	if n.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(n.tls.admin)))
	}
	n.grpcSrv = grpc.NewServer(opts...)
	adm.Register(n.grpcSrv)
	pb.RegisterClusterServiceServer(n.grpcSrv, &clusterAPI{n: n})
	pb.RegisterSpendServiceServer(n.grpcSrv, &spendAPI{n: n})
	return adm
}

func applyDefaults(c *Config) {
	if c.DataDir == "" {
		c.DataDir = "tollgate-data"
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = ":4000"
	}
	if c.AdminAddr == "" {
		c.AdminAddr = ":4100"
	}
	if c.RaftAddr == "" {
		c.RaftAddr = ":4200"
	}
	if c.GossipAddr == "" {
		c.GossipAddr = ":4300"
	}
	if c.DeadNodeGrace <= 0 {
		c.DeadNodeGrace = 10 * time.Minute
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.TokenOut == nil {
		c.TokenOut = os.Stderr
	}
}

// advertiseAddr picks the Raft address to advertise.
func advertiseAddr(bind, adv string) (string, error) {
	if adv != "" {
		return adv, nil
	}
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return "", fmt.Errorf("raft address %q: %w", bind, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// reachable returns addr with an unspecified host replaced by host.
func reachable(addr, host string) string {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
		h = host
	}
	return net.JoinHostPort(h, port)
}

// loadNodeID returns the node id: the configured one, else the one saved
// in the data dir, else the host name; it saves the result.
func loadNodeID(dir, configured string) (string, error) {
	path := filepath.Join(dir, "node-id")
	saved, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read node id: %w", err)
	}
	id := strings.TrimSpace(configured)
	switch {
	case id == "" && len(saved) > 0:
		return strings.TrimSpace(string(saved)), nil
	case id == "":
		if id, err = os.Hostname(); err != nil || id == "" {
			id = "node-" + randomToken(4)
		}
	case len(saved) > 0 && strings.TrimSpace(string(saved)) != id:
		return "", fmt.Errorf("data dir %s belongs to node %q, not %q", dir, strings.TrimSpace(string(saved)), id)
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save node id: %w", err)
	}
	return id, nil
}

// loadAdminToken returns the admin token saved in the data dir, or on
// first start the configured or a generated one, which it saves (0600) and,
// when generated, prints once.
func (n *Node) loadAdminToken(joining bool) (string, error) {
	path := filepath.Join(n.cfg.DataDir, "admin-token")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	tok, generated := n.cfg.AdminToken, false
	if tok == "" && joining {
		n.log.Info("joining an existing cluster without TOLLGATE_ADMIN_TOKEN: use the cluster's admin token")
		return "", nil
	}
	if tok == "" {
		tok, generated = "tga-"+randomToken(24), true
	}
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save admin token: %w", err)
	}
	if generated {
		fmt.Fprintf(n.cfg.TokenOut, "\nTollgate admin token (shown once; saved to %s):\n\n    export TOLLGATE_TOKEN=%s\n\n", path, tok)
	}
	return tok, nil
}

func randomToken(nbytes int) string {
	b := make([]byte, nbytes)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// HTTPAddr returns the data plane's bound address.
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// AdminAddr returns the admin API's bound address.
func (n *Node) AdminAddr() string { return n.adminLn.Addr().String() }

// Store returns the node's Raft store.
func (n *Node) Store() *raftstore.Store { return n.store }

// keyLive reports whether a key exists and is not revoked (for the per-key
// metrics).
func (n *Node) keyLive(id string) bool {
	k := n.store.State().KeyByID(id) // the view: no decode
	return k != nil && !k.Revoked
}

// Ready reports whether the node serves traffic (what /readyz says).
func (n *Node) Ready() bool { return n.ready.Load() && !n.draining.Load() }

func (n *Node) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	if !n.Ready() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if n.ledger.Congested() {
		http.Error(w, "not ready: the spend ledger is behind (Pebble is stalled, a slow disk?)", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// Run serves until ctx is done, then drains in-flight requests (bounded
// by DrainTimeout) and closes the node.
func (n *Node) Run(ctx context.Context) error {
	errc := make(chan error, 2)
	// The background loops run until shutdown (after the drain) or Close stops them; both
	// wait for them to return before the resources they use close.
	var loops sync.WaitGroup
	mctx, stopMembership := context.WithCancel(context.Background())
	readyCtx, stopReady := context.WithCancel(ctx)
	stopLoops := sync.OnceFunc(func() {
		stopMembership()
		stopReady()
		done := make(chan struct{})
		go func() { loops.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(loopStopTimeout): // a gossip join dialling a silent address
			n.log.Warn("background loops still running at shutdown", "waited", loopStopTimeout)
		}
	})
	defer stopLoops()
	n.loopsMu.Lock()
	if n.loopsClosed {
		n.loopsMu.Unlock()
		return errors.New("node: Run after Close")
	}
	n.stopLoops = stopLoops
	loops.Go(func() { n.joinLoop(mctx) })
	loops.Go(func() { n.runMembership(mctx) })
	loops.Go(func() { n.runSpendReports(mctx) })
	loops.Go(func() { n.gossip.runRateGossip(mctx, n.cfg.NodeID) })
	loops.Go(func() { n.runRateStateSaves(mctx) })
	loops.Go(func() { n.releaseMemory(mctx, 5*time.Second, 32<<20) }) // RSS back within ~5 s of a burst (e2e/memory_test.go)
	loops.Go(func() { n.metrics.watchLeader(mctx, 250*time.Millisecond) })
	loops.Go(func() { n.runMCP(mctx) })
	if n.tls != nil {
		loops.Go(func() { n.watchTLS(mctx) })
	}
	loops.Go(func() { n.becomeReady(readyCtx) })
	n.loopsMu.Unlock()
	go func() {
		if err := n.httpSrv.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("data plane: %w", err)
		}
	}()
	go func() {
		if err := n.grpcSrv.Serve(n.adminLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			errc <- fmt.Errorf("admin API: %w", err)
		}
	}()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	case err := <-n.fatal:
		n.log.Error("stopping: the replicated state cannot be applied by this release; upgrade this node", "err", err)
		runErr = fmt.Errorf("raft state machine stopped: %w", err)
	}
	n.shutdown(stopLoops)
	return runErr
}

// loopStopTimeout bounds the wait for Run's background loops at shutdown. They return as
// soon as their context ends, except for a gossip join still dialling (TCPTimeout).
const loopStopTimeout = 10 * time.Second

// joinLoop contacts the --join addresses until a member other than this
// node is known (the list may name this node itself, which alone does not
// make a cluster).
func (n *Node) joinLoop(ctx context.Context) {
	if len(n.cfg.Join) == 0 {
		return
	}
	backoff := 200 * time.Millisecond
	for {
		k, err := n.gossip.join(n.cfg.Join)
		if n.gossip.ml.NumMembers() > 1 {
			n.log.Info("joined the cluster through gossip", "contacted", k, "members", n.gossip.ml.NumMembers())
			return
		}
		n.log.Warn("no other member reached through --join yet; retrying", "join", n.cfg.Join, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// becomeReady waits until the store has caught up, finishes first-start
// setup on the leader, and then turns /readyz on.
func (n *Node) becomeReady(ctx context.Context) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := n.store.WaitReady(wctx)
		cancel()
		if err == nil {
			break
		}
		n.log.Warn("waiting for the raft store to catch up", "err", err)
	}
	if ctx.Err() != nil {
		return
	}
	n.catchUp(ctx)
	if ctx.Err() != nil {
		return
	}
	if n.store.IsLeader() {
		if err := n.firstStartSetup(ctx); err != nil {
			n.log.Error("first-start setup failed", "err", err)
		}
	} else if !n.cfg.lazyTokenRegistration {
		// The token this node printed must work once it is ready. On a
		// failure the membership loop retries, and a write carrying the
		// token registers it first (forwardInterceptor).
		if err := n.registerAdminToken(ctx); err != nil {
			n.log.Warn("register admin token", "err", err)
		}
	}
	n.ready.Store(true)
	n.log.Info("tollgate ready", "node", n.cfg.NodeID, "http", n.HTTPAddr(), "admin", n.AdminAddr(), "raft", n.store.Addr())
}

// shutdown turns /readyz off and keeps serving for the drain delay, so the
// load balancer stops sending; a leader hands leadership over meanwhile.
// Then in-flight requests and streams finish within DrainTimeout, the node
// leaves gossip, and the admin API and Raft stop.
func (n *Node) shutdown(stopMembership func()) {
	n.draining.Store(true)
	n.log.Info("draining", "node", n.cfg.NodeID)
	delay := n.cfg.DrainDelay
	if delay < 0 {
		delay = 0
		if srvs, err := n.store.Servers(); err == nil && len(srvs) > 1 {
			delay = 5 * time.Second
		}
	}
	transferred := make(chan struct{})
	go func() {
		defer close(transferred)
		if n.store.IsLeader() {
			if srvs, err := n.store.Servers(); err == nil && len(srvs) > 1 {
				if err := n.store.TransferLeadership(); err != nil {
					n.log.Warn("leadership transfer", "err", err)
				} else {
					n.log.Info("handed leadership over")
				}
			}
		}
	}()
	time.Sleep(delay)
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.DrainTimeout)
	defer cancel()
	if err := n.httpSrv.Shutdown(ctx); err != nil {
		n.log.Warn("drain timed out; closing remaining connections", "err", err)
		_ = n.httpSrv.Close()
	}
	select {
	case <-transferred:
	case <-ctx.Done():
	}
	stopMembership()
	// The requests are done: what they counted is saved for the next start.
	if err := n.saveRateState(); err != nil {
		n.log.Warn("cannot save the rate-limit usage; the next start will not count it", "err", err)
	}
	// Report what this node spent while it still can reach the leader.
	fctx, fcancel := context.WithTimeout(context.Background(), 3*time.Second)
	n.flushSpend(fctx)
	fcancel()
	n.gossip.changeMeta(func(m *memberMeta) { m.Leaving = true })
	n.gossip.leave(time.Second)
	n.store.SnapshotForRestart()
	done := make(chan struct{})
	go func() { n.grpcSrv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		n.grpcSrv.Stop()
	}
	n.Close()
}

// Close stops everything at once, without draining.
func (n *Node) Close() {
	n.closeOnce.Do(func() {
		n.loopsMu.Lock()
		n.loopsClosed = true
		stopLoops := n.stopLoops
		n.loopsMu.Unlock()
		if stopLoops != nil {
			stopLoops() // before the store, ledger and gossip they use close
		}
		n.closeHTTP()
		n.grpcSrv.Stop()
		n.gossip.shutdown()
		n.peers.close()
		n.mcp.Close()
		n.closeRateState()
		if err := n.ledger.Close(); err != nil {
			n.log.Warn("ledger close", "err", err)
		}
		if err := n.store.Close(); err != nil {
			n.log.Warn("raft shutdown", "err", err)
		}
		n.closeTelemetry()
	})
}

func (n *Node) closeListeners() {
	for _, ln := range []net.Listener{n.httpLn, n.adminLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}
