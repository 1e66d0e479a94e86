// Package raftstore keeps Tollgate's control state (keys, model routes,
// credentials, admin tokens) in a hashicorp/raft state machine with a
// write-ahead log (raft-wal; raft-boltdb for older data dirs) and file snapshots, and publishes an immutable State after
// every apply for the data plane to read without locks.
package raftstore

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	pb "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// Snapshot defaults: entries are small (a key, a grant) to a few hundred KB
// (a spend report), so every node snapshots after a few thousand of them,
// which bounds both the log on disk and what a restart or a joiner replays.
const (
	DefaultSnapshotThreshold = 8192
	DefaultSnapshotInterval  = 2 * time.Minute
	DefaultTrailingLogs      = 4096
	// DefaultCommitTimeout is how soon a leader with nothing more to send
	// tells followers what it committed (hashicorp/raft: 50 ms). An admin
	// write answers once every live node applied it, so with one caller
	// a write on three nodes took 95 ms at the median at 50 ms, and 15 ms
	// at 5 ms; the price is an empty AppendEntries to each follower every
	// 5–10 ms while idle.
	DefaultCommitTimeout = 5 * time.Millisecond
)

// ErrNotLeader is returned by Apply on a node that is not the leader.
var ErrNotLeader = errors.New("not the raft leader")

// ErrClosed is returned by Apply after Close.
var ErrClosed = errors.New("raft store is closed")

// Config configures a Store.
type Config struct {
	// Dir holds the Raft log (wal/, or raft.db in a data dir of an
	// earlier release) and the snapshots.
	Dir string
	// NodeID is this node's Raft server id.
	NodeID string
	// BindAddr is the TCP address the Raft transport listens on.
	BindAddr string
	// AdvertiseAddr is the address other nodes dial; defaults to BindAddr,
	// which then must not be an unspecified address.
	AdvertiseAddr string
	// Bootstrap makes a node without existing Raft state bootstrap a
	// single-voter cluster of itself.
	Bootstrap bool
	// Logger receives Raft's log lines (at LogLevel and above).
	Logger *slog.Logger
	// LogLevel for Raft's own logging: "debug", "info", "warn", "error".
	// Empty means "warn".
	LogLevel string
	// Timeouts; zero values take Raft's defaults (CommitTimeout:
	// DefaultCommitTimeout). Tests use short ones.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// SnapshotThreshold is how many log entries since the last snapshot
	// trigger one (checked every SnapshotInterval); TrailingLogs is how many
	// entries a snapshot leaves in the log, for followers that lag a little
	// to catch up without a snapshot install. Zero values take
	// DefaultSnapshotThreshold, DefaultSnapshotInterval and
	// DefaultTrailingLogs.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// SnapshotBytes and TrailingBytes count the log in bytes: a snapshot
	// is also taken once the entries since the last one hold SnapshotBytes
	// (or half the last snapshot's size, if more), and leaves at most
	// TrailingBytes of entries. Zero: DefaultSnapshotBytes,
	// DefaultTrailingBytes.
	SnapshotBytes, TrailingBytes int64
	// LogStore is the Raft log store of a new data dir: LogStoreBolt
	// (empty: the default) or LogStoreWAL. A data dir keeps the store it
	// was created with.
	LogStore string
	// WALSegmentBytes is the size of each WAL segment file, preallocated
	// when it is created. Zero: raft-wal's 64 MB.
	WALSegmentBytes int
	// Retention bounds the spend history kept in the state (zero fields:
	// DefaultRetention). Every node must use the same.
	Retention Retention
	// Secrets, when set, opens sealed credential values for the data
	// plane (see Sealer); SealCredential seals new ones with it.
	Secrets *Sealer
	// OnFatal is called, once, when the state machine meets a log entry
	// this release cannot apply (one it cannot decode, or a command type it
	// does not know that is not marked ignorable). The state machine then
	// applies nothing more: the node must stop (log the error and exit) and
	// be upgraded. Nil: the error is logged and the process panics with it.
	OnFatal func(error)
	// TLSServer and TLSClient, when both set, carry Raft over mutual TLS:
	// TLSServer should demand and verify client certificates, TLSClient
	// present this node's certificate and verify the peer's.
	TLSServer, TLSClient *tls.Config
}

