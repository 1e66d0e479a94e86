package main

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	tollgatev1 "github.com/tollgate/tollgate/proto/tollgate/v1"
)

// clients bundles the admin API stubs over one connection.
type clients struct {
	keys    tollgatev1.KeyServiceClient
	models  tollgatev1.ModelServiceClient
	creds   tollgatev1.CredentialServiceClient
	cluster tollgatev1.ClusterServiceClient
	teams   tollgatev1.TeamServiceClient
	spend   tollgatev1.SpendServiceClient
	users   tollgatev1.UserServiceClient
	audit   tollgatev1.AuditServiceClient
}

// Retry timing for calls that fail with codes.Unavailable: a node
// restarting, or a Raft election in progress. noLeaderRetry bounds the
// retries of a node's "no leader" answer.
const (
	retryBaseDelay = 100 * time.Millisecond
	retryMaxDelay  = time.Second
	noLeaderRetry  = 800 * time.Millisecond
)

// mdRequestID is the metadata key of a call's request id, the same on
// every retry of the call.
const mdRequestID = "x-tollgate-request-id"

// secretSeedLen is how many random bytes a key secret is made of.
const secretSeedLen = 30

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// fixSecretSeed draws the random part of a new key secret here, once, so
// that every attempt of a create or rotate asks for the same secret.
func fixSecretSeed(req any) {
	var seed *[]byte
	switch r := req.(type) {
	case *tollgatev1.CreateKeyRequest:
		seed = &r.SecretSeed
	case *tollgatev1.RotateKeyRequest:
		seed = &r.SecretSeed
	case *tollgatev1.CreateUserRequest:
		seed = &r.TokenSeed
	case *tollgatev1.RotateUserRequest:
		seed = &r.TokenSeed
	default:
		return
	}
	if len(*seed) == 0 {
		*seed = make([]byte, secretSeedLen)
		_, _ = crand.Read(*seed)
	}
}

// api opens the connection on first use. The connection is lazy: nothing is
// dialed until the first call, so connection failures surface as call errors.
func (a *app) api() (*clients, error) {
	if a.conn == nil {
		creds, err := a.transportCredentials()
		if err != nil {
			return nil, err
		}
		conn, err := grpc.NewClient(a.addr,
			grpc.WithTransportCredentials(creds),
			grpc.WithPerRPCCredentials(bearerToken(a.token)),
			grpc.WithUserAgent("tollctl/"+buildVersion()),
			// Reconnect to a restarting node as often as calls are retried,
			// rather than after gRPC's default backoff of up to two minutes.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff: backoff.Config{
					BaseDelay: retryBaseDelay, Multiplier: 1.6, Jitter: 0.2, MaxDelay: retryMaxDelay,
				},
				MinConnectTimeout: 20 * time.Second, // gRPC's default
			}),
			// Retries run outermost, so the lagging check sees each attempt.
			grpc.WithChainUnaryInterceptor(a.retryUnavailable, a.warnLagging),
		)
		if err != nil {
			return nil, fmt.Errorf("invalid --addr %q: %v", a.addr, err)
		}
		a.conn = conn
	}
	return &clients{
		keys:    tollgatev1.NewKeyServiceClient(a.conn),
		models:  tollgatev1.NewModelServiceClient(a.conn),
		creds:   tollgatev1.NewCredentialServiceClient(a.conn),
		cluster: tollgatev1.NewClusterServiceClient(a.conn),
		teams:   tollgatev1.NewTeamServiceClient(a.conn),
		spend:   tollgatev1.NewSpendServiceClient(a.conn),
		users:   tollgatev1.NewUserServiceClient(a.conn),
		audit:   tollgatev1.NewAuditServiceClient(a.conn),
	}, nil
}

// transportCredentials is plain TCP, or TLS with --tls or --tls-ca.
func (a *app) transportCredentials() (credentials.TransportCredentials, error) {
	if a.tlsCA == "" && !a.useTLS {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: a.tlsServerName}
	if a.tlsCA != "" {
		pem, err := os.ReadFile(a.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("read --tls-ca: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", a.tlsCA)
		}
	}
	return credentials.NewTLS(cfg), nil
}

// retryUnavailable retries a call that fails with codes.Unavailable, with
// jittered exponential backoff, until the context's deadline (--timeout).
// Unavailable is what a node that is restarting gives (connection refused),
// and what a write gets while the cluster elects a leader. Other codes are
// returned at once. When no further attempt fits before the deadline, the
// last error is returned, so the user sees why the calls failed rather than
// a bare deadline. A TLS mismatch, which no retry mends, is returned at
// once.
//
// Every attempt of a call carries the same request id, and a key create or
// rotate the same secret seed, so that a write whose first attempt was
// applied before its answer was lost (a leader that stepped down) is
// applied once and answers as the first attempt would have. A node that
// answers "no leader:" reaches too few voters to elect one (a minority
// partition): that is retried only for noLeaderRetry, through a load
// balancer that may pick a node on the majority side.
func (a *app) retryUnavailable(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx = metadata.AppendToOutgoingContext(ctx, mdRequestID, newRequestID())
	fixSecretSeed(req)
	start := time.Now()
	delay := retryBaseDelay
	for {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if status.Code(err) != codes.Unavailable || a.tlsMismatch(ctx, err) != "" {
			return err
		}
		// Sleep between half and all of delay.
		wait := delay/2 + rand.N(delay/2+1)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			return err
		}
		if strings.HasPrefix(status.Convert(err).Message(), "no leader:") && time.Since(start)+wait > noLeaderRetry {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, retryMaxDelay)
	}
}

