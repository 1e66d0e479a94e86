// Command tollgate runs a Tollgate node: an OpenAI-compatible LLM gateway
// that keeps its control state in Raft. With no flags it runs a single-node
// cluster in ./tollgate-data.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served only with --pprof-addr
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tollgate/tollgate/node"
)

var version = "dev"

func main() {
	// Everything the node writes (the data dir: Raft log and snapshots,
	// ledger, journal, ratelimit.state, admin token; TLS files it makes)
	// is for its own user only, whatever the shell's umask.
	restrictUmask()
	os.Exit(run(os.Args[1:], os.Stderr))
}

// usage is the help text printed before the flags.
const usage = `Usage: tollgate [flags]

Runs a Tollgate node. With no flags: a single-node cluster in ./tollgate-data,
the OpenAI-compatible API on :4000 and the admin API (for tollctl) on
127.0.0.1:4100. The admin API listens beyond loopback only with TLS, or with
--admin-insecure.

A cluster: start three nodes with --bootstrap-expect 3 and --join listing the
others' gossip addresses (and the same TOLLGATE_ADMIN_TOKEN); add a node to a
running cluster with --join ANY-MEMBER:4300.

On first start the admin token comes from TOLLGATE_ADMIN_TOKEN, or is
generated, printed once and saved to DATA-DIR/admin-token (mode 0600).

Encryption between nodes: --tls-cert, --tls-key and --tls-ca put Raft on
mutual TLS and the admin API on TLS (make the files with "tollgate tls ca"
and "tollgate tls cert"); TOLLGATE_GOSSIP_KEY encrypts gossip. Every node
needs the same CA and gossip key.

Every flag can also be set by the environment variable named in brackets.

Flags:
`

// options are a node's flags: the node.Config they fill, and the raw values
// that finish checks and converts.
type options struct {
	cfg                                   node.Config
	join, pprofAddr, drainDelay, logLevel string
	gossipKey, secretsKey, secretsOldKeys string
	maxBody, attempts                     int64
	adminInsecure, noSeed, showVersion    bool
	console                               consoleOptions
	memory                                memoryFlags
}

func run(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "tls" {
		return runTLS(args[1:], os.Stdout, stderr)
	}
	fs := flag.NewFlagSet("tollgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var o options
	envErrs = nil
	o.define(fs)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if len(envErrs) > 0 {
		fmt.Fprintf(stderr, "tollgate: %s\n", strings.Join(envErrs, "; "))
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate: unexpected argument %q (see tollgate -h)\n", fs.Arg(0))
		return 2
	}
	if o.showVersion {
		fmt.Fprintln(stderr, "tollgate", version)
		return 0
	}
	if err := o.finish(stderr); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	if err := o.console.finish(&o, fs); err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	if o.pprofAddr != "" {
		startPprof(o.pprofAddr, o.cfg.Logger)
	}
	n, err := node.New(o.cfg)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := n.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "tollgate: %v\n", err)
		return 1
	}
	return 0
}