// Store is one Raft member with Tollgate's state machine.
type Store struct {
	cfg       Config
	raft      *raft.Raft
	fsm       *fsm
	transport *raft.NetworkTransport
	logs      logStore
	logKind   string
	snaps     *formatSnapshots
	fresh     bool
	// completeAtOpen: the node was the only voter and every command on
	// disk was in the snapshot it restored, so its state was complete
	// before Raft even elected it.
	completeAtOpen bool
	// lastIndexAtOpen is the index of the last command in the log on disk
	// when the store opened: the node is caught up once its State has
	// reached it. (Only commands reach the FSM, so State.Index never
	// reaches a trailing no-op or configuration entry.)
	lastIndexAtOpen uint64
	// gate, when set, decides whether this leader may propose a command
	// type (see SetProposeGate).
	gate atomic.Pointer[func(cmdType string) error]
	// trailingBytes bounds the log a snapshot leaves; stopSizer and
	// sizerDone stop runSizeSnapshots.
	trailingBytes        int64
	stopSizer, sizerDone chan struct{}
	closeSizer           sync.Once
}

// ErrCommandRefused is returned by Apply for a command the propose gate
// refused (typically: not every member supports its type yet).
var ErrCommandRefused = errors.New("command refused")

// SetProposeGate sets a check Apply runs on the leader before proposing a
// command, with the command's type as CommandName names it; an error
// refuses the command (wrapped with ErrCommandRefused). Nil removes it.
func (s *Store) SetProposeGate(gate func(cmdType string) error) {
	if gate == nil {
		s.gate.Store(nil)
		return
	}
	s.gate.Store(&gate)
}

// Open opens (or creates) the Raft store in cfg.Dir and starts Raft.
func Open(cfg Config) (*Store, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("raftstore: NodeID is empty")
	}
	if cfg.AdvertiseAddr == "" {
		cfg.AdvertiseAddr = cfg.BindAddr
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftstore: create dir: %w", err)
	}
	logger := newHCLogger(cfg)

	rc := raftConfig(cfg, logger)

	logs, kind, err := openLogStore(cfg.Dir, logger, cfg.WALSegmentBytes, cfg.LogStore)
	if err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, fsm: newSealedFSM(cfg.Secrets), logs: logs, logKind: kind, trailingBytes: cmp.Or(cfg.TrailingBytes, DefaultTrailingBytes)}
	s.fsm.meter = newLogMeter(cmp.Or(cfg.SnapshotBytes, DefaultSnapshotBytes), int(rc.TrailingLogs))
	s.fsm.setRetention(cfg.Retention.orDefault())
	s.fsm.onFatal = cfg.OnFatal
	if s.fsm.onFatal == nil {
		s.fsm.onFatal = logAndPanic(cfg.Logger)
	}
	ok := false
	defer func() {
		if !ok {
			s.closeResources()
		}
	}()
	files, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, logger)
	if err != nil {
		return nil, fmt.Errorf("raftstore: snapshot store: %w", err)
	}
	snaps := &formatSnapshots{SnapshotStore: files}
	s.snaps = snaps
	if s.transport, err = openTransport(cfg, logger); err != nil {
		return nil, err
	}

	existing, err := raft.HasExistingState(logs, logs, snaps)
	if err != nil {
		return nil, fmt.Errorf("raftstore: check existing state: %w", err)
	}
	s.fresh = !existing
	if s.lastIndexAtOpen, err = lastCommandIndex(logs); err != nil {
		return nil, fmt.Errorf("raftstore: read last index: %w", err)
	}

	if existing {
		s.completeAtOpen, err = completeOnDisk(cfg.NodeID, logs, snaps, s.lastIndexAtOpen)
		if err != nil {
			return nil, fmt.Errorf("raftstore: read configuration: %w", err)
		}
	}
	// Pipelined replication can deadlock shutdown and stall replication in
	// hashicorp/raft (#612); plain AppendEntries are fast enough here.
	s.raft, err = raft.NewRaft(rc, s.fsm, logs, logs, snaps, noPipeline{s.transport})
	if err != nil {
		return nil, fmt.Errorf("raftstore: start raft: %w", err)
	}
	if !existing && cfg.Bootstrap {
		f := s.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter, ID: rc.LocalID, Address: s.transport.LocalAddr(),
		}}})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			_ = s.raft.Shutdown().Error()
			return nil, fmt.Errorf("raftstore: bootstrap: %w", err)
		}
	}
	s.startSizer(snaps, rc)
	ok = true
	return s, nil
}