// tlsMismatch tells, for a connection failure, whether TLS is the cause,
// as a hint for the user; "" when it is not.
func (a *app) tlsMismatch(ctx context.Context, err error) string {
	msg := status.Convert(err).Message()
	if !strings.HasPrefix(msg, "connection error:") {
		// Not this client's connection: a node passing on its own
		// failure to reach another (see the node's forwardInterceptor).
		return ""
	}
	switch {
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the node does not serve TLS on its admin API: drop --tls/--tls-ca (and TOLLGATE_TLS_CA)"
	case strings.Contains(msg, "x509: certificate is valid for"):
		return "the node's certificate does not name the host of --addr: use --tls-server-name with a name it holds"
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:"):
		return "the node's certificate was not accepted: pass the cluster CA with --tls-ca or TOLLGATE_TLS_CA"
	case a.tlsCA == "" && !a.useTLS && strings.Contains(msg, "server preface") && a.speaksTLS(ctx):
		return "the node serves TLS on its admin API: pass the cluster CA with --tls-ca or set TOLLGATE_TLS_CA"
	}
	return ""
}

// speaksTLS reports whether --addr completes a TLS handshake. Only the
// protocol is probed; nothing is sent over it.
func (a *app) speaksTLS(ctx context.Context) bool {
	if a.tlsProbed == 0 {
		a.tlsProbed = 2
		d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if c, err := d.DialContext(pctx, "tcp", a.addr); err == nil {
			_ = c.Close()
			a.tlsProbed = 1
		}
	}
	return a.tlsProbed == 1
}

// mdLagging is the response header in which a write names the nodes that
// had not applied it within the server's bounded wait.
const mdLagging = "x-tollgate-lagging"

// warnLagging warns on stderr when a successful call's response header says
// that some nodes have not applied the write yet.
func (a *app) warnLagging(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var md metadata.MD
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&md))...)
	if err != nil {
		return err
	}
	var nodes []string
	for _, v := range md.Get(mdLagging) {
		for id := range strings.SplitSeq(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				nodes = append(nodes, id)
			}
		}
	}
	if len(nodes) > 0 {
		fmt.Fprintf(a.stderr, "warning: not yet applied on node(s) %s (they lag or are unreachable)\n", strings.Join(nodes, ", "))
	}
	return nil
}

// callContext bounds the whole command by --timeout.
func (a *app) callContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return context.WithTimeout(cmd.Context(), a.timeout)
}

// bearerToken sends "authorization: Bearer <token>" on every call. It is
// allowed over plaintext connections too: a node without --tls-cert serves
// its admin API in the clear, for loopback and private networks.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if t == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return false }

// describe turns an error into the message shown after "tollctl: ",
// using the gRPC status message and adding a hint for common failures.
func (a *app) describe(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unauthenticated:
		if a.token == "" {
			return msg + "\nhint: no admin token given; set TOLLGATE_TOKEN or pass --token"
		}
		return msg + "\nhint: the admin token was rejected; check TOLLGATE_TOKEN or --token"
	case codes.PermissionDenied:
		return msg + "\nhint: the token's role does not allow this; tollctl user whoami shows what it may do"
	case codes.Unavailable:
		if strings.HasPrefix(msg, "no leader:") {
			return msg + "\nhint: a majority of the voters must be up and reach each other; see tollctl cluster status on another node"
		}
		if hint := a.tlsMismatch(context.Background(), err); hint != "" {
			return fmt.Sprintf("cannot connect to tollgate at %s: %s\nhint: %s", a.addr, msg, hint)
		}
		return fmt.Sprintf("cannot reach tollgate at %s: %s\nhint: is tollgate running? check --addr or TOLLGATE_ADDR", a.addr, msg)
	case codes.DeadlineExceeded:
		return fmt.Sprintf("no answer from tollgate at %s within %s: %s\nhint: is tollgate running and is --addr right? raise --timeout for slow links", a.addr, a.timeout, msg)
	case codes.Unimplemented:
		return fmt.Sprintf("%s\nhint: %s does not offer this call; is --addr the Tollgate admin gRPC address, and is tollgate up to date?", msg, a.addr)
	}
	return msg
}