// define declares every flag, each defaulting to its environment variable.
func (o *options) define(fs *flag.FlagSet) {
	str := func(p *string, name, env, def, usage string) {
		fs.StringVar(p, name, envOr(env, def), usage+" ["+env+"]")
	}
	str(&o.cfg.NodeID, "node-id", "TOLLGATE_NODE_ID", "", "node id (default: the id saved in the data dir, else the host name)")
	str(&o.cfg.DataDir, "data-dir", "TOLLGATE_DATA_DIR", "tollgate-data", "directory for the Raft log, snapshots, the admin token, the spend ledger and the rate-limit usage")
	str(&o.cfg.HTTPAddr, "http-addr", "TOLLGATE_HTTP_ADDR", ":4000", "listen address of the OpenAI-compatible API")
	str(&o.cfg.AdminAddr, "admin-addr", "TOLLGATE_ADMIN_ADDR", "127.0.0.1:4100", "listen address of the admin gRPC API; beyond loopback it needs TLS (--tls-cert) or --admin-insecure")
	fs.BoolVar(&o.adminInsecure, "admin-insecure", envBool("TOLLGATE_ADMIN_INSECURE"), "allow the admin API to listen beyond loopback without TLS (plaintext: only on a network you trust) [TOLLGATE_ADMIN_INSECURE]")
	str(&o.cfg.RaftAddr, "raft-addr", "TOLLGATE_RAFT_ADDR", ":4200", "listen address of the Raft transport")
	str(&o.cfg.Raft.LogStore, "raft-log-store", "TOLLGATE_RAFT_LOG_STORE", "bolt", "Raft log store of a NEW data dir: bolt (raft.db) or wal (hashicorp/raft-wal, one fsync per append, less CPU per write; releases before 2026-12-02 cannot read it); an existing data dir keeps its own")
	str(&o.cfg.RaftAdvertise, "raft-advertise", "TOLLGATE_RAFT_ADVERTISE", "", "Raft address other nodes dial (default: raft-addr, 127.0.0.1 if its host is unspecified)")
	str(&o.cfg.GossipAddr, "gossip-addr", "TOLLGATE_GOSSIP_ADDR", ":4300", "listen address of gossip (memberlist, UDP and TCP)")
	str(&o.cfg.GossipAdvertise, "gossip-advertise", "TOLLGATE_GOSSIP_ADVERTISE", "", "gossip address other nodes reach; a host name is resolved at start (default: chosen from the interfaces)")
	str(&o.join, "join", "TOLLGATE_JOIN", "", "comma-separated gossip addresses (host:port) of existing members to join")
	fs.IntVar(&o.cfg.BootstrapExpect, "bootstrap-expect", int(envInt("TOLLGATE_BOOTSTRAP_EXPECT", 0)), "form a new cluster once this many nodes (started with the same value and --join list) have met [TOLLGATE_BOOTSTRAP_EXPECT]")
	fs.DurationVar(&o.cfg.DeadNodeGrace, "dead-node-grace", envDuration("TOLLGATE_DEAD_NODE_GRACE", 10*time.Minute), "how long a node gossip reports dead stays a Raft member before the leader removes it [TOLLGATE_DEAD_NODE_GRACE]")
	str(&o.drainDelay, "drain-delay", "TOLLGATE_DRAIN_DELAY", "auto", "on SIGTERM, how long /readyz reports 503 while the node still serves, so load balancers stop sending; auto: 5s in a cluster, 0 alone")
	fs.DurationVar(&o.cfg.LedgerRetention, "ledger-retention", envDuration("TOLLGATE_LEDGER_RETENTION", 30*24*time.Hour), "how long raw spend records are kept in this node's ledger (totals are kept in the cluster state) [TOLLGATE_LEDGER_RETENTION]")
	str(&o.cfg.PricesFile, "prices", "TOLLGATE_PRICES", "", "price table file replacing the built-in one (the genai-prices JSON format); a deployment's own price overrides both")
	fs.Int64Var(&o.cfg.BudgetOutputCap, "budget-output-cap", envInt("TOLLGATE_BUDGET_OUTPUT_CAP", 4096), "output token limit sent upstream for a request under a budget that sets none (max_tokens, max_completion_tokens or max_output_tokens), and what its budget reservation assumes [TOLLGATE_BUDGET_OUTPUT_CAP]")
	str(&o.pprofAddr, "pprof-addr", "TOLLGATE_PPROF_ADDR", "", "serve Go's /debug/pprof on this address (keep it on loopback); empty: off")
	str(&o.logLevel, "log-level", "TOLLGATE_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	fs.Int64Var(&o.maxBody, "max-body-bytes", envInt("TOLLGATE_MAX_BODY_BYTES", 8<<20), "largest accepted request body in bytes; larger ones get 413 [TOLLGATE_MAX_BODY_BYTES]")
	fs.Int64Var(&o.attempts, "max-attempts", envInt("TOLLGATE_MAX_ATTEMPTS", 3), "attempts per request on a model route: every deployment once, then retries of the retryable ones; a route may set its own [TOLLGATE_MAX_ATTEMPTS]")
	fs.DurationVar(&o.cfg.RetryBackoff, "retry-backoff", envDuration("TOLLGATE_RETRY_BACKOFF", 100*time.Millisecond), "base of the jittered, doubling wait before a deployment is tried again [TOLLGATE_RETRY_BACKOFF]")
	fs.DurationVar(&o.cfg.Cooldown, "cooldown", envDuration("TOLLGATE_COOLDOWN", 5*time.Second), "how long a failing deployment is skipped (doubling per further failure, up to 5m) before one request probes it [TOLLGATE_COOLDOWN]")
	fs.DurationVar(&o.cfg.UpstreamTimeout, "upstream-timeout", envDuration("TOLLGATE_UPSTREAM_TIMEOUT", 10*time.Minute), "default timeout of an upstream call (a stream: until its first byte); a deployment may set its own [TOLLGATE_UPSTREAM_TIMEOUT]")
	fs.IntVar(&o.cfg.MetricsTopKeys, "metrics-top-keys", int(envInt("TOLLGATE_METRICS_TOP_KEYS", 500)), "per-key metric series only for this many keys, those with the most spend; the others are summed under key=\"other\" [TOLLGATE_METRICS_TOP_KEYS]")
	fs.DurationVar(&o.cfg.RequestTimeout, "request-timeout", envDuration("TOLLGATE_REQUEST_TIMEOUT", 10*time.Minute), "how long a request may wait for its answer to begin, over all its attempts and backoffs (a started stream is not cut); 0: only --upstream-timeout per attempt [TOLLGATE_REQUEST_TIMEOUT]")
	fs.DurationVar(&o.cfg.ReadHeaderTimeout, "read-header-timeout", envDuration("TOLLGATE_READ_HEADER_TIMEOUT", 10*time.Second), "how long a client may take to send a request's headers; then the connection is closed [TOLLGATE_READ_HEADER_TIMEOUT]")
	fs.DurationVar(&o.cfg.BodyReadTimeout, "body-read-timeout", envDuration("TOLLGATE_BODY_READ_TIMEOUT", 30*time.Second), "how long a client may take to send a request's whole body; then it gets 408 [TOLLGATE_BODY_READ_TIMEOUT]")
	fs.DurationVar(&o.cfg.DrainTimeout, "drain-timeout", envDuration("TOLLGATE_DRAIN_TIMEOUT", 30*time.Second), "how long in-flight requests may finish on SIGTERM [TOLLGATE_DRAIN_TIMEOUT]")
	fs.IntVar(&o.cfg.MCP.MaxSessionsPerKey, "mcp-max-sessions-per-key", int(envInt("TOLLGATE_MCP_MAX_SESSIONS_PER_KEY", 64)), "MCP sessions one key may hold on this node; opening one more closes the key's least recently used one [TOLLGATE_MCP_MAX_SESSIONS_PER_KEY]")
	fs.DurationVar(&o.cfg.MCP.SessionIdleTimeout, "mcp-session-idle-timeout", envDuration("TOLLGATE_MCP_SESSION_IDLE_TIMEOUT", 30*time.Minute), "close an MCP session after this long without a request [TOLLGATE_MCP_SESSION_IDLE_TIMEOUT]")
	fs.BoolVar(&o.noSeed, "no-seed", envBool("TOLLGATE_NO_SEED"), "on first start, do not create the starter routes (demo, and OpenAI's when OPENAI_API_KEY is set) [TOLLGATE_NO_SEED]")
	str(&o.cfg.TLSCert, "tls-cert", "TOLLGATE_TLS_CERT", "", "PEM certificate of this node, signed by the cluster CA; with --tls-key and --tls-ca: Raft over mutual TLS, admin API over TLS")
	str(&o.cfg.TLSKey, "tls-key", "TOLLGATE_TLS_KEY", "", "PEM private key of --tls-cert")
	str(&o.cfg.TLSCA, "tls-ca", "TOLLGATE_TLS_CA", "", "PEM certificate of the cluster CA: other nodes must present a certificate it signed")
	fs.BoolVar(&o.cfg.UpstreamHTTP2, "upstream-http2", envBool("TOLLGATE_UPSTREAM_HTTP2"), "speak HTTP/2 to HTTPS upstreams that offer it (through Go's net/http) instead of the gateway's HTTP/1.1 client, which costs less CPU per request [TOLLGATE_UPSTREAM_HTTP2]")
	fs.BoolVar(&o.cfg.HTTPTLS, "http-tls", envBool("TOLLGATE_HTTP_TLS"), "serve the OpenAI-compatible API over TLS too, with --tls-cert [TOLLGATE_HTTP_TLS]")
	str(&o.secretsOldKeys, "secrets-old-keys", "TOLLGATE_SECRETS_OLD_KEYS", "", "comma-separated base64 secrets keys being rotated out: values sealed with them still open, and the leader reseals them with --secrets-key")
	str(&o.secretsKey, "secrets-key", "TOLLGATE_SECRETS_KEY", "", "base64 key of 32 bytes that seals provider credentials in the Raft log and snapshots, the same on every node (openssl rand -base64 32); prefer the environment variable")
	str(&o.gossipKey, "gossip-key", "TOLLGATE_GOSSIP_KEY", "", "base64 key of 16, 24 or 32 bytes that encrypts gossip, the same on every node (openssl rand -base64 32); prefer the environment variable, flags show in ps")
	telemetryFlags(fs, &o.cfg.Telemetry)
	o.console.define(fs)
	o.memory.define(fs)
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
}

// finish checks the parsed flags and completes o.cfg from them and from the
// environment.
func (o *options) finish(stderr io.Writer) error {
	cfg := &o.cfg
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("bad --log-level %q: %v", o.logLevel, err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Version = version
	if err := o.checkLimits(); err != nil {
		return err
	}
	if err := o.memory.apply(); err != nil {
		return err
	}
	if err := checkAdminListen(cfg.AdminAddr, cfg.TLSCert != "" && cfg.TLSKey != "" && cfg.TLSCA != "", o.adminInsecure); err != nil {
		return err
	}
	cfg.MaxAttempts = uint32(o.attempts)
	cfg.MaxBodyBytes = o.maxBody
	cfg.DrainDelay = -1
	if o.drainDelay != "auto" {
		d, err := time.ParseDuration(o.drainDelay)
		if err != nil || d < 0 {
			return fmt.Errorf("bad --drain-delay %q: want a duration such as 5s, or auto", o.drainDelay)
		}
		cfg.DrainDelay = d
	}
	for _, a := range strings.Split(o.join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Join = append(cfg.Join, a)
		}
	}
	if err := o.parseKeys(); err != nil {
		return err
	}
	cfg.AdminToken = os.Getenv("TOLLGATE_ADMIN_TOKEN")
	cfg.OpenAIKey = os.Getenv("OPENAI_API_KEY")
	cfg.Seed = !o.noSeed
	cfg.TokenOut = stderr
	return nil
}

// checkLimits refuses sizes, timeouts and counts out of their ranges.
func (o *options) checkLimits() error {
	cfg := &o.cfg
	if o.maxBody <= 0 || cfg.UpstreamTimeout <= 0 || cfg.ReadHeaderTimeout <= 0 || cfg.BodyReadTimeout <= 0 || cfg.DrainTimeout < 0 || cfg.RequestTimeout < 0 {
		return errors.New("--max-body-bytes, --upstream-timeout, --read-header-timeout and --body-read-timeout must be positive, --drain-timeout and --request-timeout not negative")
	}
	if cfg.MetricsTopKeys < 1 {
		return errors.New("--metrics-top-keys must be at least 1")
	}
	if o.attempts < 1 || o.attempts > 10 || cfg.RetryBackoff <= 0 || cfg.Cooldown <= 0 {
		return errors.New("--max-attempts must be 1..10, --retry-backoff and --cooldown positive")
	}
	if cfg.BootstrapExpect < 0 {
		return errors.New("--bootstrap-expect must not be negative")
	}
	return nil
}

// parseKeys decodes the gossip and secrets keys.
func (o *options) parseKeys() error {
	var err error
	if o.cfg.GossipKey, err = node.ParseGossipKey(o.gossipKey); err != nil {
		return fmt.Errorf("--gossip-key: %v", err)
	}
	if o.cfg.SecretsKey, err = node.ParseSecretsKey(o.secretsKey); err != nil {
		return fmt.Errorf("--secrets-key: %v", err)
	}
	for _, s := range strings.Split(o.secretsOldKeys, ",") {
		k, err := node.ParseSecretsKey(s)
		if err != nil {
			return fmt.Errorf("--secrets-old-keys: %v", err)
		}
		if k != nil {
			o.cfg.SecretsOldKeys = append(o.cfg.SecretsOldKeys, k)
		}
	}
	return nil
}

// startPprof serves Go's profiles (http.DefaultServeMux holds the
// /debug/pprof handlers) on addr.
func startPprof(addr string, log *slog.Logger) {
	go func() {
		srv := &http.Server{Addr: addr, ReadHeaderTimeout: 10 * time.Second}
		if err := srv.ListenAndServe(); err != nil {
			log.Error("pprof server", "err", err)
		}
	}()
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// envBool reads a boolean variable: empty is false, and a value that is
// not a boolean is reported.
func envBool(name string) bool {
	s := strings.TrimSpace(os.Getenv(name))
	if s == "" {
		return false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		envErrs = append(envErrs, fmt.Sprintf("%s=%q is not true or false", name, s))
	}
	return v
}

// envErrs collects environment variables whose values do not parse, so that
// a typo is reported instead of silently replaced by the default.
var envErrs []string

func envInt(name string, def int64) int64 {
	s := strings.TrimSpace(os.Getenv(name))
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		envErrs = append(envErrs, fmt.Sprintf("%s=%q is not a whole number", name, s))
		return def
	}
	return v
}

func envDuration(name string, def time.Duration) time.Duration {
	s := strings.TrimSpace(os.Getenv(name))
	if s == "" {
		return def
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		envErrs = append(envErrs, fmt.Sprintf("%s=%q is not a duration (e.g. 30s, 10m)", name, s))
		return def
	}
	return v
}