// raftConfig is hashicorp/raft's default configuration with the timings of cfg that are
// set, and this package's snapshot defaults.
func raftConfig(cfg Config, logger hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = logger
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	}
	rc.CommitTimeout = cmp.Or(cfg.CommitTimeout, DefaultCommitTimeout)
	rc.SnapshotThreshold, rc.SnapshotInterval, rc.TrailingLogs = DefaultSnapshotThreshold, DefaultSnapshotInterval, DefaultTrailingLogs
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	return rc
}

// logAndPanic is the FSM's fatal handler when Config.OnFatal is nil.
func logAndPanic(logger *slog.Logger) func(error) {
	return func(err error) {
		if logger != nil {
			logger.Error("raft state machine stopped", "err", err)
		}
		panic(err)
	}
}

// openTransport listens on cfg.BindAddr (with TLS when configured) and advertises
// cfg.AdvertiseAddr, which must name a reachable IP.
func openTransport(cfg Config, logger hclog.Logger) (*raft.NetworkTransport, error) {
	adv, err := net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr)
	if err != nil {
		return nil, fmt.Errorf("raftstore: advertise address %q: %w", cfg.AdvertiseAddr, err)
	}
	if adv.IP == nil || adv.IP.IsUnspecified() {
		return nil, fmt.Errorf("raftstore: advertise address %q must name a reachable IP; set the Raft advertise address", cfg.AdvertiseAddr)
	}
	// A zero port (BindAddr "127.0.0.1:0") advertises the port actually
	// bound: the listener's own address, which Raft checks is advertisable.
	var advertise net.Addr = adv
	if adv.Port == 0 {
		advertise = nil
	}
	if cfg.TLSServer != nil || cfg.TLSClient != nil {
		layer, err := newTLSStreamLayer(cfg.BindAddr, advertise, cfg.TLSServer, cfg.TLSClient)
		if err != nil {
			return nil, fmt.Errorf("raftstore: listen on %s: %w", cfg.BindAddr, err)
		}
		return raft.NewNetworkTransportWithLogger(layer, 3, 10*time.Second, logger), nil
	}
	t, err := raft.NewTCPTransportWithLogger(cfg.BindAddr, advertise, 3, 10*time.Second, logger)
	if err != nil {
		return nil, fmt.Errorf("raftstore: listen on %s: %w", cfg.BindAddr, err)
	}
	return t, nil
}

func (s *Store) closeResources() {
	if s.transport != nil {
		_ = s.transport.Close()
	}
	if s.logs != nil {
		_ = s.logs.Close()
	}
}

// Close shuts Raft down and closes the log store and transport.
func (s *Store) Close() error {
	s.closeSizer.Do(func() { close(s.stopSizer) })
	<-s.sizerDone
	err := s.raft.Shutdown().Error()
	s.closeResources()
	return err
}

// LogStoreKind names the Raft log store the data dir uses: LogStoreWAL
// or LogStoreBolt.
func (s *Store) LogStoreKind() string { return s.logKind }

// State returns the current published state. It never blocks.
func (s *Store) State() *State { return s.fsm.state.Load() }

// Fresh reports whether the store had no Raft state on disk when opened.
func (s *Store) Fresh() bool { return s.fresh }

// NodeID returns this node's Raft server id.
func (s *Store) NodeID() string { return s.cfg.NodeID }

// Addr returns the address the Raft transport advertises.
func (s *Store) Addr() string { return string(s.transport.LocalAddr()) }

// IsLeader reports whether this node is the Raft leader.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// Leader returns the leader's Raft address and id, empty if none is known.
func (s *Store) Leader() (addr, id string) {
	a, i := s.raft.LeaderWithID()
	return string(a), string(i)
}

// Stats returns Raft's own statistics (state, term, indexes…).
func (s *Store) Stats() map[string]string { return s.raft.Stats() }

// Apply proposes cmd to the cluster and waits until it is applied on this
// node, returning the command's result. The command's time is stamped here
// when unset, so every replica applies the same value. Only the leader can
// apply: elsewhere the error is ErrNotLeader.
func (s *Store) Apply(ctx context.Context, cmd *pb.Command) (proto.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch s.raft.State() {
	case raft.Leader:
	case raft.Shutdown:
		return nil, ErrClosed
	default:
		return nil, ErrNotLeader
	}
	if g := s.gate.Load(); g != nil {
		name := CommandName(cmd)
		if err := (*g)(name); err != nil {
			return nil, fmt.Errorf("raftstore: %s: %w: %w", name, ErrCommandRefused, err)
		}
		if cmd.Actor != nil && (*g)(auditCommand) != nil {
			// A member of an older release would not write the audit
			// record: none does until every member can.
			cmd.Actor = nil
		}
	}
	if cmd.UnixNanos == 0 {
		cmd.UnixNanos = time.Now().UnixNano()
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("raftstore: encode command: %w", err)
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	f := s.raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
			errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return nil, fmt.Errorf("%w: %v", ErrNotLeader, err)
		case errors.Is(err, raft.ErrRaftShutdown):
			return nil, ErrClosed
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return nil, fmt.Errorf("raftstore: apply: %w", context.DeadlineExceeded)
		}
		return nil, fmt.Errorf("raftstore: apply: %w", err)
	}
	res, _ := f.Response().(*applyResult)
	if res == nil {
		return nil, errors.New("raftstore: apply returned no result")
	}
	return res.value, res.err
}

// WaitForIndex blocks until the published state has reached index idx.
func (s *Store) WaitForIndex(ctx context.Context, idx uint64) error {
	return s.fsm.waitIndex(ctx, idx)
}

// WaitReady blocks until this node can serve from an up-to-date state: at
// once for a single-voter cluster whose snapshot held every command on disk
// (see SnapshotForRestart); otherwise once a leader is known and, on the leader, everything committed before it took
// office is applied; on a follower, the node is in the cluster
// configuration and has applied everything the leader has told it is
// committed (at least every command it had on disk when it opened).
func (s *Store) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready, err := s.readyOnce(ctx); ready || err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Store) readyOnce(ctx context.Context) (bool, error) {
	if s.completeAtOpen {
		return true, nil
	}
	if addr, _ := s.Leader(); addr == "" {
		return false, nil
	}
	if s.IsLeader() {
		timeout := 10 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = time.Until(dl)
		}
		return s.raft.Barrier(timeout).Error() == nil, nil
	}
	if !s.inConfiguration() {
		return false, nil
	}
	commit := s.raft.CommitIndex()
	return commit > 0 && s.raft.AppliedIndex() >= commit && s.State().Index >= s.lastIndexAtOpen, nil
}

// lastCommandIndex returns the index of the last command entry in logs, or
// zero when the log holds none.
func lastCommandIndex(logs raft.LogStore) (uint64, error) {
	first, err := logs.FirstIndex()
	if err != nil {
		return 0, err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return 0, err
	}
	for i := last; i >= first && i > 0; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return 0, err
		}
		if l.Type == raft.LogCommand {
			return i, nil
		}
	}
	return 0, nil
}

// SnapshotNow asks Raft to take a snapshot (used by tests and operators).
func (s *Store) SnapshotNow() error { return s.raft.Snapshot().Error() }

func newHCLogger(cfg Config) hclog.Logger {
	level := hclog.LevelFromString(cfg.LogLevel)
	if level == hclog.NoLevel {
		level = hclog.Warn
	}
	opts := &hclog.LoggerOptions{Name: "raft", Level: level}
	if cfg.Logger != nil {
		opts.Output = slogWriter{cfg.Logger}
		opts.DisableTime = true
	} else {
		opts.Output = os.Stderr
	}
	return hclog.New(opts)
}

// slogWriter forwards Raft's formatted log lines to slog.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for _, lv := range []struct {
		prefix string
		level  slog.Level
	}{{"[DEBUG]", slog.LevelDebug}, {"[TRACE]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo}, {"[WARN]", slog.LevelWarn}, {"[ERROR]", slog.LevelError}} {
		if i := strings.Index(msg, lv.prefix); i >= 0 {
			level, msg = lv.level, strings.TrimSpace(msg[i+len(lv.prefix):])
			break
		}
	}
	w.l.Log(context.Background(), level, msg, "component", "raft")
	return len(p), nil
}

// noPipeline turns off pipelined replication.
type noPipeline struct{ *raft.NetworkTransport }

func (noPipeline) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// WaitCaughtUp blocks until this node has applied every entry up to
// target, including the state machine's work on the last command among
// them (Raft counts an entry applied when it hands it over).
func (s *Store) WaitCaughtUp(ctx context.Context, target uint64) error {
	for {
		if s.raft.AppliedIndex() >= target {
			last, err := lastCommandAtOrBelow(s.logs, target)
			if err == nil && s.State().Index >= last {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// lastCommandAtOrBelow returns the index of the last command entry at or
// below target; 0 when the log holds none there (it was compacted into a
// snapshot, which the state already reflects).
func lastCommandAtOrBelow(logs raft.LogStore, target uint64) (uint64, error) {
	first, err := logs.FirstIndex()
	if err != nil {
		return 0, err
	}
	for i := target; i >= first && i > 0; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				return 0, nil
			}
			return 0, err
		}
		if l.Type == raft.LogCommand {
			return i, nil
		}
	}
	return 0, nil
}

// completeOnDisk reports whether nodeID is the only voter of the latest
// configuration on disk and the latest snapshot covers every command in
// the log, so restoring that snapshot yields the whole committed state.
func completeOnDisk(nodeID string, logs raft.LogStore, snaps raft.SnapshotStore, lastCommand uint64) (bool, error) {
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return false, err
	}
	snap := metas[0]
	if lastCommand > snap.Index {
		return false, nil
	}
	cfg := snap.Configuration
	first, err := logs.FirstIndex()
	if err != nil {
		return false, err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return false, err
	}
	for i := last; i >= max(first, 1) && i > snap.Index; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			return false, err
		}
		if l.Type == raft.LogConfiguration {
			cfg = raft.DecodeConfiguration(l.Data)
			break
		}
	}
	voters := 0
	self := false
	for _, srv := range cfg.Servers {
		if srv.Suffrage == raft.Voter {
			voters++
			self = self || string(srv.ID) == nodeID
		}
	}
	return voters == 1 && self, nil
}

// SnapshotForRestart takes a snapshot of what this node applied, whether
// leader or follower, so that its next start restores it instead of
// replaying the log; a single voter is then also ready without waiting for
// an election.
func (s *Store) SnapshotForRestart() {
	_ = s.raft.Snapshot().Error() // ErrNothingNewToSnapshot is fine too
}
